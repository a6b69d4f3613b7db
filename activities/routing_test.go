package activities

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// routedEnv is an activity environment with providers a (in.php), b (in.php) and c (createTask, CapMonster), each
// a fake, sharing one breaker on a clock the test moves.
func routedEnv(t *testing.T) (*testsuite.TestActivityEnvironment, *Activities, map[string]*fakeProvider, *time.Time) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	now := time.Unix(1_000_000, 0)
	fakes := map[string]*fakeProvider{"a": {getCode: "CODE-A"}, "b": {getCode: "CODE-B"}, "c": {getCode: "CODE-C", flavor: callback.CapMonster}}
	set := providers.NewSet([]*providers.Provider{
		{Name: "a", Client: fakes["a"]},
		{Name: "b", Client: fakes["b"]},
		{Name: "c", Flavor: callback.CapMonster, Client: fakes["c"], PollInterval: 2 * time.Second},
	}, providers.NewBreaker(providers.DefaultCircuitSettings, func() time.Time { return now }))
	acts := &Activities{Providers: set, CallbackBaseURL: "https://cb.example.com/hooks", CallbackSecret: "callback-secret-value"}
	env.RegisterActivity(acts)
	return env, acts, fakes, &now
}

var recaptchaReq = SubmitRequest{Method: "userrecaptcha", Params: map[string]string{"googlekey": "k", "pageurl": "https://x.example"},
	RunID: "run", Submission: 1}

func submitResult(t *testing.T, env *testsuite.TestActivityEnvironment, acts *Activities, req SubmitRequest) (SubmitResult, error) {
	t.Helper()
	v, err := env.ExecuteActivity(acts.Submit, req)
	var r SubmitResult
	if err == nil {
		require.NoError(t, v.Get(&r))
	}
	return r, err
}

// The route is in the result: the first provider, the count of alternatives, the give-up bound.
func TestSubmitRoutesToTheFirstProviderAndSaysSo(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "a", r.Provider)
	require.Equal(t, 2, r.Alternatives)
	require.Equal(t, 120, r.GiveUpSeconds)
	require.Len(t, fakes["a"].pingbacks, 1)
	require.NotContains(t, fakes["a"].pingbacks[0], callbackauth.FlavorParam+"=")
}

// A zero balance opens a's circuit and the same attempt goes on to b: nothing was created at a.
func TestZeroBalanceMovesOnWithinTheAttempt(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	r, err = submitResult(t, env, acts, recaptchaReq) // a is skipped now: not asked again
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	require.Len(t, fakes["a"].pingbacks, 1)
}

// Each candidate of a submission is handed its own pingback URL, naming it under the token: a callback from a (which
// may have created a task after all) can never pass for b's.
func TestEachCandidateGetsItsOwnSignedPingback(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	_, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	for _, name := range []string{"a", "b"} {
		require.Len(t, fakes[name].pingbacks, 1, name)
		u, err := url.Parse(fakes[name].pingbacks[0])
		require.NoError(t, err)
		q := u.Query()
		require.Equal(t, name, q.Get(callbackauth.ProviderParam), "%s's pingback names it", name)
		require.True(t, callbackauth.ValidFor(q.Get(callbackauth.TokenParam), "default-test-workflow-id",
			callbackauth.Submission{RunID: "run", N: 1, Provider: name}, acts.CallbackSecret), "%s's pingback is signed for it", name)
	}
}

// An answer lost after the request was written is never taken elsewhere: the failure names the provider.
func TestLostAnswerStaysWithItsProvider(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "submit", Class: callback.ClassTransient, Written: true, Err: errors.New("read: connection reset by peer")}
	_, err := submitResult(t, env, acts, recaptchaReq)
	appErr := appError(t, err)
	require.Equal(t, FailureSubmitOutcomeUnknown, appErr.Type())
	var d LostDetails
	require.NoError(t, appErr.Details(&d))
	require.Equal(t, LostDetails{Provider: "a", Alternatives: 2, GiveUpSeconds: 120, RunID: recaptchaReq.RunID}, d, "and the run its pingback URL names")
	require.Empty(t, fakes["b"].pingbacks)
}

