package activities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// providerEnv is an activity test environment around a fake provider, with a tally test scope as metrics handler.
func providerEnv(t *testing.T) (*testsuite.TestActivityEnvironment, *Activities, *fakeProvider, tally.TestScope) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	scope := tally.NewTestScope("", nil)
	ts.SetMetricsHandler(sdktally.NewMetricsHandler(scope))
	env := ts.NewTestActivityEnvironment()
	provider := &fakeProvider{getCode: "CODE"}
	acts := &Activities{Provider: provider, CallbackBaseURL: "https://cb.example.com/hooks", CallbackSecret: "callback-secret-value"}
	env.RegisterActivity(acts)
	return env, acts, provider, scope
}

func transportError(op string) error {
	return &providers.Error{Op: op, Class: callback.ClassTransient, Err: &url.Error{Op: "Post", URL: "https://ocr.providers.com/in.php",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}}
}

// appError runs the activity and returns its ApplicationError.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	return appErr
}

// A busy or rate-limit answer asks Temporal to retry after the provider's documented wait, ±20 %, for in.php
// (Submit) and res.php (Poll) alike; the error stays a retryable ProviderTransient with the code in its details.
func TestBusyAnswersAskForTheDocumentedWait(t *testing.T) {
	waits := map[string]time.Duration{
		"ERROR_NO_SLOT_AVAILABLE": 5 * time.Second,
		"MAX_USER_TURN":           10 * time.Second,
		"ERROR_TOO_MUCH_REQUESTS": 10 * time.Second,
		"ERROR_ZERO_BALANCE":      60 * time.Second, // CaptchaAI: no free thread
		"IP_BANNED":               5 * time.Minute,
	}
	env, acts, provider, _ := providerEnv(t)
	for code, wait := range waits {
		for _, op := range []string{"submit", "get"} {
			perr := &providers.Error{Op: op, Code: code, Class: callback.ClassTransient}
			seen := map[time.Duration]bool{}
			for range 20 {
				var err error
				if op == "submit" {
					provider.submitErr = perr
					_, err = env.ExecuteActivity(acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{}, RunID: "run-1", Submission: 1})
				} else {
					provider.getErr = perr
					_, err = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1"})
				}
				appErr := appError(t, err)
				wantType := FailureProviderTransient
				if op == "submit" && code == "ERROR_ZERO_BALANCE" {
					wantType = FailureProviderZeroBalance // the workflow pauses on it (a policy that retries it paces it the same)
				}
				assert.Equal(t, wantType, appErr.Type(), "%s %s", op, code)
				assert.False(t, appErr.NonRetryable(), "%s %s: busy answers never fail a task early", op, code)
				var detail string
				require.NoError(t, appErr.Details(&detail))
				assert.Equal(t, code, detail, "%s: the code stays in the details", op)
				d := appErr.NextRetryDelay()
				assert.GreaterOrEqual(t, d, wait*8/10, "%s %s", op, code)
				assert.LessOrEqual(t, d, wait*12/10, "%s %s", op, code)
				seen[d] = true
			}
			assert.Greater(t, len(seen), 1, "%s %s: the wait is jittered", op, code)
			provider.submitErr, provider.getErr = nil, nil
		}
	}
}

// Transient failures without a documented wait, and every other class, leave the spacing to the retry policy.
func TestOtherFailuresKeepThePolicysBackoff(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	cases := []struct {
		err      error
		wantType string
	}{
		{&providers.Error{Op: "get", Code: "ERROR_SERVER_ERROR", Class: callback.ClassTransient}, FailureProviderTransient},
		{&providers.Error{Op: "get", Code: "ERROR: 1001", Class: callback.ClassTransient}, FailureProviderTransient},
		{&providers.Error{Op: "get", Class: callback.ClassTransient, HTTPStatus: 502, Err: errors.New("Bad Gateway")}, FailureProviderTransient},
		{transportError("get"), FailureProviderTransient},
		{context.DeadlineExceeded, FailureProviderTransient},
		{&providers.Error{Op: "get", Code: "CAPCHA_NOT_READY", Class: callback.ClassNotReady}, FailureNotReady},
		{&providers.Error{Op: "get", Code: "ERROR_CAPTCHA_UNSOLVABLE", Class: callback.ClassResubmit}, FailureResubmit},
		{&providers.Error{Op: "get", Code: "ERROR_WRONG_USER_KEY", Class: callback.ClassConfig}, captchaflow.FailureProviderConfig},
		{&providers.Error{Op: "get", Code: "ERROR_SOMETHING_NEW", Class: callback.ClassUnknown}, captchaflow.FailureProviderUnknown},
	}
	for _, c := range cases {
		provider.getErr = c.err
		_, err := env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1"})
		appErr := appError(t, err)
		assert.Equal(t, c.wantType, appErr.Type(), c.err.Error())
		assert.Zero(t, appErr.NextRetryDelay(), "%v: the retry policy spaces it", c.err)
	}
}

