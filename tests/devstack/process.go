package devstack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultStopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// ProcessSpec describes a process to run. Env is the complete environment (see MergeEnv); the process does not
// inherit the caller's.
type ProcessSpec struct {
	// Name identifies the process in errors and log markers, e.g. "worker".
	Name string
	// Path is the executable; Args exclude it.
	Path string
	Args []string
	Env  []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// LogPath receives stdout and stderr. Restarts append to it.
	LogPath string
	// StopTimeout overrides DefaultStopTimeout.
	StopTimeout time.Duration
}

// Process is a started ProcessSpec. It is safe for concurrent use.
type Process struct {
	spec ProcessSpec

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run has exited
	err  error         // the current run's exit error, valid once done is closed
}

// StartProcess starts spec and returns at once; use a readiness helper to wait until it serves.
func StartProcess(spec ProcessSpec) (*Process, error) {
	if spec.Name == "" || spec.Path == "" || spec.LogPath == "" {
		return nil, errors.New("devstack: process spec needs Name, Path and LogPath")
	}
	if spec.StopTimeout <= 0 {
		spec.StopTimeout = DefaultStopTimeout
	}
	p := &Process{spec: spec}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start() error {
	if err := os.MkdirAll(filepath.Dir(p.spec.LogPath), 0o755); err != nil {
		return fmt.Errorf("%s: create log directory: %w", p.spec.Name, err)
	}
	logFile, err := os.OpenFile(p.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.spec.Name, err)
	}
	// A marker per start makes restarts visible in the log; it names the binary, never the environment (which
	// holds secrets).
	fmt.Fprintf(logFile, "=== devstack: starting %s (%s) at %s\n", p.spec.Name, p.spec.Path, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = p.spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean "inherit"; the spec's environment is complete by contract
	}
	cmd.Dir = p.spec.Dir
	// An *os.File (not a pipe) so Wait does not hang on grandchildren that keep the descriptor open.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = processAttrs()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("%s: start %s: %w", p.spec.Name, p.spec.Path, err)
	}

	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Name is the spec's name.
func (p *Process) Name() string { return p.spec.Name }

// LogPath is where the process writes stdout and stderr.
func (p *Process) LogPath() string { return p.spec.LogPath }

// PID is the current run's process ID (also its process group ID).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Exited is closed when the current run ends.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the current run has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// Wait blocks until the current run exits and returns its exit error (nil for status 0).
func (p *Process) Wait() error {
	<-p.Exited()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop sends SIGTERM to the process group, waits up to the stop timeout for a graceful exit, then sends SIGKILL.
// Stopping an exited process is a no-op. The error is the timeout, if it came to SIGKILL; a non-zero exit status
// after SIGTERM is not an error.
func (p *Process) Stop() error {
	if !p.Running() {
		p.killGroup() // stragglers the leader left behind
		return nil
	}
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.Exited():
		p.killGroup()
		return nil
	case <-time.After(p.spec.StopTimeout):
		p.killGroup()
		<-p.Exited()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.spec.Name, p.spec.StopTimeout)
	}
}

// Kill sends SIGKILL to the process group and waits for the exit: a crash, as the chaos tests need it.
func (p *Process) Kill() {
	p.killGroup()
	<-p.Exited()
}

// Restart stops the process (gracefully, as Stop) and starts it again with the same spec and log file.
func (p *Process) Restart() error {
	stopErr := p.Stop()
	if err := p.start(); err != nil {
		return errors.Join(stopErr, err)
	}
	return stopErr
}

// Tail returns the last n lines of the process's log, for error messages.
func (p *Process) Tail(n int) string { return TailFile(p.spec.LogPath, n) }

func (p *Process) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	// The negative PID addresses the group (Setpgid made the PID the group ID). ESRCH means it is already gone.
	_ = syscall.Kill(-pid, sig)
}

func (p *Process) killGroup() { p.signalGroup(syscall.SIGKILL) }
