package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
)

// A createTask provider POSTs its getTaskResult-shaped JSON (2captcha v2 its form) to the tokened URL that names
// its flavor: the code and task ID reach the workflow as an authenticated callback, a status word as the word.
func TestCreateTaskCallbacksSignalTheWorkflow(t *testing.T) {
	cases := []struct {
		flavor, contentType, body string
		want                      captchaflow.Callback
	}{
		{"capmonster", "application/json", `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03AG-token"}}`,
			captchaflow.Callback{Code: "03AG-token", Authenticated: true, RunID: testRunID, Submission: 1}},
		{"capsolver", "application/json", `{"errorId":0,"taskId":"61138bb6-19fb","status":"ready","solution":{"gRecaptchaResponse":"03AG-cs"}}`,
			captchaflow.Callback{ProviderTaskID: "61138bb6-19fb", Code: "03AG-cs", Authenticated: true, RunID: testRunID, Submission: 1}},
		{"anticaptcha", "application/json", `{"errorId":0,"taskId":7654321,"status":"failed"}`,
			captchaflow.Callback{ProviderTaskID: "7654321", Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1}},
		{"2captcha", "application/x-www-form-urlencoded", "id=72000001&code=03AG-2c",
			captchaflow.Callback{ProviderTaskID: "72000001", Code: "03AG-2c", Authenticated: true, RunID: testRunID, Submission: 1}},
	}
	for _, c := range cases {
		t.Run(c.flavor, func(t *testing.T) {
			e := newTestEnv(t)
			target := tokenedURL(testWorkflowID, testSecret, url.Values{callbackauth.FlavorParam: {c.flavor}})
			rec := e.do(t, http.MethodPost, target, strings.NewReader(c.body), c.contentType)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			require.Len(t, e.fake.sent(), 1)
			assert.Equal(t, c.want, e.fake.sent()[0].Callback)
		})
	}
}

// A body that is not the flavor's is a 400 naming the body; without the token nothing is read (403).
func TestCreateTaskCallbackRefusals(t *testing.T) {
	e := newTestEnv(t)
	target := tokenedURL(testWorkflowID, testSecret, url.Values{callbackauth.FlavorParam: {"capmonster"}})
	rec := e.do(t, http.MethodPost, target, strings.NewReader(`{"status":"what"}`), "application/json")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "body")
	forged := tokenedURL(testWorkflowID, "another-secret-of-32-bytes-or-so!", url.Values{callbackauth.FlavorParam: {"capmonster"}})
	rec = e.do(t, http.MethodPost, forged, strings.NewReader(`{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"x"}}`), "application/json")
	require.Equal(t, http.StatusForbidden, rec.Code)
	assert.Empty(t, e.fake.sent())
}

// Issue 29, finding 8: CapMonster calls back without a task ID, so two submissions of one task send the same body.
// Each submission's callback is its own: the second's ERROR_CAPTCHA_UNSOLVABLE is signalled, not dropped as the
// first's duplicate. Suspicion 2: a submission's signal budget is its own, so the first submission's URL replayed
// with other bodies cannot silence the second.
func TestSubmissionsAnswerApart(t *testing.T) {
	for name, replays := range map[string]int{"same body": 0, "budget spent by another submission": testConfig().CallbackBurst + 3} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			post := func(n int, body string) {
				target := submissionURL(testWorkflowID, testSecret, n, url.Values{callbackauth.FlavorParam: {"capmonster"}})
				require.Equal(t, http.StatusOK, e.do(t, http.MethodPost, target, strings.NewReader(body), "application/json").Code)
			}
			post(1, `{"errorId":0,"status":"failed"}`)
			for i := range replays {
				post(1, fmt.Sprintf(`{"errorId":0,"status":"ready","solution":{"token":"t-%d"}}`, i))
			}
			post(2, `{"errorId":0,"status":"failed"}`)
			var second []captchaflow.Callback
			for _, s := range e.fake.sent() {
				if s.Callback.Submission == 2 {
					second = append(second, s.Callback)
				}
			}
			require.Len(t, second, 1, "the second submission's answer reaches the task")
			assert.Equal(t, "ERROR_CAPTCHA_UNSOLVABLE", second[0].Code)
		})
	}
}

// A reset run's pingback URL names the chain's run and its own (r=<chain run>~<8 characters>, issue 29 finding 3):
// the ingress takes it as it takes any signed run of at most 64 bytes, as the previous release's did, and hands the
// run on unchanged, so the workflow tells a discarded submission's callback from its own.
func TestResetRunPingbackIsSignalled(t *testing.T) {
	e := newTestEnv(t)
	run := "0190f3b2-7c4e-7d1a-9b2e-4f0c1d2e3f4a~01a24307" // the longest: a UUID, ~, 8 characters
	require.LessOrEqual(t, len(run), maxRunIDBytes)
	target, err := callbackauth.URLFor("http://ingress.example", testWorkflowID, testSecret, callbackauth.Submission{RunID: run, N: 2})
	require.NoError(t, err)
	u, err := url.Parse(target)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.get(t, u.RequestURI()+"&id=77&code=C-77").Code)
	sent := e.fake.sent()
	require.Len(t, sent, 1)
	assert.Equal(t, captchaflow.Callback{ProviderTaskID: "77", Code: "C-77", Authenticated: true, RunID: run, Submission: 2}, sent[0].Callback)
}
