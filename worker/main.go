// Command worker runs SolveCaptcha and its activities; configuration is the environment (internal/config, envconfig).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/workflows"
)

func main() {
	var level slog.Level
	_ = level.UnmarshalText([]byte(os.Getenv("LOG_LEVEL"))) // unset or unknown: Info
	logger := slog.New(telemetry.LogHandler{Handler: slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})})
	slog.SetDefault(logger) // what libraries log (the OpenTelemetry SDK's errors) is a JSON line too
	if err := run(logger); err != nil {
		logger.Error("worker stopped", "error", err)
		if errors.As(err, new(configError)) {
			os.Exit(2) // the operator must fix the configuration
		}
		os.Exit(1)
	}
}

// configError marks problems an operator must fix before the worker can start.
type configError struct{ error }

// run is Dial → New → Register → Run, after the checks that stop a misconfigured worker before it takes a task.
func run(logger *slog.Logger) error {
	cfg, acts, err := loadConfig()
	if err != nil {
		return configError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := newMetrics(logger)
	if err != nil {
		return err
	}
	defer m.Close()
	opts, keys, flushTraces, err := clientOptions(ctx, logger, m.handler)
	if err != nil {
		return configError{err}
	}
	defer flushTraces() // last: after the worker stopped, its last spans ended
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	logger = logger.With("task_queue", cfg.TaskQueue, "namespace", opts.Namespace)
	if err := checkSearchAttributes(ctx, c, opts.Namespace, acts.Providers != nil); err != nil {
		return configError{err}
	}
	if cfg.StickyCacheSize > 0 { // before the first worker.New (any, the activity-only ones too) creates the cache
		worker.SetStickyWorkflowCacheSize(cfg.StickyCacheSize)
	}
	// The semaphores' worker starts first and stops last: tasks ask it for slots until their worker has stopped.
	stopThreads, err := workflows.StartThreadsWorker(c, cfg.TaskQueue, worker.Options{WorkerStopTimeout: cfg.ShutdownTimeout}, acts)
	if err != nil {
		return err
	}
	defer stopThreads()
	stopWorkers, err := startPollers(ctx, c, cfg, acts, opts, logger)
	if err != nil {
		return err
	}
	defer stopWorkers() // waits up to SHUTDOWN_TIMEOUT for running activities
	keepBalanceSchedule(ctx, c.ScheduleClient(), cfg, logger)
	if _, err := m.serve(cfg, acts.Providers, opts.Namespace, keys, logger); err != nil {
		return err
	}
	logger.Info("worker ready", "temporal", opts.HostPort, "provider", cfg.ProviderBaseURL, "providers_file", cfg.ProvidersFile,
		"callback_base_url", cfg.CallbackBaseURL, "provider_threads", cfg.ProviderThreads)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// codecOptions trims the token: a file's trailing newline is not part of it.
func codecOptions(cfg config.Worker, namespace string) codec.ServerOptions {
	return codec.ServerOptions{Namespace: namespace, Origins: cfg.CodecUIOrigins,
		Token: strings.TrimSpace(cfg.CodecToken.Reveal()), LoopbackWithoutToken: cfg.CodecLoopbackWithoutToken}
}

// clientOptions are config.ClientOptions with the worker's metrics and namespace; the func flushes traces, logging a failure.
func clientOptions(ctx context.Context, logger *slog.Logger, metrics client.MetricsHandler) (client.Options, *codec.Codec, func(), error) {
	opts, keys, flush, err := config.ClientOptions(ctx, "captchaflow-worker", logger, logger)
	opts.Namespace = cmp.Or(opts.Namespace, client.DefaultNamespace)
	opts.MetricsHandler = metrics
	// The Web UI's Workers page lists a worker once its heartbeat arrives: 10 s, not the SDK's 60 s.
	opts.WorkerHeartbeatInterval = 10 * time.Second
	return opts, keys, func() {
		if err := flush(context.Background()); err != nil {
			logger.Warn("traces not flushed", "error", err)
		}
	}, err
}

func newWorker(c client.Client, cfg config.Worker, acts *activities.Activities) worker.Worker {
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     cfg.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: cfg.MaxConcurrentWorkflowTasks,
		WorkerStopTimeout:                      cfg.ShutdownTimeout,
	})
	settings := workflows.Settings{ProviderThreads: activities.PlannedThreads(acts), Pacing: acts.Pace}
	if acts.Providers != nil {
		for _, p := range acts.Providers.All() {
			settings.Providers = append(settings.Providers, p.Name)
		}
	}
	workflows.Register(w, acts, settings)
	w.RegisterNexusService(captchaflow.NexusService(cfg.NexusCallers...)) // other teams' workflows reach tasks through an endpoint only
	return w
}

