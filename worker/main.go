// Command worker runs SolveCaptcha and its activities on the captcha-solve task queue. Configuration is the
// environment (internal/config); Temporal's connection comes from TEMPORAL_ADDRESS and friends (envconfig).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/workflows"
)

func main() {
	var level slog.Level
	_ = level.UnmarshalText([]byte(os.Getenv("LOG_LEVEL"))) // unset or unknown: Info
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
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
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return configError{fmt.Errorf("temporal client configuration: %w", err)}
	}
	opts.Namespace = cmp.Or(opts.Namespace, client.DefaultNamespace)
	opts.Logger, opts.MetricsHandler = sdklog.NewStructuredLogger(logger), m.handler
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	logger = logger.With("task_queue", cfg.TaskQueue, "namespace", opts.Namespace)
	if err := checkSearchAttributes(ctx, c, opts.Namespace, acts.Providers != nil); err != nil {
		return configError{err}
	}
	// The semaphores' worker starts first and stops last: tasks ask it for slots until their worker has stopped.
	stopThreads, err := startThreadsWorker(c, cfg, acts)
	if err != nil {
		return err
	}
	defer stopThreads()
	w := newWorker(c, cfg, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting worker: %w", err)
	}
	defer w.Stop() // waits up to SHUTDOWN_TIMEOUT for running activities
	keepBalanceSchedule(ctx, c.ScheduleClient(), cfg, logger)
	if _, err := m.serve(cfg, acts.Providers, opts.Namespace, logger); err != nil {
		return err
	}
	logger.Info("worker ready", "temporal", opts.HostPort, "provider", cfg.ProviderBaseURL, "providers_file", cfg.ProvidersFile,
		"callback_base_url", cfg.CallbackBaseURL, "provider_threads", cfg.ProviderThreads)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

func newWorker(c client.Client, cfg config.Worker, acts *activities.Activities) worker.Worker {
	if cfg.StickyCacheSize > 0 { // before the first worker.New creates the cache
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

// loadConfig reads and checks the settings and builds the activities before anything is dialled: the providers of
// PROVIDERS_FILE, or the one CAPTCHAAI_* provider.
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
