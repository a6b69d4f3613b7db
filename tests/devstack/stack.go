package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/internal/config"
)

// defaultComponentReadyTimeout bounds the wait for the simulator, worker and ingress (they start in well under a
// second; the worker and ingress may wait for Temporal's first connection).
const defaultComponentReadyTimeout = 30 * time.Second

// Options configure a Stack. Zero values pick free loopback ports, generated secrets and the provider simulator.
type Options struct {
	// RunDir receives one log file per process; required.
	RunDir string
	// DataDir holds Temporal's SQLite file; defaults to RunDir.
	DataDir string
	// BinDir receives the built binaries; defaults to .bin in the module root.
	BinDir string
	// TemporalServer defaults to TemporalServerPath().
	TemporalServer string

	// Ports on 127.0.0.1; zero means a free one (make run passes the well-known ones).
	TemporalPort      int
	TemporalUIPort    int
	SimulatorPort     int
	WorkerMetricsPort int
	IngressPort       int
	// IngressMetricsPort serves the ingress's /metrics (INGRESS_METRICS_ADDR), apart from its callback port.
	IngressMetricsPort int
	// TemporalHeadless skips the Web UI (tests do not need it).
	TemporalHeadless bool
	// TemporalDynamicConfig adds dynamic config values to the stack's defaults.
	TemporalDynamicConfig map[string]string

	// ProviderBaseURL and ProviderAPIKey choose the provider. Both empty: start the simulator with a generated
	// key. Only the key: the real provider (CaptchaAI) at its default URL, no simulator. A base URL: that
	// provider (for example a simulator the caller runs itself), no simulator.
	ProviderBaseURL string
	ProviderAPIKey  string
	// CallbackSecret and NotifySecret are generated when empty.
	CallbackSecret string
	NotifySecret   string
	// CallbackBaseURL is where the provider sends pingbacks; defaults to the ingress. Point it at a proxy in
	// front of the ingress to cut or delay callbacks.
	CallbackBaseURL string

	// Providers, when set, make a routed stack: one simulator per provider (the first is the main simulator, on
	// SimulatorPort with SimulatorEnv) and a PROVIDERS_FILE naming them, in this order, for the worker.
	Providers []SimProvider

	// Skip* leave a component unstarted; Start<Component> starts it later (e.g. once a proxy is up).
	SkipSimulator bool
	SkipWorker    bool
	SkipIngress   bool

	// KeysFile is CAPTCHAFLOW_KEYS_FILE for every process and the stack's own clients; empty: plaintext payloads.
	// With it and the Web UI, the worker serves the codec on CodecPort (make run's loopback exception, no token)
	// and the UI decodes through it.
	KeysFile  string
	CodecPort int

	// Env overrides per process, applied last (e.g. INGRESS_SIGNAL_TIMEOUT, SIM_SOLVE_MAX).
	SimulatorEnv map[string]string
	WorkerEnv    map[string]string
	IngressEnv   map[string]string

	// ReadyTimeout bounds each component's readiness wait (Temporal gets at least its own default).
	ReadyTimeout time.Duration
	// Logf, if set, receives one line per component that becomes ready.
	Logf func(format string, args ...any)
}

// Stack is the running local stack. Its processes are nil until started.
type Stack struct {
	opts        Options
	bins        Binaries
	useSim      bool
	providerURL string // what the worker calls: the simulator, the given base URL or the real provider

	Temporal *Temporal

	mu        sync.Mutex
	simulator *Process
	extraSims []*Process // the simulators of Providers[1:]
	worker    *Process
	ingress   *Process
}

