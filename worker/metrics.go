package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	sdkclient "go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
)

// metrics exports the SDK's and the workflows' metrics (both through the client's handler) on /metrics.
type metrics struct {
	registry *prom.Registry
	scope    tally.Scope
	closer   interface{ Close() error }
	server   *http.Server
	logger   *slog.Logger
}

func newMetrics(logger *slog.Logger) (*metrics, error) {
	registry := prom.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter, err := tallyprom.Configuration{TimerType: "histogram"}.NewReporter(tallyprom.ConfigurationOptions{
		Registry: registry,
		OnError:  func(err error) { logger.Warn("metrics reporter", "error", err) },
	})
	if err != nil {
		return nil, err
	}
	scope, closer := tally.NewRootScope(tally.ScopeOptions{CachedReporter: reporter, Separator: tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions}, time.Second)
	return &metrics{registry: registry, scope: sdktally.NewPrometheusNamingScope(scope), closer: closer, logger: logger}, nil
}

func (m *metrics) Handler() sdkclient.MetricsHandler { return sdktally.NewMetricsHandler(m.scope) }

// serve exports the worker's gauges and, unless WORKER_METRICS_ADDR is empty, serves them.
func (m *metrics) serve(cfg config.Worker, set *providers.Set, namespace string, logger *slog.Logger) error {
	m.exportBalanceLowThreshold(namespace, cfg.ProviderBalanceLow)
	if err := m.exportCircuits(set, namespace, cfg.TaskQueue); err != nil {
		return err
	}
	if cfg.MetricsAddr == "" {
		return nil
	}
	addr, err := m.Serve(cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
	}
	logger.Info("metrics listening", "addr", addr)
	return nil
}

// Serve serves /metrics and /healthz on addr and returns the bound address (addr may use port 0).
func (m *metrics) Serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	m.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := m.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			m.logger.Error("metrics server", "error", err)
		}
	}()
	return ln.Addr().String(), nil
}

func (m *metrics) Close() {
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.server.Shutdown(ctx)
	}
	_ = m.closer.Close()
}