// startPollers starts the task queue's worker, each account's paced queues (with their pacer) and the routing exchange.
func startPollers(ctx context.Context, c client.Client, cfg config.Worker, acts *activities.Activities, opts client.Options,
	logger *slog.Logger) (stop func(), err error) {
	acts.DataConverter = opts.DataConverter // the report's lookup reads raw history: through the codec
	go newPacer(c, cfg, acts, opts).Keep(ctx, 2*time.Second, func(queue string, err error) {
		logger.Warn("reading a provider queue's limit", "queue", queue, "error", err)
	})
	stopWorkers, err := startAll(append(providerWorkers(c, cfg, acts), newWorker(c, cfg, acts)))
	if err != nil {
		return nil, err
	}
	stopRouting, err := workflows.ShareRouting(c, cfg.TaskQueue, acts, worker.Options{WorkerStopTimeout: cfg.ShutdownTimeout}, logger)
	if err != nil {
		stopWorkers()
		return nil, err
	}
	return func() { stopRouting(); stopWorkers() }, nil
}

// startAll starts ws; stop stops those started all at once, so that none takes new requests while another drains.
func startAll(ws []worker.Worker) (stop func(), err error) {
	stop = func() {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(w.Stop)
		}
		wg.Wait()
	}
	for i, w := range ws {
		if err := w.Start(); err != nil {
			ws = ws[:i] // those started
			stop()
			return nil, fmt.Errorf("starting worker: %w", err)
		}
	}
	return stop, nil
}

// newPacer paces the accounts of the worker's providers: PROVIDERS_FILE's, or the one of CAPTCHAAI_*.
func newPacer(c client.Client, cfg config.Worker, acts *activities.Activities, opts client.Options) *activities.Pacer {
	rates := map[string]providers.Rates{}
	if acts.Providers == nil {
		rates[activities.SingleProvider] = providers.Rates{Submits: cfg.SubmitsPerSecond, Results: cfg.ResultsPerSecond}.Or(providers.DocumentedRates(cfg.ProviderBaseURL))
	} else {
		for _, p := range acts.Providers.All() {
			rates[p.Name] = p.Rates
		}
	}
	host, _ := os.Hostname()
	acts.Pace = &activities.Pacer{Service: c.WorkflowService(), Namespace: opts.Namespace, TaskQueue: cfg.TaskQueue,
		Identity: fmt.Sprintf("%s@%x", cmp.Or(opts.Identity, fmt.Sprintf("%d@%s", os.Getpid(), host)), rand.Uint32()), Rates: rates} // one per worker: lanes count them
	return acts.Pace
}

// providerWorkers poll each account's submit and results queues (unconfigured ones too: a keeper may pace them); the
// rate they ask for is the configured one less the lanes' share (PollerRate), which a keeper's or an operator's limit
// (set through the API) overrides.
func providerWorkers(c client.Client, cfg config.Worker, acts *activities.Activities) (ws []worker.Worker) {
	for name, r := range acts.Pace.Rates {
		for kind, rate := range activities.QueueRates(r) {
			w := worker.New(c, activities.ProviderQueue(cfg.TaskQueue, name, kind), worker.Options{DisableWorkflowWorker: true,
				MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentActivities, TaskQueueActivitiesPerSecond: activities.PollerRate(kind, rate),
				WorkerStopTimeout: cfg.ShutdownTimeout, Identity: acts.Pace.Identity}) // the identity its lanes look for
			// Named Submit or Poll, as SolveCaptcha schedules them.
			w.RegisterActivity(map[string]any{activities.SubmitQueue: acts.Submit, activities.ResultsQueue: acts.Poll}[kind])
			ws = append(ws, w)
		}
	}
	return ws
}

