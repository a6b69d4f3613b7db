// Command worker runs SolveCaptcha workflows and their activities on the captcha-solve task queue.
//
// Configuration is environment only (see internal/config); Temporal's connection comes from TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and friends (go.temporal.io/sdk/contrib/envconfig).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/captchaai"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/internal/providers"
	"github.com/captchaflow/captchaflow/workflows"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	flag.Parse()
	if err := run(logger); err != nil {
		logger.Error("worker stopped", "error", err)
		var cfgErr configError
		if errors.As(err, &cfgErr) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// configError marks problems an operator must fix before the worker can start.
type configError struct{ error }

// run wires the worker: configuration, Temporal connection, registration, then serving until a signal arrives.
func run(logger *slog.Logger) error {
	cfg, acts, err := loadConfig()
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	metrics, err := newMetrics(logger)
	if err != nil {
		return err
	}
	defer metrics.Close()

	c, opts, err := dial(ctx, logger, metrics, acts.Providers != nil)
	if err != nil {
		return err
	}
	defer c.Close()
	w := newWorker(c, cfg, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting worker: %w", err)
	}
	defer w.Stop() // waits up to SHUTDOWN_TIMEOUT for running activities
	stopThreads, err := startThreadsWorker(c, cfg, acts)
	if err != nil {
		return err
	}
	defer stopThreads()

	metrics.exportBalanceLowThreshold(opts.Namespace, cfg.ProviderBalanceLow)
	if err := metrics.exportCircuits(acts.Providers, opts.Namespace, cfg.TaskQueue); err != nil {
		return err
	}
	ensureBalanceScheduleOrWarn(ctx, c, cfg, logger)
	if err := serveMetrics(metrics, cfg.MetricsAddr, logger); err != nil {
		return err
	}
	logger.Info("worker ready", "task_queue", cfg.TaskQueue, "namespace", opts.Namespace,
		"temporal", opts.HostPort, "provider", cfg.ProviderBaseURL, "providers_file", cfg.ProvidersFile, "callback_base_url", cfg.CallbackBaseURL,
		"callback_timeout_by_method", cfg.CallbackTimeoutByMethod, "provider_threads", cfg.ProviderThreads)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// loadConfig reads and checks the worker's settings and builds the activities with their provider clients, so a
// bad setting stops the worker before it connects anywhere.
func loadConfig() (config.Worker, *activities.Activities, error) {
	cfg, err := config.LoadWorker()
	if err != nil {
		return cfg, nil, configError{err}
	}
	if err := checkSettings(cfg); err != nil {
		return cfg, nil, configError{fmt.Errorf("worker configuration: %w", err)}
	}
	acts, err := newActivities(cfg)
	if err != nil {
		return cfg, nil, configError{err}
	}
	return cfg, acts, nil
}

// dial connects to Temporal with the environment's client options and checks the namespace has the search
// attributes the workflows set, so a missing one fails at start rather than on the first task.
func dial(ctx context.Context, logger *slog.Logger, m *metrics, routed bool) (client.Client, client.Options, error) {
	c, opts, err := dialTemporal(ctx, logger, m.Handler())
	if err != nil {
		return nil, opts, err
	}
	if err := checkSearchAttributes(ctx, c, opts.Namespace, routed); err != nil {
		c.Close()
		return nil, opts, configError{err}
	}
	return c, opts, nil
}

// dialTemporal connects with the environment's Temporal settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …); handler
// may be nil (the one-shot -set-provider-threads command exports no metrics).
func dialTemporal(ctx context.Context, logger *slog.Logger, handler client.MetricsHandler) (client.Client, client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, opts, configError{fmt.Errorf("temporal client configuration: %w", err)}
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	if handler != nil {
		opts.MetricsHandler = handler
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, opts, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	return c, opts, nil
}

// newWorker creates the task-queue worker and registers the workflows and their activities on it.
func newWorker(c client.Client, cfg config.Worker, acts *activities.Activities) worker.Worker {
	// The sticky cache is created by the first worker.New: size it before. It bounds memory: each cached workflow
	// costs ~50 KB, and an evicted one is replayed from its short history when its callback arrives.
	if cfg.StickyCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(cfg.StickyCacheSize)
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     cfg.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: cfg.MaxConcurrentWorkflowTasks,
		WorkerStopTimeout:                      cfg.ShutdownTimeout,
	})
	workflows.Register(w, acts, workflows.Settings{ProviderThreads: activities.PlannedThreads(acts)})
	return w
}

// ensureBalanceScheduleOrWarn keeps the balance schedule as configured; a failure costs the gauge, not a task, so
// the worker runs on and says so.
func ensureBalanceScheduleOrWarn(ctx context.Context, c client.Client, cfg config.Worker, logger *slog.Logger) {
	if cfg.ProviderBalanceInterval <= 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second) // never holds up /metrics and /healthz for long
	err := ensureBalanceSchedule(sctx, c.ScheduleClient(), cfg.TaskQueue, cfg.ProviderBalanceInterval, logger)
	cancel()
	if err != nil {
		logger.Warn("the balance schedule could not be created or updated: the provider balance may not be read", "error", err)
	}
}

// serveMetrics exposes /metrics and /healthz when WORKER_METRICS_ADDR is set.
func serveMetrics(m *metrics, addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	bound, err := m.Serve(addr)
	if err != nil {
		return fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
	}
	logger.Info("metrics listening", "addr", bound)
	return nil
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// newActivities builds the activities: the providers of PROVIDERS_FILE, or the one CAPTCHAAI_* provider.
func newActivities(cfg config.Worker) (*activities.Activities, error) {
	acts := &activities.Activities{
		CallbackBaseURL:         cfg.CallbackBaseURL,
		CallbackSecret:          cfg.CallbackSecret.Reveal(),
		NotifySecret:            cfg.NotifySecret.Reveal(),
		DeliveryTimeout:         cfg.DeliveryRequestTimeout,
		NotifyAllowPrivate:      cfg.NotifyAllowPrivate,
		CallbackTimeoutByMethod: cfg.CallbackTimeoutByMethod, // Submit hands the method's value to the workflow
		ProviderThreads:         cfg.ProviderThreads,
	}
	if cfg.ProvidersFile != "" {
		set, err := loadProviders(cfg)
		acts.Providers = set
		return acts, err
	}
	provider, err := captchaai.New(cfg.ProviderBaseURL, cfg.ProviderAPIKey.Reveal(), captchaai.WithTimeout(cfg.ProviderTimeout),
		captchaai.WithMaxCodeBytes(captchaflow.MaxCodeBytes))
	if err != nil {
		return nil, fmt.Errorf("CAPTCHAAI_BASE_URL / CAPTCHAAI_API_KEY: %w", err)
	}
	acts.Provider = provider
	return acts, nil
}

// loadProviders reads PROVIDERS_FILE and builds its clients; each key variable is unset once read, like
// CAPTCHAAI_API_KEY, so no child process or crash dump of the environment carries it.
func loadProviders(cfg config.Worker) (*providers.Set, error) {
	f, err := providers.ReadFile(cfg.ProvidersFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	circuits := providers.DefaultCircuitSettings
	circuits.GiveUp, circuits.NoSlotBudget = cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget
	set, err := providers.Build(f, os.Getenv, cfg.ProviderTimeout, captchaflow.MaxCodeBytes, circuits)
	for _, spec := range f.Providers {
		_ = os.Unsetenv(spec.APIKeyEnv)
	}
	if err != nil {
		return nil, fmt.Errorf("PROVIDERS_FILE %s: %w", cfg.ProvidersFile, err)
	}
	return set, nil
}
