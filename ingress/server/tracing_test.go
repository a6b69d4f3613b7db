package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/captchaflow/captchaflow/callbackauth"
)

// A callback's span joins the trace its signed URL names, and only that: an unsigned tp and a caller's own
// traceparent header start a trace of their own.
func TestCallbackSpanJoinsOnlyTheSignedTrace(t *testing.T) {
	const submission = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const forged = "00-11111111111111111111111111111111-2222222222222222-01"
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	e := newTestEnv(t)
	h := e.srv.traced(e.srv.Handler())
	send := func(signed, tp, header string) int {
		sub := callbackauth.Submission{RunID: testRunID, N: 1, Trace: signed}
		q := url.Values{"id": {"73491"}, "code": {"03AGdBq24P"}, callbackauth.RunParam: {testRunID}, callbackauth.SubmissionParam: {"1"},
			callbackauth.TokenParam: {callbackauth.TokenFor(testSecret, testWorkflowID, sub)}}
		if tp != "" {
			q.Set(callbackauth.TraceParam, tp)
		}
		req := httptest.NewRequest(http.MethodGet, callbackauth.CallbackPath+testWorkflowID+"?"+q.Encode(), nil)
		if header != "" {
			req.Header.Set("traceparent", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	require.Equal(t, http.StatusOK, send(submission, submission, forged))
	require.Equal(t, http.StatusForbidden, send("", submission, ""), "the tp parameter is signed: a token without it is refused")
	require.Equal(t, http.StatusOK, send("", "", forged), "a URL without tp verifies as before")
	spans := rec.Ended()
	require.Len(t, spans, 3)
	joined := spans[0]
	assert.Equal(t, "GET /callback/:workflow_id", joined.Name())
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", joined.SpanContext().TraceID().String())
	assert.Equal(t, "00f067aa0ba902b7", joined.Parent().SpanID().String(), "a child of the submission")
	assert.Contains(t, joined.Attributes(), attribute.String("captchaflow.workflow_id", testWorkflowID))
	assert.Contains(t, joined.Attributes(), attribute.String("captchaflow.provider_task_id", "73491"))
	for _, s := range spans[1:] {
		assert.False(t, s.Parent().IsValid(), "neither an unsigned tp nor a caller's header is joined")
	}
}
