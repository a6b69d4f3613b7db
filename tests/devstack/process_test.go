package devstack

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shell starts `sh -c script` with its output in a log under t.TempDir, and kills it at cleanup.
func shell(t *testing.T, script string, stopTimeout time.Duration) *Process {
	t.Helper()
	p, err := StartProcess(ProcessSpec{
		Name:        "sh",
		Path:        "/bin/sh",
		Args:        []string{"-c", script},
		Env:         MergeEnv(),
		LogPath:     filepath.Join(t.TempDir(), "sh.log"),
		StopTimeout: stopTimeout,
	})
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	return p
}

// alive reports whether pid exists and is not a zombie waiting for its new parent to reap it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs (not Linux): signal 0 is all we can check
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// waitForLog polls the log until it contains want, bounded.
func waitForLog(t *testing.T, p *Process, want string) string {
	t.Helper()
	var text string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(p.LogPath())
		text = string(b)
		return strings.Contains(text, want)
	}, 5*time.Second, 10*time.Millisecond, "log never contained %q", want)
	return text
}

// childPID starts a shell that runs a background sleep and prints its PID, and returns both.
func childPID(t *testing.T, script string, stopTimeout time.Duration) (*Process, int) {
	t.Helper()
	p := shell(t, script, stopTimeout)
	text := waitForLog(t, p, "child=")
	line := text[strings.Index(text, "child=")+len("child="):]
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(line, "\n", 2)[0]))
	require.NoError(t, err)
	require.True(t, alive(pid))
	return p, pid
}

func TestStopEndsTheProcessAndItsChildren(t *testing.T) {
	p, child := childPID(t, `sleep 60 & echo child=$!; wait`, 5*time.Second)
	start := time.Now()
	require.NoError(t, p.Stop())
	assert.Less(t, time.Since(start), 4*time.Second, "SIGTERM should have ended it without waiting for SIGKILL")
	assert.False(t, p.Running())
	assert.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 10*time.Millisecond,
		"the child of a stopped process must not be left running")
}

func TestStopFallsBackToSIGKILL(t *testing.T) {
	// The ignored SIGTERM is inherited by the sleep, so only SIGKILL ends either.
	p, child := childPID(t, `trap '' TERM; sleep 60 & echo child=$!; wait`, 300*time.Millisecond)
	start := time.Now()
	err := p.Stop()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not exit within 300ms of SIGTERM; killed")
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.False(t, p.Running())
	assert.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 10*time.Millisecond)
}

func TestKillIsImmediateAndReportedByWait(t *testing.T) {
	p := shell(t, `trap '' TERM; exec sleep 60`, time.Minute)
	p.Kill()
	assert.False(t, p.Running())
	err := p.Wait()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")
}

func TestWaitReturnsTheExitStatus(t *testing.T) {
	p := shell(t, `exit 3`, time.Second)
	err := p.Wait()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 3")
	assert.NoError(t, p.Stop(), "stopping an exited process is a no-op")
}

func TestRestartStartsANewRunInTheSameLog(t *testing.T) {
	p := shell(t, `echo run; exec sleep 60`, 5*time.Second)
	waitForLog(t, p, "run")
	first := p.PID()

	require.NoError(t, p.Restart())
	assert.True(t, p.Running())
	assert.NotEqual(t, first, p.PID())
	assert.False(t, alive(first))
	text := waitForLog(t, p, "run\n=== devstack: starting sh (/bin/sh)")
	assert.Equal(t, 2, strings.Count(text, "=== devstack: starting sh"))

	p.Kill()
	require.NoError(t, p.Restart(), "a killed process can be started again")
	assert.True(t, p.Running())
}

func TestProcessOutputGoesToItsLog(t *testing.T) {
	p := shell(t, `echo to-stdout; echo to-stderr >&2`, time.Second)
	require.NoError(t, p.Wait())
	assert.Contains(t, p.Tail(2), "to-stdout\nto-stderr")
}

func TestStartProcessReportsAMissingBinary(t *testing.T) {
	_, err := StartProcess(ProcessSpec{Name: "ghost", Path: "/nonexistent/ghost", LogPath: filepath.Join(t.TempDir(), "g.log")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghost")
}

func TestProcessDoesNotInheritUnlistedEnv(t *testing.T) {
	t.Setenv("DEVSTACK_TEST_INHERITED", "leak")
	p, err := StartProcess(ProcessSpec{
		Name: "env", Path: "/bin/sh", Args: []string{"-c", `echo "value=[$DEVSTACK_TEST_INHERITED]"`},
		Env: []string{"PATH=/usr/bin:/bin"}, LogPath: filepath.Join(t.TempDir(), "env.log"),
	})
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	assert.Contains(t, p.Tail(1), "value=[]")
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644))
	assert.Equal(t, "c\nd", TailFile(path, 2))
	assert.Equal(t, "a\nb\nc\nd", TailFile(path, 10))
	assert.Contains(t, TailFile(filepath.Join(t.TempDir(), "missing"), 3), "log unavailable")
}
