package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
)

func TestTokenedCallbackSignalsWorkflow(t *testing.T) {
	fields := url.Values{"id": {"73491"}, "code": {"03AGdBq24PBCbwiDRaS_MJ7Z"}}
	cases := map[string]func(e *testEnv) int{
		"GET query": func(e *testEnv) int {
			return e.get(t, tokenedURL(testWorkflowID, testSecret, fields)).Code
		},
		"POST urlencoded form": func(e *testEnv) int {
			return e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil), formBody(fields),
				"application/x-www-form-urlencoded").Code
		},
		"POST multipart form": func(e *testEnv) int {
			body, ct := multipartBody(t, map[string]string{"id": fields.Get("id"), "code": fields.Get("code")})
			return e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil), body, ct).Code
		},
		"POST with fields in the query": func(e *testEnv) int {
			return e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, fields), nil, "").Code
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			require.Equal(t, http.StatusOK, send(e))
			require.Equal(t, []sentSignal{{
				WorkflowID: testWorkflowID,
				RunID:      "",
				Name:       captchaflow.CallbackSignal,
				Callback:   captchaflow.Callback{ProviderTaskID: "73491", Code: "03AGdBq24PBCbwiDRaS_MJ7Z", Authenticated: true, RunID: testRunID, Submission: 1},
			}}, e.fake.sent())
			assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeSignalled))
		})
	}
}

func TestTokenedCallbackBodyFieldsWinOverQuery(t *testing.T) {
	e := newTestEnv(t)
	target := tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"1"}, "code": {"from-query"}})
	rec := e.do(t, http.MethodPost, target, formBody(url.Values{"id": {"2"}, "code": {"from-body"}}),
		"application/x-www-form-urlencoded")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Len(t, e.fake.sent(), 1)
	assert.Equal(t, captchaflow.Callback{ProviderTaskID: "2", Code: "from-body", Authenticated: true, RunID: testRunID, Submission: 1}, e.fake.sent()[0].Callback)
}

func TestTokenedCallbackAcceptsPercentEncodedWorkflowID(t *testing.T) {
	e := newTestEnv(t)
	target := "/callback/task%3A7?" + strings.SplitN(tokenedURL("task:7", testSecret, url.Values{"id": {"1"}, "code": {"c"}}), "?", 2)[1]
	require.Equal(t, http.StatusOK, e.get(t, target).Code)
	require.Equal(t, "task:7", e.fake.sent()[0].WorkflowID)
}

func TestTokenedCallbackTemporalOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		err     func(ctx context.Context) error
		status  int
		outcome string
	}{
		{"accepted", func(context.Context) error { return nil }, http.StatusOK, outcomeSignalled},
		{"workflow completed", func(context.Context) error {
			return serviceerror.NewNotFound("workflow execution already completed")
		}, http.StatusOK, outcomeLateOrUnknown},
		{"workflow unknown (wrapped)", func(context.Context) error {
			return errors.Join(errors.New("signal"), serviceerror.NewNotFound("workflow not found"))
		}, http.StatusOK, outcomeLateOrUnknown},
		{"temporal unavailable", func(context.Context) error {
			return serviceerror.NewUnavailable("connection refused")
		}, http.StatusServiceUnavailable, outcomeUnavailable},
		{"temporal deadline exceeded", func(context.Context) error {
			return serviceerror.NewDeadlineExceeded("deadline exceeded")
		}, http.StatusServiceUnavailable, outcomeUnavailable},
		{"unexpected temporal error", func(context.Context) error {
			return serviceerror.NewInternal("boom")
		}, http.StatusServiceUnavailable, outcomeUnavailable},
		{"temporal too slow", blockUntilDone, http.StatusServiceUnavailable, outcomeUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.fake.signalFn = tc.err
			start := time.Now()
			rec := e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			// Bounded by INGRESS_SIGNAL_TIMEOUT (200ms in tests), with slack for a loaded machine.
			require.Less(t, time.Since(start), 2*time.Second)
			assert.Equal(t, 1.0, e.callbacks(routeTokened, tc.outcome))
			if tc.status == http.StatusServiceUnavailable {
				requireError(t, rec, http.StatusServiceUnavailable, "retry later")
				assert.NotEmpty(t, rec.Header().Get("Retry-After"))
				// The Temporal error stays in the log, not in the provider's response.
				assert.NotContains(t, rec.Body.String(), "boom")
			}
		})
	}
}

func TestTokenedCallbackSignalTimeoutIsConfigured(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.SignalTimeout = 50 * time.Millisecond })
	var deadline time.Time
	e.fake.signalFn = func(ctx context.Context) error {
		deadline, _ = ctx.Deadline()
		return nil
	}
	start := time.Now()
	require.Equal(t, http.StatusOK, e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}})).Code)
	require.False(t, deadline.IsZero(), "signal must run under a deadline")
	assert.WithinDuration(t, start.Add(50*time.Millisecond), deadline, 40*time.Millisecond)
}

