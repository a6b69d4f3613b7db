package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

type SolveCaptchaSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
}

func TestSolveCaptcha(t *testing.T) { suite.Run(t, new(SolveCaptchaSuite)) }

func (s *SolveCaptchaSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	Register(s.env, &activities.Activities{}, Settings{})
}

func (s *SolveCaptchaSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func recaptcha() captchaflow.Input {
	return captchaflow.Input{Method: "userrecaptcha", Params: captchaflow.Params{"googlekey": "6Le-key", "pageurl": "https://example.com/login"}}
}

func notReady() error {
	return temporal.NewApplicationError("CAPCHA_NOT_READY", activities.FailureNotReady)
}
func unsolvable() error {
	return temporal.NewNonRetryableApplicationError("ERROR_CAPTCHA_UNSOLVABLE", activities.FailureResubmit, nil)
}

func (s *SolveCaptchaSuite) expectSubmit(ids ...string) {
	for _, id := range ids {
		s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).
			Return(activities.SubmitResult{ProviderTaskID: id}, nil).Once()
	}
}

func (s *SolveCaptchaSuite) signalAt(d time.Duration, cb captchaflow.Callback) {
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(captchaflow.CallbackSignal, cb) }, d)
}

func (s *SolveCaptchaSuite) result() captchaflow.Result {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var r captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&r))
	return r
}

func (s *SolveCaptchaSuite) failureType() string {
	s.Require().True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr.Type()
}

func (s *SolveCaptchaSuite) TestCallbackBeforeTimer() {
	s.expectSubmit("111")
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-111", r.Code)
	s.Equal(captchaflow.ViaCallback, r.Via)
	s.Equal(1, r.Submits)
	s.Equal("111", r.ProviderTaskID)
	s.Equal(10*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
	s.env.AssertActivityNotCalled(s.T(), "Poll", mock.Anything, mock.Anything)
}

func (s *SolveCaptchaSuite) TestCallbackThatOvertookSubmitNeedsNoTimer() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).
		Run(func(mock.Arguments) {
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "FAST", Authenticated: true, RunID: testRunID, Submission: 1})
		}).
		Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("FAST", r.Code)
	s.Equal(time.Duration(0), r.ReceivedAt.Sub(r.SubmittedAt))
}

func (s *SolveCaptchaSuite) TestNoCallbackFallsBackToPolling() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).Return(activities.PollResult{}, notReady()).Times(2)
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).Return(activities.PollResult{Code: "POLLED"}, nil).Once()
	in := recaptcha()
	in.CallbackTimeoutSeconds = 30
	in.PollIntervalSeconds = 5
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("POLLED", r.Code)
	s.Equal(captchaflow.ViaPoll, r.Via)
	// Timer (30 s), then attempts at +0, +5, +10 s: retries spaced by the poll interval.
	s.Equal(40*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
}

func (s *SolveCaptchaSuite) TestCallbackDuringPollingWinsAndCancelsPoll() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{}, notReady())
	s.signalAt(137*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "LATE-CB", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("LATE-CB", r.Code)
	s.Equal(captchaflow.ViaCallback, r.Via)
	s.Equal(137*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
}

func (s *SolveCaptchaSuite) TestStaleAndDuplicateCallbacksAreIgnored() {
	s.expectSubmit("111")
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "999", Code: "FORGED", Authenticated: true, RunID: testRunID, Submission: 9})
	s.signalAt(6*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "REAL", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "DUPLICATE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("REAL", r.Code)
	s.Equal(10*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
}

func (s *SolveCaptchaSuite) TestUnsolvableIsResubmitted() {
	s.expectSubmit("111", "222")
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).Return(activities.PollResult{}, unsolvable()).Once()
	s.signalAt(200*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "STALE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(210*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "SECOND", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("SECOND", r.Code)
	s.Equal("222", r.ProviderTaskID)
	s.Equal(2, r.Submits)
	s.env.AssertNumberOfCalls(s.T(), "Submit", 2)
}

func (s *SolveCaptchaSuite) TestResubmitsExhausted() {
	s.expectSubmit("111", "222", "333")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{}, unsolvable())
	in := recaptcha()
	in.MaxSubmits = 3
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	s.Equal(captchaflow.FailureUnsolvable, s.failureType())
	s.env.AssertNumberOfCalls(s.T(), "Submit", 3)
}

func (s *SolveCaptchaSuite) TestDeadlineWhileAwaitingCallback() {
	s.expectSubmit("111")
	in := recaptcha()
	in.DeadlineSeconds = 60
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
	s.env.AssertActivityNotCalled(s.T(), "Poll", mock.Anything, mock.Anything)
}

func (s *SolveCaptchaSuite) TestDeadlineWhilePolling() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{}, notReady())
	in := recaptcha()
	in.DeadlineSeconds = 150
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
}

func (s *SolveCaptchaSuite) TestProviderConfigErrorFailsFast() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		temporal.NewNonRetryableApplicationError("ERROR_WRONG_USER_KEY", captchaflow.FailureProviderConfig, nil)).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal(captchaflow.FailureProviderConfig, s.failureType())
	s.env.AssertNumberOfCalls(s.T(), "Submit", 1)
}