// loadConfig checks the settings and builds the activities (PROVIDERS_FILE's providers, or CAPTCHAAI_*'s) before dialling.
func loadConfig() (config.Worker, *activities.Activities, error) {
	cfg, err := config.LoadWorker()
	if err = cmp.Or(err, checkSettings(cfg)); err != nil {
		return cfg, nil, err
	}
	acts := &activities.Activities{
		CallbackBaseURL:         cfg.CallbackBaseURL,
		CallbackSecret:          cfg.CallbackSecret.Reveal(),
		NotifySecret:            cfg.NotifySecret.Reveal(),
		DeliveryTimeout:         cfg.DeliveryRequestTimeout,
		NotifyAllowPrivate:      cfg.NotifyAllowPrivate,
		CallbackTimeoutByMethod: cfg.CallbackTimeoutByMethod,
		ProviderThreads:         cfg.ProviderThreads,
	}
	if cfg.ProvidersFile == "" {
		if acts.Provider, err = providers.NewInPHP(cfg.ProviderBaseURL, cfg.ProviderAPIKey.Reveal(), providers.WithTimeout(cfg.ProviderTimeout)); err != nil {
			return cfg, nil, fmt.Errorf("CAPTCHAAI_BASE_URL / CAPTCHAAI_API_KEY: %w", err)
		}
		return cfg, acts, nil
	}
	f, err := providers.ReadFile(cfg.ProvidersFile, os.Getenv)
	if err != nil {
		return cfg, nil, err
	}
	circuits := providers.DefaultCircuitSettings
	circuits.GiveUp, circuits.NoSlotBudget = cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget
	acts.Providers, err = providers.Build(f, os.Getenv, cfg.ProviderTimeout, circuits)
	for _, spec := range f.Providers { // each key variable is unset once read
		_ = os.Unsetenv(spec.APIKeyEnv)
	}
	if err != nil {
		return cfg, nil, fmt.Errorf("PROVIDERS_FILE %s: %w", cfg.ProvidersFile, err)
	}
	return cfg, acts, nil
}

// checkSearchAttributes refuses to start without the workflow's search attributes (its upserts would stick every task).
func checkSearchAttributes(ctx context.Context, c client.Client, namespace string, routed bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes of namespace %q: %w", namespace, err)
	}
	keys := captchaflow.SearchAttributeKeys
	if !routed { // CaptchaProvider, the last, is upserted only by tasks of a worker with PROVIDERS_FILE
		keys = keys[:len(keys)-1]
	}
	var missing, how []string
	for _, key := range keys {
		if name := key.GetName(); resp.GetCustomAttributes()[name] != enums.INDEXED_VALUE_TYPE_KEYWORD {
			missing, how = append(missing, name), append(how, "--name "+name+" --type Keyword")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("namespace %q lacks the Keyword search attribute(s) %s; register them with: temporal operator "+
		"search-attribute create --namespace %s %s", namespace, strings.Join(missing, ", "), namespace, strings.Join(how, " "))
}

// MinBalanceInterval is the shortest PROVIDER_BALANCE_INTERVAL: at most one read a minute per namespace.
const MinBalanceInterval = time.Minute

// keepBalanceSchedule creates the balance Schedule (first run at once), or brings an existing one to this worker's
// interval, queue and overlap policy: the schedule, not the workers, sets the pace. A failure costs the gauge only.
func keepBalanceSchedule(ctx context.Context, sc client.ScheduleClient, cfg config.Worker, logger *slog.Logger) {
	if cfg.ProviderBalanceInterval <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.ProviderBalanceInterval}}}
	action := &client.ScheduleWorkflowAction{ID: "captchaflow-balance-check", // the server appends the start time
		Workflow: captchaflow.BalanceWorkflowType, TaskQueue: cfg.TaskQueue,
		WorkflowRunTimeout: workflows.BalanceCheckTimeout + 10*time.Second, WorkflowTaskTimeout: 10 * time.Second}
	_, err := sc.Create(ctx, client.ScheduleOptions{ID: captchaflow.BalanceScheduleID, Spec: spec, Action: action,
		Overlap: enums.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: time.Minute, TriggerImmediately: true,
		Note: "created by the captchaflow worker: reads the provider balance (res.php?action=getbalance)"})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = sc.GetHandle(ctx, captchaflow.BalanceScheduleID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				s := in.Description.Schedule
				s.Spec, s.Action = &spec, action
				s.Policy = cmp.Or(s.Policy, &client.SchedulePolicies{})
				s.Policy.Overlap = enums.SCHEDULE_OVERLAP_POLICY_SKIP
				return &client.ScheduleUpdate{Schedule: &s}, nil
			},
		})
	}
	if err != nil {
		logger.Warn("the balance schedule could not be created or updated: the provider balance may not be read",
			"schedule_id", captchaflow.BalanceScheduleID, "error", err)
	}
}

