// Command ingress receives provider callbacks and signals the SolveCaptcha workflows. Configuration comes from the
// environment (see internal/config.Ingress); Temporal's connection from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TLS and API-key variables (go.temporal.io/sdk/contrib/envconfig).
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

// exitConfig is the exit code for a configuration error, so supervisors can tell it from a crash.
const exitConfig = 2

func main() {
	os.Exit(run())
}

func run() int {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))

	cfg, err := config.LoadIngress()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitConfig
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "temporal client configuration: %v\n", err)
		return exitConfig
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	// Lazy: the ingress must come up (and answer /healthz) while Temporal is still starting; /readyz reports 503
	// and callbacks get 503 until it answers.
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "temporal client: %v\n", err)
		return exitConfig
	}
	defer tc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	srv, err := server.New(cfg, tc, logger, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitConfig
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Info("ingress starting",
		slog.String("temporal_address", cmp.Or(opts.HostPort, client.DefaultHostPort)),
		slog.String("namespace", cmp.Or(opts.Namespace, client.DefaultNamespace)))
	if err := srv.ListenAndServe(ctx); err != nil {
		logger.Error("ingress failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}