// Start builds the binaries and starts Temporal, then the simulator, worker and ingress (unless skipped), each
// waited for by its health check. On error everything started so far is stopped.
func Start(ctx context.Context, opts Options) (s *Stack, err error) {
	if opts, err = resolveOptions(opts); err != nil {
		return nil, err
	}
	s = newStack(opts)
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
			s = nil
		}
	}()

	started := time.Now()
	if s.bins, err = BuildBinaries(ctx, opts.BinDir); err != nil {
		return s, err
	}
	s.logf("built binaries in %s", time.Since(started).Round(time.Millisecond))
	if err = s.startTemporal(ctx); err != nil {
		return s, err
	}
	return s, s.startServices(ctx)
}

// newStack picks the provider: the simulator, with a fresh key, unless a real provider's URL or key is given.
func newStack(opts Options) *Stack {
	s := &Stack{opts: opts}
	s.useSim = opts.ProviderBaseURL == "" && opts.ProviderAPIKey == ""
	if s.useSim {
		s.opts.ProviderAPIKey = newProviderKey()
		s.providerURL = "http://" + loopback(opts.SimulatorPort)
	} else {
		s.providerURL = cmp.Or(opts.ProviderBaseURL, config.DefaultProviderBaseURL)
	}
	return s
}

// startTemporal starts the server with its database in the data directory and its log in the run directory.
func (s *Stack) startTemporal(ctx context.Context) (err error) {
	opts := s.opts
	started := time.Now()
	s.Temporal, err = StartTemporal(ctx, TemporalOptions{
		ServerPath:    opts.TemporalServer,
		DBFile:        filepath.Join(opts.DataDir, "temporal.db"),
		LogPath:       filepath.Join(opts.RunDir, "temporal.log"),
		Port:          opts.TemporalPort,
		UIPort:        opts.TemporalUIPort,
		Headless:      opts.TemporalHeadless,
		DynamicConfig: opts.TemporalDynamicConfig,
		CodecEndpoint: s.CodecURL(),
		ReadyTimeout:  max(opts.ReadyTimeout, defaultTemporalReadyTimeout),
		Logf:          s.logf,
	})
	if err != nil {
		return err
	}
	s.logf("temporal ready on %s in %s", s.Temporal.Address(), time.Since(started).Round(time.Millisecond))
	return nil
}

// startServices starts simulator, worker and ingress in dependency order, leaving out the skipped ones.
func (s *Stack) startServices(ctx context.Context) error {
	if s.useSim && !s.opts.SkipSimulator {
		if err := s.StartSimulator(ctx); err != nil {
			return err
		}
		if err := s.startExtraSimulators(ctx); err != nil {
			return err
		}
	}
	if !s.opts.SkipWorker {
		if err := s.StartWorker(ctx); err != nil {
			return err
		}
	}
	if !s.opts.SkipIngress {
		if err := s.StartIngress(ctx); err != nil {
			return err
		}
	}
	return nil
}

func resolveOptions(opts Options) (Options, error) {
	if opts.RunDir == "" {
		return opts, errors.New("devstack: Options.RunDir is required")
	}
	var err error
	if opts.RunDir, err = filepath.Abs(opts.RunDir); err != nil {
		return opts, err
	}
	if opts.DataDir == "" {
		opts.DataDir = opts.RunDir
	}
	if opts.DataDir, err = filepath.Abs(opts.DataDir); err != nil {
		return opts, err
	}
	if opts.BinDir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return opts, err
		}
		opts.BinDir = filepath.Join(root, ".bin")
	}
	if opts.TemporalServer == "" {
		if opts.TemporalServer, err = TemporalServerPath(); err != nil {
			return opts, err
		}
	}
	for _, port := range []*int{&opts.TemporalPort, &opts.TemporalUIPort, &opts.SimulatorPort, &opts.WorkerMetricsPort, &opts.IngressPort, &opts.IngressMetricsPort, &opts.CodecPort} {
		if *port, err = freePortIfZero(*port); err != nil {
			return opts, err
		}
	}
	opts.CallbackSecret = cmp.Or(opts.CallbackSecret, newCallbackSecret())
	opts.NotifySecret = cmp.Or(opts.NotifySecret, newNotifySecret())
	if opts.CallbackBaseURL == "" {
		opts.CallbackBaseURL = "http://" + loopback(opts.IngressPort)
	}
	if err := resolveProviders(&opts); err != nil {
		return opts, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = defaultComponentReadyTimeout
	}
	if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
		return opts, fmt.Errorf("create run directory: %w", err)
	}
	return opts, nil
}