func (s *SolveCaptchaSuite) TestTransientSubmitErrorIsRetried() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		temporal.NewApplicationError("ERROR_NO_SLOT_AVAILABLE", activities.FailureProviderTransient)).Times(2)
	s.expectSubmit("111")
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "OK", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal("OK", s.result().Code)
	s.Equal(1, s.result().Submits, "a retried in.php request is still one submission")
}

func (s *SolveCaptchaSuite) TestInvalidInputFailsBeforeSubmitting() {
	in := recaptcha()
	delete(in.Params, "pageurl")
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "params.pageurl")
	s.env.AssertActivityNotCalled(s.T(), "Submit", mock.Anything, mock.Anything)
}

func (s *SolveCaptchaSuite) TestDeliverFailingThenSucceeding() {
	s.expectSubmit("111")
	var bodies []json.RawMessage
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(
		temporal.NewApplicationError("notify_url answered 503", activities.FailureDeliveryRejected)).Once()
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		req := args.Get(1).(activities.DeliverRequest)
		s.Equal("https://downstream.example/hook", req.NotifyURL)
		bodies = append(bodies, req.Body)
	}).Return(nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("CODE", r.Code)
	s.Require().Len(bodies, 1)
	var body map[string]any
	s.Require().NoError(json.Unmarshal(bodies[0], &body))
	s.Equal("default-test-workflow-id", body["task_id"])
	s.Equal("CODE", body["code"])
	s.Equal("callback", body["via"])
}

func (s *SolveCaptchaSuite) TestDeliveryGivingUpKeepsResultInFailure() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(
		temporal.NewApplicationError("connection refused", activities.FailureDeliveryRejected))
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "KEEP-ME", Authenticated: true, RunID: testRunID, Submission: 1})
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	in.DeliveryTimeoutSeconds = 60 // ends before the token's 120 s: DeliveryFailed, not TokenExpired
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	s.Equal(captchaflow.FailureDeliveryFailed, s.failureType())
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(s.env.GetWorkflowError(), &appErr))
	var kept captchaflow.Result
	s.Require().NoError(appErr.Details(&kept))
	s.Equal("KEEP-ME", kept.Code)
}

func (s *SolveCaptchaSuite) TestUnauthenticatedCallbackIsConfirmedWithResPHP() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("111")).
		Return(activities.PollResult{Code: "FROM-RES-PHP"}, nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "FROM-CALLER", Authenticated: false})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("FROM-RES-PHP", r.Code, "an unauthenticated code is never used")
	s.Equal(captchaflow.ViaCallback, r.Via)
	s.env.AssertNumberOfCalls(s.T(), "Poll", 1)
}

func (s *SolveCaptchaSuite) TestForgedUnauthenticatedCallbackChangesNothing() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{}, notReady()).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "FORGED", Authenticated: false})
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "REAL", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("REAL", r.Code)
	s.Equal(20*time.Second, r.ReceivedAt.Sub(r.SubmittedAt))
}

func (s *SolveCaptchaSuite) TestStatusQueryFollowsPhases() {
	s.expectSubmit("111")
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{}, notReady())
	query := func() captchaflow.Status {
		v, err := s.env.QueryWorkflow(captchaflow.StatusQuery)
		s.Require().NoError(err)
		var st captchaflow.Status
		s.Require().NoError(v.Get(&st))
		return st
	}
	var seen []captchaflow.Status
	s.env.RegisterDelayedCallback(func() { seen = append(seen, query()) }, 10*time.Second)
	s.env.RegisterDelayedCallback(func() { seen = append(seen, query()) }, 130*time.Second)
	s.signalAt(140*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "C", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.result()

	s.Require().Len(seen, 2)
	s.Equal(captchaflow.PhaseAwaitingCallback, seen[0].Phase)
	s.Equal("111", seen[0].ProviderTaskID)
	s.Equal(1, seen[0].Submits)
	s.False(seen[0].SubmittedAt.IsZero())
	s.Equal(captchaflow.PhasePolling, seen[1].Phase)
	s.Equal(captchaflow.PhaseDone, query().Phase)
}

func (s *SolveCaptchaSuite) TestSubmitRetriedUntilDeadline() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		temporal.NewApplicationError("ERROR_NO_SLOT_AVAILABLE", activities.FailureProviderTransient))
	in := recaptcha()
	in.DeadlineSeconds = 90
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
}

// An answer in Submit's own result (CapSolver's image tasks) with a notify_url: no timer was ever started.
func (s *SolveCaptchaSuite) TestInstantAnswerIsDelivered() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).
		Return(activities.SubmitResult{ProviderTaskID: "111", Code: "INSTANT"}, nil).Once()
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(nil).Once()
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal("INSTANT", r.Code)
	s.Equal(captchaflow.ViaSubmit, r.Via)
}

// pollOf matches a Poll of the provider task id, whatever else it carries (its method, its submission's time).
func pollOf(id string) any {
	return mock.MatchedBy(func(r activities.PollRequest) bool { return r.ProviderTaskID == id })
}
