package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
)

// TestCircuitGaugeFollowsTimeWithoutRequests: the gauge is computed when scraped, so an open circuit reads half-open
// once its time has passed, with no request in between.
func TestCircuitGaugeFollowsTimeWithoutRequests(t *testing.T) {
	now := time.Unix(1000, 0)
	b := providers.NewBreaker(providers.DefaultCircuitSettings, func() time.Time { return now })
	set := providers.NewSet([]*providers.Provider{{Name: "a"}, {Name: "b"}}, b)
	reg := prom.NewRegistry()
	if _, err := (&metrics{registry: reg}).serve(config.Worker{TaskQueue: "captcha-solve"}, set, "default", nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	b.Record("a", providers.OutcomeZeroBalance)
	want := func(a int) string {
		return "# HELP captchaflow_provider_circuit_state a provider's circuit: 0 closed, 1 half-open, 2 open\n" +
			"# TYPE captchaflow_provider_circuit_state gauge\n" +
			`captchaflow_provider_circuit_state{namespace="default",provider="a",task_queue="captcha-solve"} ` + string(rune('0'+a)) + "\n" +
			`captchaflow_provider_circuit_state{namespace="default",provider="b",task_queue="captcha-solve"} 0` + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(providers.StateOpen)), activities.MetricCircuitState); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // a zero-balance circuit half-opens
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(providers.StateHalfOpen)), activities.MetricCircuitState); err != nil {
		t.Fatal(err)
	}
}