// StartSimulator starts the provider simulator, or restarts it if it was stopped, and waits for /healthz.
func (s *Stack) StartSimulator(ctx context.Context) error {
	if !s.useSim {
		return errors.New("devstack: this stack uses an external provider, not the simulator")
	}
	env := map[string]string{
		"SIM_ADDR":     loopback(s.opts.SimulatorPort),
		"SIM_API_KEYS": s.opts.ProviderAPIKey,
	}
	overrides := s.opts.SimulatorEnv
	if s.routed() {
		overrides = s.providerSimEnv(0)
	}
	return s.startComponent(ctx, &s.simulator, "simulator", s.bins.Simulator, env, overrides, s.SimulatorURL()+"/healthz")
}

// StartWorker starts the worker, or restarts it after Kill or Stop, and waits for its /healthz.
func (s *Stack) StartWorker(ctx context.Context) error {
	env := s.workerEnv()
	env["WORKER_METRICS_ADDR"] = loopback(s.opts.WorkerMetricsPort)
	if s.CodecURL() != "" { // the loopback exception: the local Web UI has no sign-in to pass a token from
		ui := strconv.Itoa(s.opts.TemporalUIPort)
		maps.Copy(env, map[string]string{"CODEC_ADDR": loopback(s.opts.CodecPort), "CODEC_LOOPBACK_WITHOUT_TOKEN": "true",
			"CODEC_UI_ORIGINS": "http://localhost:" + ui + ",http://127.0.0.1:" + ui})
	}
	if s.routed() {
		file, err := s.writeProvidersFile()
		if err != nil {
			return err
		}
		delete(env, "CAPTCHAAI_API_KEY")
		delete(env, "CAPTCHAAI_BASE_URL")
		maps.Copy(env, file)
	}
	return s.startComponent(ctx, &s.worker, "worker", s.bins.Worker, env, s.opts.WorkerEnv, s.WorkerMetricsURL()+"/healthz")
}

// StartExtraWorker starts one more worker process beside the stack's own, with the same environment but for
// overrides (TASK_QUEUE, PROVIDER_THREADS, …) and a metrics port of its own, and waits for its /healthz. The caller
// stops it; Stop does not.
func (s *Stack) StartExtraWorker(ctx context.Context, name string, overrides map[string]string) (*Process, error) {
	return s.StartWorkerFrom(ctx, name, "", overrides)
}

// StartWorkerFrom is StartExtraWorker with the worker binary bin (another build's, say; "": the stack's).
func (s *Stack) StartWorkerFrom(ctx context.Context, name, bin string, overrides map[string]string) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	own := map[string]string{"WORKER_METRICS_ADDR": loopback(port)}
	p, err := StartProcess(ProcessSpec{
		Name:    name,
		Path:    cmp.Or(bin, s.bins.Worker),
		Env:     MergeEnv(s.workerEnv(), s.opts.WorkerEnv, overrides, own),
		LogPath: filepath.Join(s.opts.RunDir, name+".log"),
	})
	if err != nil {
		return nil, err
	}
	if err := WaitReady(ctx, name, s.opts.ReadyTimeout, HTTPOK("http://"+loopback(port)+"/healthz"), p); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// workerEnv is the environment every worker of the stack gets (the main one also its metrics port).
