package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Issue #9: hostile and odd input must never lose, corrupt or stall a result.

func refusedAtSubmit() error {
	return temporal.NewNonRetryableApplicationError("captchaai submit: ERROR_CAPTCHA_UNSOLVABLE (resubmit)", activities.FailureResubmit, nil)
}

// ---- 1. A provider status word in a callback is never a result ----

func (s *SolveCaptchaSuite) TestAuthenticatedUnsolvableCallbackResubmits() {
	s.expectSubmit("111", "222")
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "SECOND", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("SECOND", r.Code)
	s.Equal("222", r.ProviderTaskID)
	s.Equal(2, r.Submits)
	s.env.AssertActivityNotCalled(s.T(), "Poll", mock.Anything, mock.Anything)
}

func (s *SolveCaptchaSuite) TestAuthenticatedUnsolvableCallbackWithNoSubmitsLeftIsUnsolvable() {
	s.expectSubmit("111")
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1})
	in := recaptcha()
	in.MaxSubmits = 1
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	s.Equal(captchaflow.FailureUnsolvable, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "ERROR_CAPTCHA_UNSOLVABLE")
}

// TestStatusWordCallbacksAreConfirmedNotTaken: every other status word in an authenticated callback is checked
// with res.php, whose code wins; an unauthenticated "unsolvable" is only a hint too (res.php decides).
func TestStatusWordCallbacksAreConfirmedNotTaken(t *testing.T) {
	for _, cb := range []captchaflow.Callback{
		{Code: "CAPCHA_NOT_READY", Authenticated: true},
		{Code: "CAPTCHA_NOT_READY", Authenticated: true},
		{Code: "ERROR_WRONG_USER_KEY", Authenticated: true},
		{Code: "ERROR_NO_SLOT_AVAILABLE", Authenticated: true},
		{Code: "ERROR_SOMETHING_NEW", Authenticated: true},
		{Code: "ERROR: 1001", Authenticated: true},
		{Code: " ERROR_CAPTCHA_UNSOLVABLE\n", Authenticated: false},
	} {
		t.Run(strings.TrimSpace(cb.Code), func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			env := ts.NewTestWorkflowEnvironment()
			Register(env, &activities.Activities{}, Settings{})
			env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
			env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).
				Return(activities.PollResult{Code: "FROM-RES-PHP"}, nil).Once()
			cb.ProviderTaskID, cb.RunID, cb.Submission = "111", testRunID, 1
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(captchaflow.CallbackSignal, cb) }, 10*time.Second)
			env.ExecuteWorkflow(SolveCaptcha, recaptcha())

			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var r captchaflow.Result
			require.NoError(t, env.GetWorkflowResult(&r))
			assert.Equal(t, "FROM-RES-PHP", r.Code)
			assert.Equal(t, 10*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
			env.AssertExpectations(t)
		})
	}
}

func TestStatusWords(t *testing.T) {
	for _, w := range []string{"CAPCHA_NOT_READY", "CAPTCHA_NOT_READY", "ERROR_CAPTCHA_UNSOLVABLE", "ERROR_WRONG_USER_KEY",
		"MAX_USER_TURN", "IP_BANNED", "ERROR_SOMETHING_NEW", "ERROR: 1001", " ERROR_ZERO_BALANCE\n"} {
		assert.True(t, callback.IsStatusWord(w), w)
	}
	// Solutions, including a text CAPTCHA's upper-case answer, are not.
	for _, c := range []string{"03AGdBq24PBCbwiDRaS_MJ7Z", "XK4P9", "ERROR", "error_captcha_unsolvable", "OK", "7300000042",
		`{"captcha_output":"x"}`, ""} {
		assert.False(t, callback.IsStatusWord(c), c)
	}
	assert.Equal(t, callback.ClassResubmit, callback.ClassifyCode(" ERROR_CAPTCHA_UNSOLVABLE "))
}

// ---- 2. An in.php refusal is a submission: counted, backed off, and exhausted into a typed failure ----

func (s *SolveCaptchaSuite) TestFirstSubmitRefusedIsCountedAndBackedOff() {
	s.env.SetTestTimeout(10 * time.Second)
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, refusedAtSubmit()).Once()
	s.expectSubmit("222")
	s.signalAt(time.Minute, captchaflow.Callback{ProviderTaskID: "222", Code: "OK-222", Authenticated: true, RunID: testRunID, Submission: 2})
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("OK-222", r.Code)
	s.Equal(2, r.Submits, "the refused in.php request counts against max_submits")
	s.Equal(firstResubmitBackoff, r.SubmittedAt.Sub(start), "the second in.php request waited the backoff")
}