func TestTokenedCallbackToken(t *testing.T) {
	fields := url.Values{"id": {"9"}, "code": {"x"}}
	withPrevious := func(c *config.Ingress) { c.CallbackSecretPrevious = testPreviousSecret }
	cases := []struct {
		name   string
		mutate func(*config.Ingress)
		target string
		status int
	}{
		{"missing token", nil, tokenedURL(testWorkflowID, "", fields), http.StatusForbidden},
		{"token from an unknown secret", nil, tokenedURL(testWorkflowID, "some-other-secret", fields), http.StatusForbidden},
		{"token of another workflow", nil, "/callback/" + testWorkflowID + "?" +
			strings.SplitN(tokenedURL("other-task", testSecret, fields), "?", 2)[1], http.StatusForbidden},
		{"not hex", nil, "/callback/" + testWorkflowID + "?t=zz&id=9&code=x", http.StatusForbidden},
		{"uppercase hex of the right token", nil, "/callback/" + testWorkflowID + "?" + url.Values{
			"r": {testRunID}, "s": {"1"}, "id": {"9"}, "code": {"x"}, "t": {strings.ToUpper(callbackauth.TokenFor(testSecret,
				testWorkflowID, callbackauth.Submission{RunID: testRunID, N: 1}))}}.Encode(), http.StatusOK},
		{"the workflow's token alone (no URL names no submission)", nil, "/callback/" + testWorkflowID + "?" + url.Values{
			"t": {callbackauth.Token(testSecret, testWorkflowID)}, "id": {"9"}, "code": {"x"}}.Encode(), http.StatusForbidden},
		{"previous secret while it is set", withPrevious, tokenedURL(testWorkflowID, testPreviousSecret, fields), http.StatusOK},
		{"current secret during rotation", withPrevious, tokenedURL(testWorkflowID, testSecret, fields), http.StatusOK},
		{"previous secret once it is unset", nil, tokenedURL(testWorkflowID, testPreviousSecret, fields), http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*config.Ingress)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			e := newTestEnv(t, mutate...)
			rec := e.get(t, tc.target)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			if tc.status == http.StatusForbidden {
				requireError(t, rec, http.StatusForbidden, "token")
				assert.Empty(t, e.fake.sent())
				assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeForged))
			} else {
				assert.Len(t, e.fake.sent(), 1)
			}
		})
	}
}

func TestTokenedCallbackBadRequestNamesTheField(t *testing.T) {
	longID := strings.Repeat("a", 201)
	cases := []struct {
		name, target, field string
	}{
		{"missing id", tokenedURL(testWorkflowID, testSecret, url.Values{"code": {"x"}}), "id: required"},
		{"missing code", tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}}), "code: required"},
		{"empty code", tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {""}}), "code: required"},
		{"id with a quote", tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9'"}, "code": {"x"}}), "id: must be"},
		{"code too long", tokenedURL(testWorkflowID, testSecret,
			url.Values{"id": {"9"}, "code": {strings.Repeat("c", captchaflow.MaxCodeBytes+1)}}), "code: longer than 16384 bytes"},
		{"workflow id with a bad character", tokenedURL("bad*id", testSecret, url.Values{"id": {"9"}, "code": {"x"}}), "workflow_id:"},
		{"workflow id too long", tokenedURL(longID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}), "workflow_id:"},
		{"empty workflow id", "/callback/?id=9&code=x", "workflow_id:"},
		{"unparsable query", tokenedURL(testWorkflowID, testSecret, nil) + "&id=%zz", "form:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			rec := e.get(t, tc.target)
			requireError(t, rec, http.StatusBadRequest, tc.field)
			assert.Empty(t, e.fake.sent())
			assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeBadRequest))
		})
	}
}

func TestCallbackBodyLimit(t *testing.T) {
	big := url.Values{"id": {"9"}, "code": {strings.Repeat("c", 2048)}} // over the 1K limit of the tests
	bigMultipart := func(t *testing.T) (io.Reader, string) {
		return multipartBody(t, map[string]string{"id": "9", "code": strings.Repeat("c", 2048)})
	}
	cases := map[string]func(t *testing.T) (target string, body io.Reader, contentType string){
		"urlencoded with Content-Length": func(*testing.T) (string, io.Reader, string) {
			return tokenedURL(testWorkflowID, testSecret, nil), formBody(big), "application/x-www-form-urlencoded"
		},
		"urlencoded chunked": func(*testing.T) (string, io.Reader, string) {
			return tokenedURL(testWorkflowID, testSecret, nil), io.MultiReader(formBody(big)), "application/x-www-form-urlencoded"
		},
		"multipart chunked": func(t *testing.T) (string, io.Reader, string) {
			body, ct := bigMultipart(t)
			return tokenedURL(testWorkflowID, testSecret, nil), io.MultiReader(body), ct
		},
		"untokened route": func(*testing.T) (string, io.Reader, string) {
			return "/callback", formBody(big), "application/x-www-form-urlencoded"
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			target, body, ct := build(t)
			rec := e.do(t, http.MethodPost, target, body, ct)
			requireError(t, rec, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
			assert.Empty(t, e.fake.sent())
		})
	}
}