func TestPacedDelay(t *testing.T) {
	const w = 10 * time.Second
	assert.Equal(t, 8*time.Second, pacedDelay(w, 0, 0), "-20 %")
	assert.Equal(t, 10*time.Second, pacedDelay(w, 0, 0.5))
	assert.InDelta(t, float64(12*time.Second), float64(pacedDelay(w, 0, 0.999999)), float64(time.Millisecond), "+20 %")
	assert.Zero(t, pacedDelay(0, time.Hour, 0.5), "no documented wait: the policy's backoff")

	// Cut to the deadline, so that Temporal still schedules the retry and the task ends at its deadline, not early.
	assert.Equal(t, 3*time.Minute-deadlineMargin, pacedDelay(5*time.Minute, 3*time.Minute, 0.5))
	assert.Equal(t, 5*time.Minute, pacedDelay(5*time.Minute, 10*time.Minute, 0.5), "far from the deadline: uncut")
	assert.Equal(t, 5*time.Minute, pacedDelay(5*time.Minute, 0, 0.5), "no deadline known: uncut")
	assert.Equal(t, 5*time.Minute, pacedDelay(5*time.Minute, deadlineMargin/2, 0.5), "at the deadline: nothing to save")
}

// pollOnceWorkflow runs Poll once with the given schedule-to-close timeout, as the workflow's provider activities
// run with the task's remaining deadline, and returns its error.
func pollOnceWorkflow(ctx workflow.Context, scheduleToClose time.Duration) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: scheduleToClose,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, "Poll", PollRequest{ProviderTaskID: "1"}).Get(ctx, nil)
}

// With two minutes left before the task's deadline, IP_BANNED's five-minute wait is cut to just inside them: had it
// been asked for in full, Temporal would have failed the activity (and the task) at once, three minutes early.
func TestBusyWaitIsCutToTheTaskDeadline(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	provider := &fakeProvider{getErr: &providers.Error{Op: "get", Code: "IP_BANNED", Class: callback.ClassTransient}}
	env.RegisterActivity(&Activities{Provider: provider})
	env.RegisterWorkflow(pollOnceWorkflow)
	env.ExecuteWorkflow(pollOnceWorkflow, 2*time.Minute)
	require.True(t, env.IsWorkflowCompleted())
	appErr := appError(t, env.GetWorkflowError())
	assert.Equal(t, FailureProviderTransient, appErr.Type())
	assert.LessOrEqual(t, appErr.NextRetryDelay(), 2*time.Minute-deadlineMargin)
	assert.Greater(t, appErr.NextRetryDelay(), 2*time.Minute-deadlineMargin-5*time.Second)
}

// answers sums captchaflow_provider_answers_total by "op/code".
func answers(scope tally.TestScope) map[string]int64 {
	got := map[string]int64{}
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == MetricProviderAnswers {
			got[c.Tags()["op"]+"/"+c.Tags()["code"]] += c.Value()
		}
	}
	return got
}

func TestProviderAnswersAreCountedByOpAndBoundedCode(t *testing.T) {
	env, acts, provider, scope := providerEnv(t)
	submit := func(err error) {
		provider.submitErr = err
		_, _ = env.ExecuteActivity(acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{}, RunID: "run-1", Submission: 1})
	}
	poll := func(code string, err error) {
		provider.getCode, provider.getErr = code, err
		_, _ = env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1"})
	}

	submit(nil)
	submit(nil)
	submit(&providers.Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: callback.ClassTransient})
	submit(&providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient})
	submit(&providers.Error{Op: "submit", Code: "error_wrong_user_key", Class: callback.ClassConfig}) // canonical spelling
	submit(transportError("submit"))
	submit(context.DeadlineExceeded)
	submit(&providers.Error{Op: "submit", Class: callback.ClassTransient, HTTPStatus: 503, Err: errors.New("Service Unavailable")})
	submit(&providers.Error{Op: "submit", Code: "ERROR: 1001", Class: callback.ClassTransient})
	for i := range 5 { // a provider making up codes cannot grow the label set
		submit(&providers.Error{Op: "submit", Code: fmt.Sprintf("ERROR_MADE_UP_%d", i), Class: callback.ClassUnknown})
	}

	poll("03AGdBq2-token", nil)
	poll("", &providers.Error{Op: "get", Code: "CAPCHA_NOT_READY", Class: callback.ClassNotReady})
	poll("", &providers.Error{Op: "get", Code: "CAPCHA_NOT_READY", Class: callback.ClassNotReady})
	poll("", &providers.Error{Op: "get", Code: "IP_BANNED", Class: callback.ClassTransient})
	poll("", transportError("get"))
	poll("ERROR_CAPTCHA_UNSOLVABLE", nil)                              // a status word answered as a solution
	poll("ERROR_NOT_DOCUMENTED", nil)                                  // an unknown one
	poll(strings.Repeat("A", captchaflow.MaxCodeBytes+1), nil)         // oversized
	poll("", &providers.Error{Op: "get", Class: callback.ClassUnknown, // an invalid answer
		Err: fmt.Errorf("%w: empty code", providers.ErrInvalidAnswer)})

	assert.Equal(t, map[string]int64{
		"submit/OK":                      2,
		"submit/ERROR_NO_SLOT_AVAILABLE": 1,
		"submit/ERROR_ZERO_BALANCE":      1,
		"submit/ERROR_WRONG_USER_KEY":    1,
		"submit/network":                 2,
		"submit/other":                   7,
		"get/OK":                         1,
		"get/CAPCHA_NOT_READY":           2,
		"get/IP_BANNED":                  1,
		"get/network":                    1,
		"get/ERROR_CAPTCHA_UNSOLVABLE":   1,
		"get/other":                      3,
	}, answers(scope))
}