func (s *SolveCaptchaSuite) TestSubmitRefusalsExhaustMaxSubmits() {
	s.env.SetTestTimeout(10 * time.Second)
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, refusedAtSubmit()).Times(3)
	var submittedAt []time.Time
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "Submit" {
			submittedAt = append(submittedAt, s.env.Now())
		}
	})
	in := recaptcha()
	in.MaxSubmits = 3
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	s.Equal(captchaflow.FailureUnsolvable, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "3 submission(s)")
	s.Require().Len(submittedAt, 3)
	s.Equal(resubmitBackoff(1), submittedAt[1].Sub(submittedAt[0]))
	s.Equal(resubmitBackoff(2), submittedAt[2].Sub(submittedAt[1]))
	s.Greater(resubmitBackoff(2), resubmitBackoff(1), "the backoff grows")
}

func (s *SolveCaptchaSuite) TestSubmitRefusedAfterAnAcceptedSubmissionCounts() {
	s.env.SetTestTimeout(10 * time.Second)
	s.expectSubmit("111")
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, refusedAtSubmit()).Once()
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).Return(activities.PollResult{}, unsolvable()).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha()) // max_submits 2: the accepted one and the refused one

	s.Equal(captchaflow.FailureUnsolvable, s.failureType())
	s.env.AssertNumberOfCalls(s.T(), "Submit", 2)
}

func (s *SolveCaptchaSuite) TestSubmitRefusalBackoffEndsAtTheDeadline() {
	s.env.SetTestTimeout(10 * time.Second)
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, refusedAtSubmit())
	in := recaptcha()
	in.MaxSubmits = 10
	in.DeadlineSeconds = 12
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
	s.env.AssertNumberOfCalls(s.T(), "Submit", 2) // at 0 s and 5 s; the next backoff is cut to the deadline
	s.Equal(12*time.Second, s.env.Now().Sub(start))
}

// ---- 3. Cancelling during delivery ends cancelled, with the result kept ----

func TestCancelDuringDeliveryEndsCancelled(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	metrics := newCapturingMetrics()
	ts.SetMetricsHandler(metrics)
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(
		temporal.NewApplicationError("notify_url answered 503", activities.FailureDeliveryRejected))
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "KEEP-ME", Authenticated: true, RunID: testRunID, Submission: 1})
	}, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	env.ExecuteWorkflow(SolveCaptcha, in)

	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "want cancellation, got %v", err)
	var appErr *temporal.ApplicationError
	assert.False(t, errors.As(err, &appErr), "not a DeliveryFailed failure: %v", err)
	var kept captchaflow.Result
	require.NoError(t, canceled.Details(&kept), "the result rides in the cancellation's details")
	assert.Equal(t, "KEEP-ME", kept.Code)
	assert.Equal(t, int64(1), metrics.count(MetricTasksFinished, "cancelled"))
	assert.Zero(t, metrics.count(MetricTasksFinished, "delivery_failed"))
}

// ---- 4. A workflow ID the ingress would refuse is refused up front ----

func (s *SolveCaptchaSuite) TestInvalidWorkflowIDIsRefused() {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "order 42/login"})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "must be 1-200 characters of A-Z a-z 0-9 . _ : -")
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(s.env.GetWorkflowError(), &appErr))
	s.True(appErr.NonRetryable())
	s.env.AssertActivityNotCalled(s.T(), "Submit", mock.Anything, mock.Anything)
}

// ---- 6. Flood resistance ----

func (s *SolveCaptchaSuite) TestUnauthenticatedCallbackFloodCostsBoundedConfirmations() {
	s.expectSubmit("111")
	confirms := 0
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).
		Run(func(mock.Arguments) { confirms++ }).Return(activities.PollResult{}, notReady()).Times(maxConfirmsPerSubmission)
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).
		Return(activities.PollResult{Code: "POLLED"}, nil).Once()
	for i := range 50 {
		s.signalAt(time.Duration(i+1)*2*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "FORGED", Authenticated: false})
	}
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("POLLED", r.Code, "the timer's poll still recovers the result")
	s.Equal(captchaflow.ViaPoll, r.Via)
	s.Equal(maxConfirmsPerSubmission, confirms)
	s.env.AssertNumberOfCalls(s.T(), "Poll", maxConfirmsPerSubmission+1)
}