// A provider that lacks the task type (ERROR_TASK_NOT_SUPPORTED) fails the Submit naming it, for the workflow to go
// elsewhere (not within the attempt), and is not asked for that type again for UnsupportedFor: a task pinned to it
// fails at once naming why; another type still goes to it. A refusal about the task itself stays ProviderConfig.
func TestRefusedTaskTypeNamesTheProviderAndIsRemembered(t *testing.T) {
	env, acts, fakes, now := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "createTask", Code: "ERROR_TASK_NOT_SUPPORTED", Class: callback.ClassUnsupported}
	_, err := submitResult(t, env, acts, recaptchaReq)
	appErr := appError(t, err)
	require.Equal(t, FailureProviderUnsupported, appErr.Type())
	require.True(t, appErr.NonRetryable())
	var d LostDetails
	require.NoError(t, appErr.Details(&d))
	require.Equal(t, LostDetails{Provider: "a", Alternatives: 2, GiveUpSeconds: 120, RunID: recaptchaReq.RunID}, d)
	require.Empty(t, fakes["b"].pingbacks, "the workflow moves the task, not Submit's loop")

	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider, "a is skipped for the type")
	require.Equal(t, 1, r.Alternatives)
	require.Len(t, fakes["a"].pingbacks, 1)
	pinned := recaptchaReq
	pinned.Providers = []string{"a"}
	_, err = submitResult(t, env, acts, pinned)
	require.Equal(t, captchaflow.FailureProviderConfig, appError(t, err).Type())
	require.ErrorContains(t, err, "a: refused the task type")
	v3 := recaptchaReq
	v3.Params = map[string]string{"googlekey": "k", "pageurl": "https://x.example", "version": "v3"}
	fakes["a"].submitErr = nil
	r, err = submitResult(t, env, acts, v3)
	require.NoError(t, err)
	require.Equal(t, "a", r.Provider, "reCAPTCHA v3 is another task type")

	*now = now.Add(providers.UnsupportedFor)
	fakes["a"].submitErr = &providers.Error{Op: "createTask", Code: "ERROR_WRONG_GOOGLEKEY", Class: callback.ClassConfig}
	_, err = submitResult(t, env, acts, recaptchaReq)
	require.Equal(t, captchaflow.FailureProviderConfig, appError(t, err).Type(), "asked again after UnsupportedFor")
	require.Len(t, fakes["a"].pingbacks, 3)
}

// Unreachable three times: a's circuit opens and the third attempt goes on to b (nothing was written to a); a task
// pinned to a waits for it (ProviderUnavailable, retried when a half-opens). a's polls fail from then on: the one
// after PROVIDER_GIVE_UP of them gives its submission up.
func TestUnreachableOpensTheCircuitAndPinnedTasksWait(t *testing.T) {
	env, acts, fakes, now := routedEnv(t)
	fakes["a"].submitErr = transportError("submit")
	for range 2 {
		_, err := submitResult(t, env, acts, recaptchaReq)
		require.Equal(t, FailureProviderTransient, appError(t, err).Type())
	}
	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	pinned := recaptchaReq
	pinned.Providers = []string{"a"}
	_, err = submitResult(t, env, acts, pinned)
	appErr := appError(t, err)
	require.Equal(t, FailureProviderUnavailable, appErr.Type())
	require.False(t, appErr.NonRetryable())
	fakes["a"].getErr = transportError("get")
	polls := int(2 * time.Minute / (5 * time.Second)) // every 5 s, the run of failures the submits began lasts 2 min
	for range polls - 1 {
		*now = now.Add(5 * time.Second)
		_, err = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1", Provider: "a", GiveUp: true})
		require.Equal(t, FailureProviderTransient, appError(t, err).Type())
	}
	*now = now.Add(5 * time.Second)
	_, err = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1", Provider: "a", GiveUp: true})
	require.Equal(t, FailureProviderGaveUp, appError(t, err).Type())
	require.Equal(t, polls, fakes["a"].gets, "a poll that did not ask a")
	_, err = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1", Provider: "a"}) // nowhere else to go
	require.Equal(t, FailureProviderTransient, appError(t, err).Type())
}

// A method a createTask provider cannot serve is skipped for it, never sent; none serving it fails naming why.
func TestUnsupportedMethodsAreSkipped(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	req := SubmitRequest{Method: "textcaptcha", Params: map[string]string{"textcaptcha": "2+2?"}, RunID: "run", Submission: 1}
	req.Providers = []string{"c", "b"}
	r, err := submitResult(t, env, acts, req)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	require.Empty(t, fakes["c"].pingbacks)
	req.Providers = []string{"c"}
	_, err = submitResult(t, env, acts, req)
	appErr := appError(t, err)
	require.True(t, appErr.NonRetryable())
	require.True(t, strings.Contains(appErr.Message(), "c: "), appErr.Message())
}