// accepted_at is no later than the provider got the request: an instant pingback, stamped by the ingress as the
// provider sends it, can come before Submit's answer, and must not read as a code from before its submission.
func TestAcceptedAtPrecedesTheProvidersCallback(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	v, err := env.ExecuteActivity(acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{}, RunID: "run-1", Submission: 1})
	require.NoError(t, err)
	var res SubmitResult
	require.NoError(t, v.Get(&res))
	assert.False(t, res.AcceptedAt.IsZero())
	assert.False(t, res.AcceptedAt.After(provider.submittedAt), "accepted at %v, the provider got it at %v", res.AcceptedAt, provider.submittedAt)
}

// A Submit that never reaches the provider (no callback secret) is not a provider answer.
func TestSubmitThatNeverAsksTheProviderCountsNoAnswer(t *testing.T) {
	env, acts, provider, scope := providerEnv(t)
	acts.CallbackSecret = ""
	_, err := env.ExecuteActivity(acts.Submit, SubmitRequest{Method: "x", Params: map[string]string{}, RunID: "run-1", Submission: 1})
	assert.Equal(t, FailureWorkerConfig, appError(t, err).Type())
	assert.Empty(t, provider.pingbacks)
	assert.Empty(t, answers(scope))
}

// A fallback poll is held back until the provider's quartile solve time of the method since its submission, without a
// request; a confirmation (no submission time) and a provider the model knows too little of ask at once.
func TestFirstPollWaitsForTheProvidersSolveTimes(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	model := providers.NewModel(providers.File{})
	for _, secs := range []float64{40, 42, 45, 50, 60} {
		model.Learn(providers.Obs{Provider: "a", Method: "userrecaptcha", Seconds: secs, Outcome: providers.ObservedSolved})
	}
	acts.Provider, acts.Providers = nil, providers.NewSet([]*providers.Provider{{Name: "a", Client: provider}}, providers.NewBreaker(providers.DefaultCircuitSettings, time.Now))
	acts.Providers.Model = model
	poll := PollRequest{ProviderTaskID: "1", Provider: "a", Method: "userrecaptcha", SubmittedAt: time.Now().Add(-10 * time.Second)}
	appErr := appError(t, func() error { _, err := env.ExecuteActivity(acts.Poll, poll); return err }())
	assert.Equal(t, FailureNotReady, appErr.Type())
	assert.InDelta(t, 11*time.Second, appErr.NextRetryDelay(), float64(2*time.Second), "half the 42 s quartile, submitted 10 s ago")
	assert.Zero(t, provider.gets, "no request before then")
	// A hold that would outlast the task's deadline asks at once (the activity's schedule-to-close is that deadline).
	var ts testsuite.WorkflowTestSuite
	wenv := ts.NewTestWorkflowEnvironment()
	wenv.RegisterActivity(acts)
	wenv.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{ScheduleToCloseTimeout: 5 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(ctx, "Poll", poll).Get(ctx, nil)
	})
	require.NoError(t, wenv.GetWorkflowError())
	for _, p := range []PollRequest{{ProviderTaskID: "1", Provider: "a", Method: "userrecaptcha"}, // a confirmation
		{ProviderTaskID: "1", Provider: "a", Method: "hcaptcha", SubmittedAt: time.Now()}} { // nothing known of the method
		_, err := env.ExecuteActivity(acts.Poll, p)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, provider.gets)
}
