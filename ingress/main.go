// Command ingress receives provider callbacks and signals SolveCaptcha; configuration is the environment (internal/config).
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

	"github.com/captchaflow/captchaflow/ingress/server"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/internal/telemetry"
)

func main() {
	logger := slog.New(telemetry.LogHandler{Handler: slog.NewJSONHandler(os.Stdout, nil)})
	slog.SetDefault(logger) // what libraries log (the OpenTelemetry SDK's errors) is a JSON line too
	cfg, err := config.LoadIngress()
	check(err, "")
	// The ingress only writes payloads (signals, updates): give it a keys file with the current key alone.
	opts, _, flush, err := config.ClientOptions(context.Background(), "captchaflow-ingress", logger, logger)
	check(err, "")
	// Lazy: /healthz answers while Temporal is still starting; /readyz and callbacks say 503 until it answers.
	tc, err := client.NewLazyClient(opts)
	check(err, "temporal client: ")
	logger.Info("ingress starting", "temporal_address", cmp.Or(opts.HostPort, client.DefaultHostPort),
		"namespace", cmp.Or(opts.Namespace, client.DefaultNamespace))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := server.New(cfg, tc, logger, reg)
	check(err, "")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = srv.ListenAndServe(ctx)
	_ = flush(context.Background()) // after the drain: the last callbacks' spans too
	if err != nil {
		logger.Error("ingress failed", "error", err.Error())
		os.Exit(1)
	}
}

// check stops on a configuration error with exit code 2, told apart from a crash.
func check(err error, prefix string) {
	if err != nil {
		fmt.Fprintln(os.Stderr, prefix+err.Error())
		os.Exit(2)
	}
}
