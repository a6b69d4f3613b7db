package server

import (
	"context"
	"net/http"
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
	assert.Equal(t, 10, testutil.CollectAndCount(e.srv.metrics.callbacks, "captchaflow_ingress_callbacks_total"))
	assert.Equal(t, 0.0, e.callbacks(routeUntokened, outcomeUnavailable))
}

func TestCallbackCounterMovesPerOutcome(t *testing.T) {
	e := newTestEnv(t)
	fields := url.Values{"id": {"9"}, "code": {"x"}}
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))
	e.get(t, tokenedURL(testWorkflowID, "wrong", fields))
	e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}}))
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewNotFound("gone") }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewUnavailable("down") }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))

	assert.Equal(t, 2.0, e.callbacks(routeTokened, outcomeSignalled))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeForged))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeBadRequest))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeLateOrUnknown))
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeUnavailable))
	assert.Equal(t, 0.0, e.callbacks(routeUntokened, outcomeSignalled))
	// Probes are not callbacks.
	e.get(t, "/healthz")
	assert.Equal(t, 6.0, sumCallbacks(t, e))
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

	rec := e.get(t, "/metrics")
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	assert.Contains(t, body, `captchaflow_ingress_requests_total{code="200",host="",method="GET",url="/callback/:workflow_id"} 1`)
	// The status is the one the error handler answers with, not Echo's 500 default for a returned error.
	assert.Contains(t, body, `captchaflow_ingress_requests_total{code="403",host="",method="GET",url="/callback/:workflow_id"} 1`)
	assert.Contains(t, body, `captchaflow_ingress_request_duration_seconds_bucket{code="200"`)
	assert.Contains(t, body, `captchaflow_ingress_callbacks_total{outcome="signalled",route="tokened"} 1`)
	assert.NotContains(t, body, testWorkflowID, "raw URLs must not become label values")
	assert.NotContains(t, body, "/scanner/probe")
	assert.False(t, strings.Contains(body, testSecret))
}