func (s *Stack) workerEnv() map[string]string {
	env := map[string]string{
		"CAPTCHAAI_API_KEY":     s.opts.ProviderAPIKey,
		"CAPTCHAAI_BASE_URL":    s.providerURL,
		"CALLBACK_BASE_URL":     s.opts.CallbackBaseURL,
		"CALLBACK_SECRET":       s.opts.CallbackSecret,
		"NOTIFY_SECRET":         s.opts.NotifySecret,
		"TASK_QUEUE":            captchaflow.DefaultTaskQueue,
		"TEMPORAL_ADDRESS":      s.Temporal.Address(),
		"TEMPORAL_NAMESPACE":    DefaultNamespace,
		"CAPTCHAFLOW_KEYS_FILE": s.opts.KeysFile,
	}
	// The webhook receivers of the demo and the tests (devstack/downstream) listen on 127.0.0.1, an address the
	// worker only delivers to when told so.
	env["NOTIFY_ALLOW_PRIVATE"] = "true"
	return env
}

// StartIngress starts the ingress, or restarts it after Kill or Stop, and waits for /readyz (Temporal reachable).
func (s *Stack) StartIngress(ctx context.Context) error { return s.startIngress(ctx, nil) }

// RestartIngressWith stops the ingress and starts a fresh process with extra on top of its environment (nil: as
// configured), e.g. the bench's keys file for its encrypted scenarios; a later StartIngress restarts it so.
func (s *Stack) RestartIngressWith(ctx context.Context, extra map[string]string) error {
	s.mu.Lock()
	p := s.ingress
	s.ingress = nil // a Process keeps its environment: a new one gets the new
	s.mu.Unlock()
	if p != nil {
		if err := p.Stop(); err != nil {
			return err
		}
	}
	return s.startIngress(ctx, extra)
}

func (s *Stack) startIngress(ctx context.Context, extra map[string]string) error {
	env := map[string]string{
		"INGRESS_ADDR":         loopback(s.opts.IngressPort),
		"INGRESS_METRICS_ADDR": loopback(s.opts.IngressMetricsPort),
		"CALLBACK_SECRET":      s.opts.CallbackSecret,
		"TEMPORAL_ADDRESS":     s.Temporal.Address(),
		"TEMPORAL_NAMESPACE":   DefaultNamespace,
		// The same file: make run has one key; a deployment gives the ingress the current key alone.
		"CAPTCHAFLOW_KEYS_FILE": s.opts.KeysFile,
	}
	overrides := maps.Clone(s.opts.IngressEnv)
	if overrides == nil {
		overrides = map[string]string{}
	}
	maps.Copy(overrides, extra)
	return s.startComponent(ctx, &s.ingress, "ingress", s.bins.Ingress, env, overrides, s.IngressURL()+"/readyz")
}

func (s *Stack) startComponent(ctx context.Context, slot **Process, name, binary string, env, overrides map[string]string, readyURL string) error {
	started := time.Now()
	s.mu.Lock()
	proc := *slot
	s.mu.Unlock()
	if proc != nil {
		if proc.Running() {
			return fmt.Errorf("devstack: %s is already running", name)
		}
		if err := proc.Restart(); err != nil {
			return err
		}
	} else {
		var err error
		proc, err = StartProcess(ProcessSpec{
			Name:    name,
			Path:    binary,
			Env:     MergeEnv(env, overrides),
			LogPath: filepath.Join(s.opts.RunDir, name+".log"),
		})
		if err != nil {
			return err
		}
		s.mu.Lock()
		*slot = proc
		s.mu.Unlock()
	}
	if err := WaitReady(ctx, name, s.opts.ReadyTimeout, HTTPOK(readyURL), proc); err != nil {
		return err
	}
	s.logf("%s ready in %s", name, time.Since(started).Round(time.Millisecond))
	return nil
}

// Stop stops the ingress, worker, simulator and Temporal, in that order, each gracefully with a bounded wait.
func (s *Stack) Stop() error {
	s.mu.Lock()
	procs := append([]*Process{s.ingress, s.worker, s.simulator}, s.extraSims...)
	s.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	if s.Temporal != nil {
		errs = append(errs, s.Temporal.Stop())
	}
	return errors.Join(errs...)
}

