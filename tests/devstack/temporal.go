package devstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

// DefaultNamespace is the namespace the dev server always creates.
const DefaultNamespace = "default"

// defaultTemporalReadyTimeout covers a cold start that creates and migrates a new SQLite file.
const defaultTemporalReadyTimeout = 90 * time.Second

// TemporalOptions configure a Temporal dev server. Zero ports are replaced by free ones once, at start, and kept
// across restarts.
type TemporalOptions struct {
	// CLIPath is the Temporal CLI binary (see TemporalCLIPath).
	CLIPath string
	// DBFile is the SQLite file that keeps state across restarts; required (an in-memory server could not be
	// restarted without losing every workflow).
	DBFile string
	// LogPath receives the server's output.
	LogPath  string
	Port     int // frontend gRPC
	UIPort   int
	HTTPPort int
	// MetricsPort serves the server's Prometheus metrics.
	MetricsPort int
	Headless    bool
	// DynamicConfig adds or overrides dynamic config values (JSON values, e.g. "1" or `"text"`).
	DynamicConfig map[string]string
	ReadyTimeout  time.Duration
}

// Temporal is a running Temporal dev server.
type Temporal struct {
	opts TemporalOptions
	proc *Process
}

// defaultDynamicConfig keeps one task-queue partition: with a handful of pollers, the default four partitions
// add multi-second tail latency to task dispatch.
var defaultDynamicConfig = map[string]string{
	"matching.numTaskqueueReadPartitions":  "1",
	"matching.numTaskqueueWritePartitions": "1",
}

// StartTemporal starts the dev server and waits until it is healthy and serves the default namespace.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	if opts.CLIPath == "" || opts.DBFile == "" || opts.LogPath == "" {
		return nil, errors.New("devstack: temporal needs CLIPath, DBFile and LogPath")
	}
	if _, err := os.Stat(opts.CLIPath); err != nil {
		return nil, fmt.Errorf("temporal CLI not found at %s (build it with tools/build.sh or `make tools`): %w", opts.CLIPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(opts.DBFile), 0o755); err != nil {
		return nil, fmt.Errorf("temporal data directory: %w", err)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = defaultTemporalReadyTimeout
	}
	// A port picked free can be taken by another process before the server binds it (it then exits): pick again.
	for attempt := 1; ; attempt++ {
		t, err := startTemporalOnce(ctx, opts)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "exited before it became ready") {
			return t, err
		}
	}
}

func startTemporalOnce(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	for _, port := range []*int{&opts.Port, &opts.UIPort, &opts.HTTPPort, &opts.MetricsPort} {
		var err error
		if *port, err = freePortIfZero(*port); err != nil {
			return nil, err
		}
	}
	proc, err := StartProcess(ProcessSpec{
		Name:    "temporal",
		Path:    opts.CLIPath,
		Args:    temporalArgs(opts),
		Env:     MergeEnv(),
		LogPath: opts.LogPath,
	})
	if err != nil {
		return nil, err
	}
	t := &Temporal{opts: opts, proc: proc}
	if err := t.WaitReady(ctx); err != nil {
		t.proc.Kill()
		return nil, err
	}
	return t, nil
}

func temporalArgs(opts TemporalOptions) []string {
	args := []string{
		"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(opts.Port),
		"--ui-port", strconv.Itoa(opts.UIPort),
		"--http-port", strconv.Itoa(opts.HTTPPort),
		"--metrics-port", strconv.Itoa(opts.MetricsPort),
		"--db-filename", opts.DBFile,
		"--log-level", "warn",
		"--color", "never",
	}
	if opts.Headless {
		args = append(args, "--headless")
	}
	// Registered on every start: the workflow upserts them, the ingress queries one.
	for _, key := range captchaflow.SearchAttributeKeys {
		args = append(args, "--search-attribute", key.GetName()+"=Keyword")
	}
	dynamic := maps.Clone(defaultDynamicConfig)
	maps.Copy(dynamic, opts.DynamicConfig)
	for _, key := range slices.Sorted(maps.Keys(dynamic)) {
		args = append(args, "--dynamic-config-value", key+"="+dynamic[key])
	}
	return args
}

// Address is the frontend's host:port.
func (t *Temporal) Address() string { return loopback(t.opts.Port) }

// UIURL is the Web UI's base URL (empty when headless).
func (t *Temporal) UIURL() string {
	if t.opts.Headless {
		return ""
	}
	return "http://" + loopback(t.opts.UIPort)
}

// MetricsURL is the server's Prometheus endpoint.
func (t *Temporal) MetricsURL() string { return "http://" + loopback(t.opts.MetricsPort) + "/metrics" }

// DBFile is the SQLite file holding the server's state.
func (t *Temporal) DBFile() string { return t.opts.DBFile }

// Process is the server process, for chaos tests that want to Kill it.
func (t *Temporal) Process() *Process { return t.proc }

// WaitReady waits until the server is healthy and serves the default namespace.
func (t *Temporal) WaitReady(ctx context.Context) error {
	check, closeCheck, err := TemporalReady(t.Address(), DefaultNamespace)
	if err != nil {
		return err
	}
	defer closeCheck()
	return WaitReady(ctx, "temporal dev server on "+t.Address(), t.opts.ReadyTimeout, check, t.proc)
}

// Stop shuts the server down gracefully (SIGKILL after the stop timeout).
func (t *Temporal) Stop() error { return t.proc.Stop() }

// Restart stops the server and starts it again on the same ports and SQLite file, then waits until it is ready.
func (t *Temporal) Restart(ctx context.Context) error {
	if err := t.proc.Restart(); err != nil {
		return err
	}
	return t.WaitReady(ctx)
}

// Dial connects a client to the default namespace.
func (t *Temporal) Dial(ctx context.Context) (client.Client, error) {
	return client.DialContext(ctx, client.Options{
		HostPort:  t.Address(),
		Namespace: DefaultNamespace,
		Logger:    QuietSDKLogger(),
	})
}
