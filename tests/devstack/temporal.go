package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/captchaflow/captchaflow"
)

// DefaultNamespace is the namespace the stack registers on every start.
const DefaultNamespace = "default"

// defaultTemporalReadyTimeout covers a cold start that creates or upgrades the SQLite file.
const defaultTemporalReadyTimeout = 90 * time.Second

// namespaceRetention is the default namespace's retention, as the CLI's dev server gave it.
const namespaceRetention = 24 * time.Hour

// TemporalOptions configure the local Temporal server (temporal-server on SQLite, every service in one process)
// and its Web UI. Zero ports are replaced by free ones once, at start, and kept across restarts.
type TemporalOptions struct {
	// ServerPath is the temporal-server binary (see TemporalServerPath); temporal-sql-tool, temporal-ui and the
	// SQLite schema (temporal-schema/) are taken from the same directory.
	ServerPath string
	// DBFile is the SQLite file that keeps state across restarts; required. A file the CLI's dev server wrote is
	// upgraded to the server's schema, or moved aside when that fails.
	DBFile string
	// LogPath receives the server's output; the UI's log and the rendered config files go beside it.
	LogPath  string
	Port     int // frontend gRPC
	UIPort   int
	HTTPPort int
	// MetricsPort serves the server's Prometheus metrics.
	MetricsPort int
	// Headless skips the Web UI.
	Headless bool
	// CodecEndpoint is the Web UI's codec server (codec.endpoint; empty: none), known before the UI starts.
	CodecEndpoint string
	// DynamicConfig adds or overrides dynamic config values (JSON values, e.g. "1" or `"text"`).
	DynamicConfig map[string]string
	ReadyTimeout  time.Duration
	// Logf, if set, hears what happened to an existing database (upgraded or replaced).
	Logf func(format string, args ...any)
}

// Temporal is the running local Temporal server and, unless headless, its Web UI.
type Temporal struct {
	opts TemporalOptions
	proc *Process
	ui   *Process
}

// StartTemporal prepares the SQLite file, starts the server, registers the default namespace and captchaflow's
// search attributes, and starts the Web UI; it returns once all of them answer.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	if opts.ServerPath == "" || opts.DBFile == "" || opts.LogPath == "" {
		return nil, errors.New("devstack: temporal needs ServerPath, DBFile and LogPath")
	}
	for _, bin := range temporalBinaries(opts) {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%s not found (build it with tools/build.sh or `make tools`): %w", bin, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(opts.DBFile), 0o755); err != nil {
		return nil, fmt.Errorf("temporal data directory: %w", err)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = defaultTemporalReadyTimeout
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := prepareDatabase(ctx, schemaBeside(opts.ServerPath), opts.DBFile, opts.Logf); err != nil {
		return nil, err
	}
	// A port picked free can be taken by another process before the server binds it (it then exits): pick again.
	for attempt := 1; ; attempt++ {
		t, err := startTemporalOnce(ctx, opts, attempt > 1)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "exited before it became ready") {
			return t, err
		}
	}
}

// temporalBinaries are the executables (and the schema) a start needs.
func temporalBinaries(opts TemporalOptions) []string {
	bins := []string{opts.ServerPath, schemaBeside(opts.ServerPath).tool, schemaBeside(opts.ServerPath).dir}
	if !opts.Headless {
		bins = append(bins, sibling(opts.ServerPath, "temporal-ui"))
	}
	return bins
}

func sibling(path, name string) string { return filepath.Join(filepath.Dir(path), name) }