// Bounds on the routing settings: a shorter give-up pays again over a blip, a longer one strands tasks on a dead provider.
const minGiveUp, maxGiveUp, minNoSlotBudget = 10 * time.Second, 10 * time.Minute, 5 * time.Second

// checkSettings refuses, all at once and never quoting a secret, the settings that would fail every task later.
func checkSettings(cfg config.Worker) error {
	errs := []error{activities.CheckNotifySecret(cfg.NotifySecret.Reveal())}
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// What Submit extends (the same URLFor), and no query or fragment, which every pingback URL keeps.
	u, err := url.Parse(cfg.CallbackBaseURL)
	if err == nil && (u.RawQuery != "" || u.Fragment != "" || u.ForceQuery) {
		err = fmt.Errorf("%q must not have a query or fragment", u.Redacted())
	} else if err == nil {
		_, err = callbackauth.URLFor(cfg.CallbackBaseURL, "preflight", "x", callbackauth.Submission{RunID: "preflight", N: 1})
	}
	check(err != nil, "CALLBACK_BASE_URL: %v", err)
	// A request cut short by its attempt ends as a timed-out activity (a dead worker, to Temporal), not its own error.
	const shorter = "%s: %s must be positive and shorter than %s, the start-to-close timeout of one %s activity attempt"
	check(cfg.ProviderTimeout <= 0 || cfg.ProviderTimeout >= workflows.ProviderStartToClose, shorter,
		"CAPTCHAAI_TIMEOUT", cfg.ProviderTimeout, workflows.ProviderStartToClose, "provider")
	check(cfg.DeliveryRequestTimeout <= 0 || cfg.DeliveryRequestTimeout >= workflows.DeliverStartToClose, shorter,
		"NOTIFY_REQUEST_TIMEOUT", cfg.DeliveryRequestTimeout, workflows.DeliverStartToClose, "delivery")
	check(cfg.ProviderBalanceInterval != 0 && cfg.ProviderBalanceInterval < MinBalanceInterval, "PROVIDER_BALANCE_INTERVAL: "+
		"%s is shorter than %s (the balance is read at most once a minute per namespace); 0 leaves the schedule alone",
		cfg.ProviderBalanceInterval, MinBalanceInterval)
	low := cfg.ProviderBalanceLow
	check(low < 0 || math.IsNaN(low) || math.IsInf(low, 0), "PROVIDER_BALANCE_LOW: %v is not a balance (>= 0; 0 = no low-balance alert)", low)
	check(cfg.ProviderThreads < 0 || cfg.ProviderThreads > providers.MaxThreads, "PROVIDER_THREADS: %d is outside [0, %d] (0 or unset "+
		"turns admission control off)", cfg.ProviderThreads, providers.MaxThreads)
	for i, v := range []float64{cfg.SubmitsPerSecond, cfg.ResultsPerSecond} {
		check(!(v >= 0 && v <= providers.MaxRate), "%s: %v is outside [0, %d] (0 or unset: the provider's documented budget; none but 2captcha's)",
			[]string{"CAPTCHAAI_SUBMITS_PER_SECOND", "CAPTCHAAI_RESULTS_PER_SECOND"}[i], v, providers.MaxRate)
	}
	if cfg.CodecAddr != "" { // a codec server without keys, or one that would answer anyone
		if err = codecOptions(cfg, "").Check(cfg.CodecAddr); os.Getenv(codec.KeysFileEnv) == "" {
			err = fmt.Errorf("the codec server needs %s", codec.KeysFileEnv)
		}
		check(err != nil, "CODEC_ADDR: %v", err)
	}
	if cfg.ProvidersFile != "" { // routing's settings: unused without the file
		check(cfg.ProviderThreads != 0, "PROVIDER_THREADS: not read with PROVIDERS_FILE, whose providers' threads are "+
			"the plans; unset it and set threads in %s", cfg.ProvidersFile)
		check(cfg.SubmitsPerSecond != 0 || cfg.ResultsPerSecond != 0, "CAPTCHAAI_SUBMITS_PER_SECOND, CAPTCHAAI_RESULTS_PER_SECOND: "+
			"not read with PROVIDERS_FILE; unset them and set submits_per_second and results_per_second in %s", cfg.ProvidersFile)
		check(cfg.ProviderGiveUp < minGiveUp || cfg.ProviderGiveUp > maxGiveUp, "PROVIDER_GIVE_UP: %s is outside [%s, %s]",
			cfg.ProviderGiveUp, minGiveUp, maxGiveUp)
		check(cfg.ProviderNoSlotBudget < minNoSlotBudget || cfg.ProviderNoSlotBudget > maxGiveUp,
			"PROVIDER_NO_SLOT_BUDGET: %s is outside [%s, %s]", cfg.ProviderNoSlotBudget, minNoSlotBudget, maxGiveUp)
	}
	return errors.Join(errs...)
}

