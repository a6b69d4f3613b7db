package main

import (
	"fmt"
	"io"
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

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
)

// metrics exports the SDK's and the workflows' metrics (both through the client's handler) on /metrics.
type metrics struct {
	registry *prom.Registry
	handler  sdkclient.MetricsHandler
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

// serve exports the worker's gauges and, unless WORKER_METRICS_ADDR is empty, serves /metrics and /healthz on it
// (port 0 allowed) until the process exits; it returns the address it listens on.
func (m *metrics) serve(cfg config.Worker, set *providers.Set, namespace string, logger *slog.Logger) (string, error) {
	if low := cfg.ProviderBalanceLow; low > 0 { // the low-balance alert's threshold
		m.handler.WithTags(map[string]string{"namespace": namespace}).Gauge(activities.MetricProviderBalanceLowThreshold).Update(low)
	}
	if err := m.exportCircuits(set, namespace, cfg.TaskQueue); err != nil || cfg.MetricsAddr == "" {
		return "", err
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return "", fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() { logger.Error("metrics server", "error", srv.Serve(ln)) }()
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return ln.Addr().String(), nil
}

// exportCircuits registers a routed worker's circuit gauges (PROVIDERS_FILE), read at scrape so a circuit
// half-opened by time alone shows it (and its alert clears).
func (m *metrics) exportCircuits(set *providers.Set, namespace, taskQueue string) error {
	if set == nil || !set.Routed {
		return nil
	}
	for _, p := range set.All() {
		labels := prom.Labels{"namespace": namespace, "task_queue": taskQueue, "provider": p.Name}
		if err := m.registry.Register(prom.NewGaugeFunc(prom.GaugeOpts{Name: activities.MetricCircuitState, ConstLabels: labels,
			Help: "a provider's circuit: 0 closed, 1 half-open, 2 open"},
			func() float64 { return float64(set.Breaker.State(p.Name)) })); err != nil {
			return err
		}
	}
	return nil
}