// Simulator, Worker and Ingress are the component processes (nil until started), e.g. to Kill the worker.
func (s *Stack) Simulator() *Process { return s.get(&s.simulator) }
func (s *Stack) Worker() *Process    { return s.get(&s.worker) }
func (s *Stack) Ingress() *Process   { return s.get(&s.ingress) }

func (s *Stack) get(slot **Process) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *slot
}

// UsesSimulator reports whether the stack runs the provider simulator (rather than an external provider).
func (s *Stack) UsesSimulator() bool { return s.useSim }

// SimulatorURL is the simulator's base URL (also the worker's provider URL when UsesSimulator).
func (s *Stack) SimulatorURL() string { return "http://" + loopback(s.opts.SimulatorPort) }

// ProviderURL is the provider base URL the worker uses.
func (s *Stack) ProviderURL() string { return s.providerURL }

// IngressURL is the ingress's base URL.
func (s *Stack) IngressURL() string { return "http://" + loopback(s.opts.IngressPort) }

// IngressPort is the ingress's port (fixed for the stack's life, so a restarted ingress comes back on it).
func (s *Stack) IngressPort() int { return s.opts.IngressPort }

// IngressMetricsURL is the base URL of the ingress's /metrics, which its callback port does not serve.
func (s *Stack) IngressMetricsURL() string { return "http://" + loopback(s.opts.IngressMetricsPort) }

// CallbackBaseURL is what the worker gives the provider for pingbacks.
func (s *Stack) CallbackBaseURL() string { return s.opts.CallbackBaseURL }

// WorkerMetricsURL is the base URL of the worker's /metrics and /healthz.
func (s *Stack) WorkerMetricsURL() string { return "http://" + loopback(s.opts.WorkerMetricsPort) }

// ProviderAPIKey is the key the worker uses (generated for the simulator).
func (s *Stack) ProviderAPIKey() string { return s.opts.ProviderAPIKey }

// CallbackSecret is the secret that signs callback tokens.
func (s *Stack) CallbackSecret() string { return s.opts.CallbackSecret }

// NotifySecret is the secret that signs deliveries to notify_url.
func (s *Stack) NotifySecret() string { return s.opts.NotifySecret }

// RunDir holds the processes' logs.
func (s *Stack) RunDir() string { return s.opts.RunDir }

// Binaries are the built executables (the starter among them).
func (s *Stack) Binaries() Binaries { return s.bins }

// Dial connects a client to the stack's Temporal, default namespace, through the stack's codec when it has keys.
func (s *Stack) Dial(ctx context.Context) (client.Client, error) {
	return s.DialNamespace(ctx, DefaultNamespace)
}

// DialNamespace is Dial in namespace: a caller team's client reads the encrypted results its operations return.
func (s *Stack) DialNamespace(ctx context.Context, namespace string) (client.Client, error) {
	opts := client.Options{HostPort: s.Temporal.Address(), Namespace: namespace, Logger: QuietSDKLogger()}
	if _, err := codec.Configure(&opts, s.opts.KeysFile, nil); err != nil {
		return nil, err
	}
	return client.DialContext(ctx, opts)
}

// CodecURL is the codec server's base URL: empty without keys or without the Web UI.
func (s *Stack) CodecURL() string {
	if s.opts.KeysFile == "" || s.opts.TemporalHeadless {
		return ""
	}
	return "http://" + loopback(s.opts.CodecPort)
}

// ClientEnv is the environment a captchaflow client (the starter, the temporal CLI) needs to reach this stack.
func (s *Stack) ClientEnv() map[string]string {
	return map[string]string{
		"TEMPORAL_ADDRESS":      s.Temporal.Address(),
		"TEMPORAL_NAMESPACE":    DefaultNamespace,
		"CAPTCHAFLOW_KEYS_FILE": s.opts.KeysFile,
	}
}

func (s *Stack) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}