// metrics exports the SDK's and the workflows' metrics (both through the client's handler) on /metrics.
type metrics struct {
	registry *prom.Registry
	handler  client.MetricsHandler
	io.Closer
}

func newMetrics(logger *slog.Logger) (*metrics, error) {
	registry := prom.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter, err := tallyprom.Configuration{TimerType: "histogram"}.NewReporter(tallyprom.ConfigurationOptions{
		Registry: registry, OnError: func(err error) { logger.Warn("metrics reporter", "error", err) }})
	if err != nil {
		return nil, err
	}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{CachedReporter: reporter, Separator: tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions}, time.Second)
	return &metrics{registry, sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer}, nil
}

// serve exports the gauges and collectors, serves /metrics and /healthz (unless WORKER_METRICS_ADDR is empty) and,
// with CODEC_ADDR, the codec server (the Web UI's and the CLI's decoding); it returns the metrics address.
func (m *metrics) serve(cfg config.Worker, set *providers.Set, namespace string, keys *codec.Codec, logger *slog.Logger) (string, error) {
	if low := cfg.ProviderBalanceLow; low > 0 { // the low-balance alert's threshold
		m.handler.WithTags(map[string]string{"namespace": namespace}).Gauge(activities.MetricProviderBalanceLowThreshold).Update(low)
	}
	if set != nil && set.Routed { // read at scrape, so a circuit half-opened by time shows it
		if err := m.registry.Register(modelCollector{set, prom.Labels{"namespace": namespace, "task_queue": cfg.TaskQueue}}); err != nil {
			return "", err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	addr, err := listen(cfg.MetricsAddr, "WORKER_METRICS_ADDR", "metrics server", mux, logger)
	if err != nil {
		return "", err
	} else if addr != "" {
		logger.Info("metrics listening", "addr", addr)
	}
	codecAddr, err := listen(cfg.CodecAddr, "CODEC_ADDR", "codec server", codec.Handler(keys, codecOptions(cfg, namespace)), logger)
	if codecAddr != "" {
		logger.Info("codec server listening", "addr", codecAddr, "token", cfg.CodecToken != "", "origins", cfg.CodecUIOrigins)
	}
	return addr, err
}

// listen serves h on addr ("": nowhere), naming addr's variable env in errors and the server name in its end's log.
func listen(addr, env, name string, h http.Handler, logger *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", env, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() { logger.Error(name, "error", srv.Serve(ln)) }()
	return ln.Addr().String(), nil
}

// modelCollector exports a routed worker's circuit gauges, the routing model's scores and the prices.
type modelCollector struct {
	set    *providers.Set
	labels prom.Labels
}

func (c modelCollector) Describe(ch chan<- *prom.Desc) {} // unchecked: the providers and methods grow as tasks come

func (c modelCollector) Collect(ch chan<- prom.Metric) {
	emit := func(name, help string, v float64, labels ...string) { // provider, then method
		desc := prom.NewDesc(name, help, []string{"provider", "method"}[:len(labels)], c.labels)
		ch <- prom.MustNewConstMetric(desc, prom.GaugeValue, v, labels...)
	}
	const modelHelp = "the routing model's (docs/operations.md)"
	for _, p := range c.set.All() {
		emit(activities.MetricCircuitState, "a provider's circuit: 0 closed, 1 half-open, 2 open", float64(c.set.Breaker.State(p.Name)), p.Name)
		for method, v := range p.Price {
			emit(activities.MetricProviderPrice, modelHelp, v/1000, p.Name, method)
		}
	}
	for _, r := range c.set.Model.Snapshot() {
		for name, v := range map[string]float64{activities.MetricRouteExpectedCost: r.Cost, activities.MetricRouteSolveP90: r.P90,
			activities.MetricRouteUnsolvable: r.Unsolvable, activities.MetricRouteBad: r.Bad} {
			emit(name, modelHelp, v, r.Provider, r.Method)
		}
	}
}
