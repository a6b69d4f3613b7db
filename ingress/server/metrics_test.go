package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

func TestCallbackCounterIsPreinitialised(t *testing.T) {
	e := newTestEnv(t)
	assert.Equal(t, 2*len(outcomes), testutil.CollectAndCount(e.srv.callbacks, "captchaflow_ingress_callbacks_total"))
	assert.Equal(t, 0.0, e.callbacks(routeUntokened, outcomeUnavailable))
}

func TestCallbackCounterMovesPerOutcome(t *testing.T) {
	e := newTestEnv(t)
	fields := func(code string) url.Values { return url.Values{"id": {"9"}, "code": {code}} }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("a")))
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("b")))
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("b")))
	e.get(t, tokenedURL(testWorkflowID, "wrong", fields("c")))
	e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}}))
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewNotFound("gone") }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("d")))
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewUnavailable("down") }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("e")))
	e.fake.signalFn = nil
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("f")))
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields("g"))) // past the burst of 4

	assert.Equal(t, 3.0, e.callbacks(routeTokened, outcomeSignalled))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeDuplicate))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeForged))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeBadRequest))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeLateOrUnknown))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeUnavailable), "refunded: it did not use up the budget")
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeSuppressed))
	assert.Equal(t, 0.0, e.callbacks(routeUntokened, outcomeSignalled))
	// Probes are not callbacks.
	e.get(t, "/healthz")
	assert.Equal(t, 9.0, sumCallbacks(t, e))
}

func sumCallbacks(t *testing.T, e *testEnv) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() == "captchaflow_ingress_callbacks_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestHTTPMetricsAreLabelledByRoutePattern(t *testing.T) {
	e := newTestEnv(t)
	e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}))
	e.get(t, tokenedURL(testWorkflowID, "wrong", url.Values{"id": {"9"}, "code": {"x"}}))
	e.get(t, "/scanner/probe/12345")

	body := e.srv.metricsText(t)
	assert.Contains(t, body, `captchaflow_ingress_requests_total{code="200",host="",method="GET",url="/callback/:workflow_id"} 1`)
	// The status is the one the error handler answers with, not Echo's 500 default for a returned error.
	assert.Contains(t, body, `captchaflow_ingress_requests_total{code="403",host="",method="GET",url="/callback/:workflow_id"} 1`)
	assert.Contains(t, body, `captchaflow_ingress_request_duration_seconds_bucket{code="200"`)
	assert.Contains(t, body, `captchaflow_ingress_callbacks_total{outcome="signalled",route="tokened"} 1`)
	assert.NotContains(t, body, testWorkflowID, "raw URLs must not become label values")
	assert.NotContains(t, body, "/scanner/probe")
	assert.False(t, strings.Contains(body, testSecret))
}

// TestMetricsAreNotOnThePublicListener: /metrics is served only on INGRESS_METRICS_ADDR; the callback listener,
// which faces the provider and the internet, answers 404 for it.
func TestMetricsAreNotOnThePublicListener(t *testing.T) {
	e := newTestEnv(t)
	requireError(t, e.get(t, "/metrics"), http.StatusNotFound, "Not Found")
	assert.Contains(t, e.srv.metricsText(t), "captchaflow_ingress_callbacks_total")
	assert.Contains(t, e.srv.metricsText(t), "captchaflow_ingress_untokened_queue_capacity 64")

	rec := httptest.NewRecorder()
	e.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code, "the metrics listener serves /metrics only")
}
