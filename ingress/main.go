// Command ingress receives provider callbacks and signals the SolveCaptcha workflows. Configuration comes from the
// environment (internal/config.Ingress); Temporal's connection from TEMPORAL_ADDRESS and friends (envconfig).
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"

	"github.com/captchaflow/captchaflow/ingress/server"
	"github.com/captchaflow/captchaflow/internal/config"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	srv, err := setup(logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2) // a configuration error, told apart from a crash
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.ListenAndServe(ctx); err != nil {
		logger.Error("ingress failed", "error", err.Error())
		os.Exit(1)
	}
}

func setup(logger *slog.Logger) (*server.Server, error) {
	cfg, err := config.LoadIngress()
	if err != nil {
		return nil, err
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("temporal client configuration: %w", err)
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	// Lazy: /healthz answers while Temporal is still starting; /readyz and callbacks say 503 until it answers.
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client: %w", err)
	}
	logger.Info("ingress starting", "temporal_address", cmp.Or(opts.HostPort, client.DefaultHostPort),
		"namespace", cmp.Or(opts.Namespace, client.DefaultNamespace))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return server.New(cfg, tc, logger, reg)
}