func TestTokenedCallbackGarbageBodyIsBadRequest(t *testing.T) {
	e := newTestEnv(t)
	rec := e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil),
		bytes.NewReader([]byte("--nope\r\ngarbage")), "multipart/form-data; boundary=nope")
	requireError(t, rec, http.StatusBadRequest, "form:")

	rec = e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil),
		strings.NewReader(`{"id":"9","code":"x"}`), "application/json")
	requireError(t, rec, http.StatusBadRequest, "id: required")
	assert.Empty(t, e.fake.sent())
}

func TestPanicInTemporalClientIsA500NotACrash(t *testing.T) {
	e := newTestEnv(t)
	e.fake.signalFn = func(context.Context) error { panic("fake client bug") }
	rec := e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}))
	requireError(t, rec, http.StatusInternalServerError, "Internal Server Error")
	assert.NotContains(t, rec.Body.String(), "fake client bug")
	assert.Contains(t, e.logs.String(), "fake client bug", "the panic is logged for the operator")
	assert.Contains(t, e.srv.metricsText(t), `code="500"`)
	// The server keeps serving.
	e.fake.signalFn = nil
	require.Equal(t, http.StatusOK, e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}})).Code)
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newTestEnv(t)
	requireError(t, e.get(t, "/nope"), http.StatusNotFound, "Not Found")
	requireError(t, e.do(t, http.MethodDelete, tokenedURL(testWorkflowID, testSecret, nil), nil, ""),
		http.StatusMethodNotAllowed, "Method Not Allowed")
}

func TestCallbackBodyAtTheLimitIsAccepted(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, int64(1000), e.srv.bodyLimit, `Echo's size syntax: "1K" is 1000 bytes`)
	prefix := "id=9&code="
	for size, status := range map[int]int{1000: http.StatusOK, 1001: http.StatusRequestEntityTooLarge} {
		body := prefix + strings.Repeat("c", size-len(prefix))
		rec := e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil),
			io.MultiReader(strings.NewReader(body)), "application/x-www-form-urlencoded")
		require.Equal(t, status, rec.Code, "body of %d bytes: %s", size, rec.Body.String())
	}
}

// A pingback URL that names its run, submission and provider: the signal carries them, and its token covers them, so
// a URL moved to another run, submission or provider is refused.
func TestNamedPingbackURLSignalsItsSubmission(t *testing.T) {
	sub := callbackauth.Submission{RunID: "0190f3b2-run", N: 2, Provider: "a"}
	pingback, err := callbackauth.URLFor("http://cb.example", testWorkflowID, testSecret, sub)
	require.NoError(t, err)
	u, err := url.Parse(pingback)
	require.NoError(t, err)
	q := u.Query()
	q.Set("id", "73491")
	q.Set("code", "CODE")

	e := newTestEnv(t)
	require.Equal(t, http.StatusOK, e.get(t, u.Path+"?"+q.Encode()).Code)
	require.Equal(t, []sentSignal{{WorkflowID: testWorkflowID, Name: captchaflow.CallbackSignal,
		Callback: captchaflow.Callback{ProviderTaskID: "73491", Code: "CODE", Authenticated: true, RunID: sub.RunID, Submission: 2, Provider: "a"}}},
		e.fake.sent())

	for name, change := range map[string]func(url.Values){
		"another submission":   func(v url.Values) { v.Set(callbackauth.SubmissionParam, "3") },
		"another run":          func(v url.Values) { v.Set(callbackauth.RunParam, "0190f3b2-other") },
		"no run":               func(v url.Values) { v.Del(callbackauth.RunParam) },
		"another provider":     func(v url.Values) { v.Set(callbackauth.ProviderParam, "b") },
		"no provider":          func(v url.Values) { v.Del(callbackauth.ProviderParam) },
		"not a number":         func(v url.Values) { v.Set(callbackauth.SubmissionParam, "two") },
		"the workflow's token": func(v url.Values) { v.Set(callbackauth.TokenParam, callbackauth.Token(testSecret, testWorkflowID)) },
	} {
		t.Run(name, func(t *testing.T) {
			v, _ := url.ParseQuery(q.Encode())
			change(v)
			assert.Equal(t, http.StatusForbidden, newTestEnv(t).get(t, u.Path+"?"+v.Encode()).Code)
		})
	}
}
