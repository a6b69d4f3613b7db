package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
)

func TestMetricsExportsDomainCountersInPrometheusFormat(t *testing.T) {
	m, err := newMetrics(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	addr, err := m.serve(config.Worker{MetricsAddr: "127.0.0.1:0"}, nil, "default", nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	m.handler.WithTags(map[string]string{"outcome": "poll"}).Counter("captchaflow_tasks_finished_total").Inc(2)
	m.handler.Timer("captchaflow_result_latency_seconds").Record(1500 * time.Millisecond)

	// tally reports on an interval; scrape until the series shows up (bounded).
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `captchaflow_tasks_finished_total{outcome="poll"} 2`)
	}, 5*time.Second, 50*time.Millisecond)
	assert.Contains(t, body, "captchaflow_result_latency_seconds_bucket")
	assert.Contains(t, body, "go_goroutines")

	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestBalanceLowThresholdIsExportedOnlyWhenSet(t *testing.T) {
	gauges := func(low float64) map[string]tally.GaugeSnapshot {
		scope := tally.NewTestScope("", nil)
		m := &metrics{registry: prom.NewRegistry(), handler: sdktally.NewMetricsHandler(scope)}
		_, err := m.serve(config.Worker{ProviderBalanceLow: low}, nil, "prod", nil, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		return scope.Snapshot().Gauges()
	}
	got := gauges(25.5)
	require.Len(t, got, 1)
	for _, g := range got {
		assert.Equal(t, "captchaflow_provider_balance_low_threshold", g.Name())
		assert.Equal(t, map[string]string{"namespace": "prod"}, g.Tags())
		assert.Equal(t, 25.5, g.Value())
	}
	assert.Empty(t, gauges(0), "PROVIDER_BALANCE_LOW unset: no threshold, the low-balance alert stays quiet")
}

func TestMetricsExportTheRoutingModel(t *testing.T) {
	m := &metrics{registry: prom.NewRegistry()} // newMetrics registers /metrics on the default mux: once per process
	set := providers.NewSet([]*providers.Provider{{Name: "a", Price: providers.Price{"default": 2.5}}}, nil)
	set.Model = providers.NewModel(providers.File{Routing: providers.RoutingScored})
	set.Model.Learn(providers.Obs{Provider: "a", Method: "hcaptcha", Seconds: 4, Outcome: providers.ObservedSolved})
	set.Model.Rank(set.All(), "hcaptcha", nil, time.Minute, "seed", nil)
	_, err := m.serve(config.Worker{TaskQueue: "q"}, set, "default", nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	families, err := m.registry.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			got[f.GetName()] = metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
		}
	}
	assert.InDelta(t, 0.0025, got[activities.MetricProviderPrice], 1e-12)
	assert.InDelta(t, 30.0, got[activities.MetricRouteSolveP90], 1e-9, "one solve of 4 s beside the prior's 30 s: the 90th percentile is the prior")
	for _, name := range []string{activities.MetricRouteExpectedCost, activities.MetricRouteUnsolvable, activities.MetricRouteBad} {
		assert.Positive(t, got[name], name)
	}
}