func (s *SolveCaptchaSuite) TestOversizedCallbackCodeIsIgnored() {
	s.expectSubmit("111")
	huge := strings.Repeat("x", captchaflow.MaxCodeBytes+1)
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: huge, Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(6*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: huge, Authenticated: false})
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "REAL", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("REAL", r.Code)
	s.env.AssertActivityNotCalled(s.T(), "Poll", mock.Anything, mock.Anything)
}

// fixedProvider answers res.php with one code.
type fixedProvider struct {
	providers.Client
	code string
}

func (p fixedProvider) Get(context.Context, string) (string, error) { return p.code, nil }

// TestPollRefusesAnswersThatCannotBeSolutions: res.php's "success" carrying a status word is taken for what it
// says (so a confirmation or a poll never returns it as a code), and an oversized answer is a typed,
// non-retryable failure.
func TestPollRefusesAnswersThatCannotBeSolutions(t *testing.T) {
	cases := map[string]struct {
		typ          string
		nonRetryable bool
	}{
		"CAPCHA_NOT_READY":                   {activities.FailureNotReady, false},
		"ERROR_CAPTCHA_UNSOLVABLE":           {activities.FailureResubmit, true},
		"ERROR_WRONG_CAPTCHA_ID":             {captchaflow.FailureProviderConfig, true},
		"ERROR_NO_SLOT_AVAILABLE":            {activities.FailureProviderTransient, false},
		"ERROR_SOMETHING_NEW":                {captchaflow.FailureProviderUnknown, true},
		"ERROR_PROXY_CONNECTION_FAILED":      {captchaflow.FailureProxyRejected, true}, // the user's proxy: not resubmitted
		strings.Repeat("y", 1+16<<10):        {captchaflow.FailureProviderUnknown, true},
		"ERROR_" + strings.Repeat("Z", 1000): {captchaflow.FailureProviderUnknown, true},
	}
	for code, want := range cases {
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		a := &activities.Activities{Provider: fixedProvider{code: code}}
		env.RegisterActivity(a)
		_, err := env.ExecuteActivity(a.Poll, activities.PollRequest{ProviderTaskID: "111"})
		var appErr *temporal.ApplicationError
		if assert.True(t, errors.As(err, &appErr), "%.40s: %v", code, err) {
			assert.Equal(t, want.typ, appErr.Type(), "%.40s", code)
			assert.Equal(t, want.nonRetryable, appErr.NonRetryable(), "%.40s", code)
			assert.Less(t, len(appErr.Error()), 400, "the message quotes a bounded part of the answer")
		}
	}
	// A real code, up to the bound, is a result.
	for _, code := range []string{"03AGdBq2", "XK4P9", strings.Repeat("t", captchaflow.MaxCodeBytes)} {
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		a := &activities.Activities{Provider: fixedProvider{code: code}}
		env.RegisterActivity(a)
		v, err := env.ExecuteActivity(a.Poll, activities.PollRequest{ProviderTaskID: "111"})
		require.NoError(t, err)
		var r activities.PollResult
		require.NoError(t, v.Get(&r))
		assert.Equal(t, code, r.Code)
	}
}

// ---- metrics capture ----

// capturingMetrics counts counter increments by name and outcome tag.
type capturingMetrics struct {
	mu     *sync.Mutex
	counts map[string]int64
	tags   map[string]string
}

func newCapturingMetrics() *capturingMetrics {
	return &capturingMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}}
}

func (m *capturingMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range m.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &capturingMetrics{mu: m.mu, counts: m.counts, tags: merged}
}

func (m *capturingMetrics) Counter(name string) client.MetricsCounter {
	key := name + "|" + m.tags["outcome"]
	return counterFunc(func(n int64) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.counts[key] += n
	})
}

func (m *capturingMetrics) Gauge(string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge("")
}
func (m *capturingMetrics) Timer(string) client.MetricsTimer {
	return client.MetricsNopHandler.Timer("")
}

func (m *capturingMetrics) count(name, outcome string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name+"|"+outcome]
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

