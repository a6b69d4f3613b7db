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
	"github.com/captchaflow/captchaflow/workflows"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	setPlan := flag.Int("set-provider-threads", -1, "set the task queue's provider-threads plan to N (0 retires admission "+
		"control), print it and exit; workers must be running. Give the workers PROVIDER_THREADS=N next")
	flag.Parse()
	run := run
	if *setPlan >= 0 || flagSet("set-provider-threads") {
		run = func(logger *slog.Logger) error { return runSetPlan(logger, *setPlan) }
	}
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

func run(logger *slog.Logger) error {
	cfg, provider, err := loadConfig()
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
	c, namespace, err := dialTemporal(ctx, logger, metrics.Handler())
	if err != nil {
		return err
	}
	defer c.Close()
	if err := checkSearchAttributes(ctx, c, namespace); err != nil {
		return configError{err}
	}
	if err := checkThreadsPlan(ctx, c, cfg.TaskQueue, cfg.ProviderThreads); err != nil {
		return err
	}
	w, err := startWorker(c, cfg, provider)
	if err != nil {
		return err
	}
	defer w.Stop() // waits up to SHUTDOWN_TIMEOUT for running activities
	if err := afterStart(ctx, c, cfg, namespace, metrics, logger); err != nil {
		return err
	}
	logger.Info("worker ready", "task_queue", cfg.TaskQueue, "namespace", namespace,
		"provider", cfg.ProviderBaseURL, "callback_base_url", cfg.CallbackBaseURL,
		"callback_timeout_by_method", cfg.CallbackTimeoutByMethod, "provider_threads", cfg.ProviderThreads)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// loadConfig reads and checks the worker's environment and builds the provider client.
func loadConfig() (config.Worker, *captchaai.Client, error) {
	cfg, err := config.LoadWorker()
	if err != nil {
		return cfg, nil, configError{err}
	}
	if err := checkSettings(cfg); err != nil {
		return cfg, nil, configError{fmt.Errorf("worker configuration: %w", err)}
	}
	provider, err := captchaai.New(cfg.ProviderBaseURL, cfg.ProviderAPIKey.Reveal(), captchaai.WithTimeout(cfg.ProviderTimeout),
		captchaai.WithMaxCodeBytes(captchaflow.MaxCodeBytes))
	if err != nil {
		return cfg, nil, configError{fmt.Errorf("CAPTCHAAI_BASE_URL / CAPTCHAAI_API_KEY: %w", err)}
	}
	return cfg, provider, nil
}

// dialTemporal connects with the environment's Temporal settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …).
func dialTemporal(ctx context.Context, logger *slog.Logger, metricsHandler client.MetricsHandler) (client.Client, string, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, "", configError{fmt.Errorf("temporal client configuration: %w", err)}
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	opts.MetricsHandler = metricsHandler
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, "", fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	return c, opts.Namespace, nil
}

func startWorker(c client.Client, cfg config.Worker, provider *captchaai.Client) (worker.Worker, error) {
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
	workflows.Register(w, &activities.Activities{
		Provider:                provider,
		CallbackBaseURL:         cfg.CallbackBaseURL,
		CallbackSecret:          cfg.CallbackSecret.Reveal(),
		NotifySecret:            cfg.NotifySecret.Reveal(),
		DeliveryTimeout:         cfg.DeliveryRequestTimeout,
		NotifyAllowPrivate:      cfg.NotifyAllowPrivate,
		CallbackTimeoutByMethod: cfg.CallbackTimeoutByMethod, // Submit hands the method's value to the workflow
		ProviderThreads:         cfg.ProviderThreads,         // Register binds it to SolveCaptcha; AcquireSlot starts a semaphore with it
	})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting worker: %w", err)
	}
	return w, nil
}

// afterStart does what needs the worker polling: the provider-threads plan (a disagreement stops the worker), the
// balance schedule and the metrics listener. Neither of the first two holds /healthz up for long.
func afterStart(ctx context.Context, c client.Client, cfg config.Worker, namespace string, metrics *metrics, logger *slog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := ensureThreadsPlan(pctx, c, cfg.TaskQueue, cfg.ProviderThreads, logger)
	cancel()
	var planErr configError
	if errors.As(err, &planErr) {
		return err
	} else if err != nil {
		logger.Warn("the provider-threads plan could not be checked; the first task that asks for a slot starts the semaphore", "error", err)
	}
	metrics.exportBalanceLowThreshold(namespace, cfg.ProviderBalanceLow)
	if cfg.ProviderBalanceInterval > 0 {
		// A failure here costs the gauge, not a task: the worker runs on, and says so.
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := ensureBalanceSchedule(sctx, c.ScheduleClient(), cfg.TaskQueue, cfg.ProviderBalanceInterval, logger)
		cancel()
		if err != nil {
			logger.Warn("the balance schedule could not be created or updated: the provider balance may not be read", "error", err)
		}
	}
	if cfg.MetricsAddr != "" {
		addr, err := metrics.Serve(cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
		}
		logger.Info("metrics listening", "addr", addr)
	}
	return nil
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