func startTemporalOnce(ctx context.Context, opts TemporalOptions, freshPorts bool) (*Temporal, error) {
	for _, port := range []*int{&opts.Port, &opts.UIPort, &opts.HTTPPort, &opts.MetricsPort} {
		var err error
		if *port, err = freePortIfZero(*port); err != nil {
			return nil, err
		}
	}
	configFile, err := writeServerConfig(opts, freshPorts)
	if err != nil {
		return nil, err
	}
	proc, err := StartProcess(ProcessSpec{
		Name:    "temporal",
		Path:    opts.ServerPath,
		Args:    []string{"--config-file", configFile, "--allow-no-auth", "start"},
		Env:     MergeEnv(),
		LogPath: opts.LogPath,
	})
	if err != nil {
		return nil, err
	}
	t := &Temporal{opts: opts, proc: proc}
	what := "temporal server on " + t.Address()
	if err := WaitReady(ctx, what, opts.ReadyTimeout, t.registerNamespace, proc); err != nil {
		proc.Kill()
		return nil, err
	}
	if err := t.startUI(ctx); err != nil {
		proc.Kill()
		return nil, err
	}
	return t, nil
}

// registerNamespace is a Check: it registers the default namespace and the search attributes captchaflow
// upserts, each only if missing (what the CLI's dev server did from its flags), and passes once both are served.
func (t *Temporal) registerNamespace(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: t.Address(), Logger: QuietSDKLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: DefaultNamespace, WorkflowExecutionRetentionPeriod: durationpb.New(namespaceRetention)})
	if err != nil && !errors.As(err, new(*serviceerror.NamespaceAlreadyExists)) {
		return fmt.Errorf("register namespace %s: %w", DefaultNamespace, err)
	}
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: DefaultNamespace})
	if err != nil {
		return fmt.Errorf("namespace %s not served yet: %w", DefaultNamespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, key := range captchaflow.SearchAttributeKeys {
		if _, ok := attrs.GetCustomAttributes()[key.GetName()]; !ok {
			missing[key.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 { // last: the endpoint targets a namespace that is served
		return SetUpNexus(ctx, c, DefaultNamespace, captchaflow.DefaultTaskQueue)
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: DefaultNamespace, SearchAttributes: missing})
	return errors.Join(fmt.Errorf("search attributes %v added; checking again", missing), err)
}

// startUI starts the Web UI beside the server, on loopback, unless headless.
func (t *Temporal) startUI(ctx context.Context) (err error) {
	if t.opts.Headless {
		return nil
	}
	t.ui, err = StartProcess(ProcessSpec{
		Name: "temporal-ui",
		Path: sibling(t.opts.ServerPath, "temporal-ui"),
		Args: []string{"-ip", "127.0.0.1", "-port", strconv.Itoa(t.opts.UIPort), "-temporal-address", t.Address()},
		Env:  MergeEnv(map[string]string{"TEMPORAL_CODEC_ENDPOINT": t.opts.CodecEndpoint}), // tools/ui reads it
		// Beside the server's log.
		LogPath: filepath.Join(filepath.Dir(t.opts.LogPath), "temporal-ui.log"),
	})
	if err != nil {
		return err
	}
	if err := WaitReady(ctx, "temporal web UI on "+t.UIURL(), t.opts.ReadyTimeout, HTTPOK(t.UIURL()), t.ui); err != nil {
		t.ui.Kill()
		return err
	}
	return nil
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
	return WaitReady(ctx, "temporal server on "+t.Address(), t.opts.ReadyTimeout, check, t.proc)
}

// Stop shuts the Web UI and the server down gracefully (SIGKILL after the stop timeout).
func (t *Temporal) Stop() error {
	var err error
	if t.ui != nil {
		err = t.ui.Stop()
	}
	return errors.Join(err, t.proc.Stop())
}

// Restart stops the server and starts it again on the same ports and SQLite file, then waits until it is ready;
// the Web UI stays up and reconnects.
func (t *Temporal) Restart(ctx context.Context) error {
	if err := t.proc.Restart(); err != nil {
		return err
	}
	return t.WaitReady(ctx)
}

// Dial connects a client to the default namespace (plaintext: Stack.Dial goes through the stack's codec).
func (t *Temporal) Dial(ctx context.Context) (client.Client, error) {
	return client.DialContext(ctx, client.Options{
		HostPort:  t.Address(),
		Namespace: DefaultNamespace,
		Logger:    QuietSDKLogger(),
	})
}