// Untokened hints arrive as an Update: the validator lets in at most UntokenedHintsPerSubmission per submission,
// only while it waits for its callback, only for its provider task; each accepted one asks res.php (no code is
// taken from the sender), at most maxConfirmsPerSubmission of them.
func TestUntokenedHintsAreBoundedAndConfirmed(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil)
	polls := 0
	env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(func(context.Context, activities.PollRequest) (activities.PollResult, error) {
		polls++
		return activities.PollResult{}, temporal.NewApplicationError("CAPCHA_NOT_READY", activities.FailureNotReady)
	})
	accepted, rejected := 0, 0
	hint := func(id string) {
		env.UpdateWorkflow(captchaflow.UntokenedUpdate, "", &testsuite.TestUpdateCallback{
			OnAccept: func() { accepted++ }, OnReject: func(error) { rejected++ }, OnComplete: func(any, error) {}},
			captchaflow.UntokenedHint{ProviderTaskID: id})
	}
	for i := range 6 {
		env.RegisterDelayedCallback(func() { hint("111") }, time.Duration(i+1)*time.Second)
	}
	env.RegisterDelayedCallback(func() { hint("999") }, 8*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111",
			Authenticated: true, RunID: "default-test-run-id", Submission: 1})
	}, 20*time.Second)
	env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, captchaflow.UntokenedHintsPerSubmission, accepted, "accepted hints")
	assert.Equal(t, 3, rejected, "two over the budget and one for another provider task")
	assert.LessOrEqual(t, polls, maxConfirmsPerSubmission*confirmAttempts, "res.php confirmations")
	assert.Positive(t, polls, "an accepted hint asks res.php")
}

// TestCallbackOfAKindThatAnswersMoreIsConfirmed: a challenge page's token is good only with its user agent, which
// the pingback does not carry: an authenticated callback's code is confirmed by a result request of the task's own
// (PollRequest.Kind set: never batched), whose user agent and cookies reach the Result.
func TestCallbackOfAKindThatAnswersMoreIsConfirmed(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	env.OnActivity(acts.Poll, mock.Anything, mock.MatchedBy(func(r activities.PollRequest) bool {
		return r.ProviderTaskID == "111" && r.Kind == string(providers.KindTurnstileChallenge)
	})).Return(activities.PollResult{Code: "TOKEN", UserAgent: "Mozilla/5.0 T", Cookies: "a=1"}, nil).Once()
	cb := captchaflow.Callback{ProviderTaskID: "111", Code: "TOKEN", Authenticated: true, RunID: testRunID, Submission: 1}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(captchaflow.CallbackSignal, cb) }, 10*time.Second)
	env.ExecuteWorkflow(SolveCaptcha, captchaflow.Input{Method: "turnstile", Params: captchaflow.Params{"sitekey": "0x4", "pageurl": "https://e.com",
		"pagedata": "PD"}}.WithDefaults())

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r captchaflow.Result
	require.NoError(t, env.GetWorkflowResult(&r))
	assert.Equal(t, captchaflow.Result{Code: "TOKEN", UserAgent: "Mozilla/5.0 T", Cookies: "a=1"},
		captchaflow.Result{Code: r.Code, UserAgent: r.UserAgent, Cookies: r.Cookies})
	env.AssertExpectations(t)
}

// TestLostAnswerOfAKindThatAnswersMoreIsCompleted: a submission whose in.php answer was lost is answered by its
// pingback, which carries the code alone (in.php's DataDome pingback, its Set-Cookie line); one result request of
// the task's own fetches the whole answer.
func TestLostAnswerOfAKindThatAnswersMoreIsCompleted(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, lostAnswer()).Once()
	env.OnActivity(acts.Poll, mock.Anything, mock.MatchedBy(func(r activities.PollRequest) bool {
		return r.ProviderTaskID == "111" && r.Kind == string(providers.KindTurnstileChallenge)
	})).Return(activities.PollResult{Code: "TOKEN", UserAgent: "Mozilla/5.0 T", Cookies: "a=1"}, nil).Once()
	cb := captchaflow.Callback{ProviderTaskID: "111", Code: "datadome=TOKEN; Path=/", Authenticated: true, RunID: testRunID, Submission: 1}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(captchaflow.CallbackSignal, cb) }, 10*time.Second)
	in := captchaflow.Input{Method: "turnstile", Params: captchaflow.Params{"sitekey": "0x4", "pageurl": "https://e.com",
		"pagedata": "PD"}, LostAnswerWaitSeconds: 60}.WithDefaults()
	env.ExecuteWorkflow(SolveCaptcha, in)

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r captchaflow.Result
	require.NoError(t, env.GetWorkflowResult(&r))
	assert.Equal(t, captchaflow.Result{ProviderTaskID: "111", Code: "TOKEN", UserAgent: "Mozilla/5.0 T", Cookies: "a=1"},
		captchaflow.Result{ProviderTaskID: r.ProviderTaskID, Code: r.Code, UserAgent: r.UserAgent, Cookies: r.Cookies})
	env.AssertExpectations(t)
}