// A createTask provider's pingback names its flavor, so the ingress reads its JSON body.
func TestCreateTaskPingbackNamesTheFlavor(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	req := recaptchaReq
	req.Providers = []string{"c"}
	r, err := submitResult(t, env, acts, req)
	require.NoError(t, err)
	require.Equal(t, "c", r.Provider)
	require.Equal(t, 2, r.PollIntervalSeconds) // CapMonster: at most every 2 s
	require.Contains(t, fakes["c"].pingbacks[0], callbackauth.FlavorParam+"=capmonster")
}

// CapSolver answers an image task within createTask: the code comes in the Submit result, for the workflow to take
// at once; a task createTask only accepted comes without one.
func TestInstantAnswerComesInTheSubmitResult(t *testing.T) {
	var answer atomic.Pointer[string]
	answer.Store(new(`{"errorId":0,"status":"ready","solution":{"text":"44795sds"},"taskId":"2376919c-1863-11ec-a012-94e6f7355a0b"}`))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, *answer.Load()) }))
	t.Cleanup(srv.Close)
	c, err := providers.NewCreateTask(callback.CapSolver, srv.URL, strings.Repeat("k", 32))
	require.NoError(t, err)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	acts := &Activities{Providers: providers.NewSet([]*providers.Provider{
		{Name: "cs", Flavor: callback.CapSolver, Client: c},
	}, providers.NewBreaker(providers.DefaultCircuitSettings, time.Now)), CallbackBaseURL: "https://cb.example.com/hooks", CallbackSecret: "callback-secret-value"}
	env.RegisterActivity(acts)
	img := SubmitRequest{Method: "base64", Params: map[string]string{
		"body": base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 120)...))}, RunID: "run", Submission: 1}
	r, err := submitResult(t, env, acts, img)
	require.NoError(t, err)
	require.Equal(t, "44795sds", r.Code)
	require.Equal(t, "2376919c-1863-11ec-a012-94e6f7355a0b", r.ProviderTaskID)

	answer.Store(new(`{"errorId":0,"taskId":"2376919c-1863-11ec-a012-94e6f7355a0c"}`))
	r, err = submitResult(t, env, acts, img)
	require.NoError(t, err)
	require.Empty(t, r.Code)
}

// A 3-request blip at a, then two minutes without traffic to it: that evidence is stale, so a poll of a submission a
// accepted (a holds the paid code) asks a and takes the code instead of giving the submission up.
func TestStaleBlipDoesNotGiveUpAnAcceptedSubmission(t *testing.T) {
	env, acts, fakes, now := routedEnv(t)
	fakes["a"].submitErr = transportError("submit")
	for range 3 {
		_, _ = submitResult(t, env, acts, recaptchaReq)
	}
	*now = now.Add(2 * time.Minute)
	v, err := env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1", Provider: "a", GiveUp: true})
	require.NoError(t, err)
	var r PollResult
	require.NoError(t, v.Get(&r))
	require.Equal(t, "CODE-A", r.Code)
	require.Equal(t, 1, fakes["a"].gets)
}

// a's requests have failed for PROVIDER_GIVE_UP, then it answers again: a poll of a submission it accepted still
// asks it first, and takes the code.
func TestPollAsksAProviderPastGiveUp(t *testing.T) {
	env, acts, fakes, now := routedEnv(t)
	fakes["a"].getErr = transportError("get")
	for range 2*time.Minute/(5*time.Second) + 1 { // another task's polls, every 5 s for 2 min
		_, _ = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "2", Provider: "a"})
		*now = now.Add(5 * time.Second)
	}
	require.True(t, acts.Providers.Breaker.GivenUp("a"))
	fakes["a"].getErr = nil
	v, err := env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1", Provider: "a", GiveUp: true})
	require.NoError(t, err)
	var r PollResult
	require.NoError(t, v.Get(&r))
	require.Equal(t, "CODE-A", r.Code)
}

// A provider removed from PROVIDERS_FILE while a task's submission is open there: its code is out of this worker's
// reach, so the poll gives the submission up at once, naming the provider (the task submits elsewhere, as for an
// unreachable provider), instead of failing WorkerConfig, retried until the task's deadline.
func TestPollOfAProviderRemovedFromTheFileGivesTheSubmissionUp(t *testing.T) {
	env, acts, _, _ := routedEnv(t)
	for _, giveUp := range []bool{true, false} {
		_, err := env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "7300000001", Provider: "gone", GiveUp: giveUp, Method: "userrecaptcha"})
		appErr := appError(t, err)
		require.Equal(t, FailureProviderGaveUp, appErr.Type())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, appErr.Message(), `"gone"`)
		require.Contains(t, appErr.Message(), "PROVIDERS_FILE")
		var provider string
		require.NoError(t, appErr.Details(&provider))
		require.Equal(t, "gone", provider)
	}
}
