package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// lostAnswer is the Submit failure of an in.php request whose answer was lost after it was written.
func lostAnswer() error {
	return temporal.NewApplicationError("in.php's answer was lost after the request was sent: EOF", activities.FailureSubmitOutcomeUnknown)
}

// recaptchaSubmit matches the Submit of recaptcha()'s input, for any submission of any run.
func recaptchaSubmit() any {
	return mock.MatchedBy(func(r activities.SubmitRequest) bool {
		return r.Method == "userrecaptcha" && r.Params["googlekey"] == "6Le-key" && r.Params["pageurl"] == "https://example.com/login"
	})
}

// expectSubmitCalls expects one Submit per outcome (an ID, or an error), in order, and records when each ran.
func (s *SolveCaptchaSuite) expectSubmitCalls(outcomes ...any) *[]time.Time {
	var at []time.Time
	for _, o := range outcomes {
		call := s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).Once()
		switch o := o.(type) {
		case string:
			call.Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
				at = append(at, s.env.Now())
				return activities.SubmitResult{ProviderTaskID: o}, nil
			})
		case error:
			call.Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
				at = append(at, s.env.Now())
				return activities.SubmitResult{}, o
			})
		}
	}
	return &at
}

// #10 §6: in.php's answer is lost; the submission's authenticated callback carries a provider task ID the workflow
// never learned. It is this task's answer: completed with one submission, the callback's ID in the Result.
func (s *SolveCaptchaSuite) TestLostSubmitAnsweredByItsCallback() {
	s.expectSubmitCalls(lostAnswer())
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "7300000777", Code: "CODE-777", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-777", r.Code)
	s.Equal("7300000777", r.ProviderTaskID, "the result names the submission its code came from")
	s.Equal(captchaflow.ViaCallback, r.Via)
	s.Equal(1, r.Submits, "one in.php request, one payment")
}

// The callback can arrive before the Submit failure reaches the workflow (the answer stalled past the client's
// timeout while the provider solved): it is already in the channel and taken at once, without a timer.
func (s *SolveCaptchaSuite) TestLostSubmitCallbackAlreadyWaiting() {
	s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).Once().
		Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "55", Code: "CODE-55", Authenticated: true, RunID: testRunID, Submission: 1})
			return activities.SubmitResult{}, lostAnswer()
		})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("55", r.ProviderTaskID)
	s.Equal(1, r.Submits)
}

// No callback within callback_timeout: one resubmission, not before the timeout ran out; the result is the second
// submission's.
func (s *SolveCaptchaSuite) TestLostSubmitWithoutCallbackResubmitsAfterLostAnswerWait() {
	at := s.expectSubmitCalls(lostAnswer(), "222")
	s.signalAt(122*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	in := recaptcha()
	in.CallbackTimeoutSeconds = 5 // a caller's short callback timeout does not shorten the lost answer's wait
	in.LostAnswerWaitSeconds = 120
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("CODE-222", r.Code)
	s.Equal("222", r.ProviderTaskID)
	s.Equal(2, r.Submits)
	s.Require().Len(*at, 2)
	s.GreaterOrEqual((*at)[1].Sub(start), 120*time.Second, "the resubmission waits for the lost one's callback first")
	s.Less((*at)[1].Sub(start), 130*time.Second, "and no longer than lost_answer_wait_seconds")
}

// A connection refused (or DNS, TLS) is known not to have reached the provider: retried at once by the activity's
// policy (1 s), not counted, no wait for a callback.
func (s *SolveCaptchaSuite) TestKnownNotSentSubmitIsRetriedAtOnce() {
	refused := temporal.NewApplicationError("captchaai submit: dial tcp: connection refused (transient)", activities.FailureProviderTransient)
	at := s.expectSubmitCalls(refused, "111")
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("111", r.ProviderTaskID)
	s.Equal(1, r.Submits)
	s.Require().Len(*at, 2)
	s.Less((*at)[1].Sub(start), 5*time.Second, "retried at once")
}

// While the lost submission's answer is awaited, nothing that cannot be its solution is taken: an unauthenticated
// callback, the previous submission's (stale) callback, a status word, an oversized code.
func (s *SolveCaptchaSuite) TestLostSubmitTakesOnlyAnAuthenticatedSolution() {
	s.expectSubmitCalls("100", lostAnswer())
	s.env.OnActivity(acts.Poll, mock.Anything, pollOf("100")).Return(activities.PollResult{}, unsolvable()).Once()
	// Submission 1 (100) called unsolvable by the poll after the callback timeout; submission 2 lost at ~120 s.
	base := 130 * time.Second
	s.signalAt(base+1*time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "FORGED", Authenticated: false})
	s.signalAt(base+2*time.Second, captchaflow.Callback{ProviderTaskID: "100", Code: "STALE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(base+3*time.Second, captchaflow.Callback{ProviderTaskID: "902", Code: "CAPCHA_NOT_READY", Authenticated: true, RunID: testRunID, Submission: 2})
	s.signalAt(base+4*time.Second, captchaflow.Callback{ProviderTaskID: "903", Code: string(make([]byte, captchaflow.MaxCodeBytes+1)), Authenticated: true, RunID: testRunID, Submission: 2})
	s.signalAt(base+5*time.Second, captchaflow.Callback{ProviderTaskID: "904", Code: "CODE-904", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-904", r.Code)
	s.Equal("904", r.ProviderTaskID)
	s.Equal(2, r.Submits)
}

// The unknown-outcome submission counts against max_submits: with max_submits=1 and no callback the task fails
// Unsolvable after the callback timeout, having paid at most once.
func (s *SolveCaptchaSuite) TestLostSubmitCountsAgainstMaxSubmits() {
	s.expectSubmitCalls(lostAnswer())
	in := recaptcha()
	in.MaxSubmits = 1
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureUnsolvable, s.failureType())
}

// The wait for the lost submission's callback is cut to the deadline, which then fails the task.
func (s *SolveCaptchaSuite) TestLostSubmitWaitBoundedByDeadline() {
	s.expectSubmitCalls(lostAnswer())
	in := recaptcha()
	in.DeadlineSeconds = 60
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
	s.LessOrEqual(s.env.Now().Sub(start), 61*time.Second)
}

// Which Submit failures are of unknown outcome: the activity's own type, and a start-to-close or heartbeat timeout
// the retry policy handed over as non-retryable (the worker died mid-request). A timeout that spent the deadline's
// budget (as recorded before this change) and any other failure are not.
// activityFailure is a Submit failure as the workflow receives it from the server: an activity failure with the
// given retry state, caused by a timeout of the given type, caused in turn by the previous attempt's busy answer.
func activityFailure(retry enumspb.RetryState, timeout enumspb.TimeoutType, lastBeat ...*commonpb.Payloads) error {
	busy := &failurepb.Failure{Message: "captchaai submit: ERROR_NO_SLOT_AVAILABLE", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
		ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: activities.FailureProviderTransient}}}
	timedOut := &failurepb.Failure{Message: "activity timeout", Cause: busy, FailureInfo: &failurepb.Failure_TimeoutFailureInfo{
		TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: timeout}}}
	if len(lastBeat) > 0 { // the Submit's last heartbeat: where it went
		timedOut.GetTimeoutFailureInfo().LastHeartbeatDetails = lastBeat[0]
	}
	return temporal.GetDefaultFailureConverter().FailureToError(&failurepb.Failure{Message: "activity error", Cause: timedOut,
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityType: &commonpb.ActivityType{Name: "Submit"}, RetryState: retry}}})
}

func TestSubmitOutcomeUnknown(t *testing.T) {
	assert.True(t, submitOutcomeUnknown(lostAnswer()))
	assert.False(t, submitOutcomeUnknown(temporal.NewApplicationError("refused", activities.FailureProviderTransient)))
	assert.False(t, submitOutcomeUnknown(unsolvable()))
	assert.False(t, submitOutcomeUnknown(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)),
		"a timeout without the non-retryable retry state is the deadline's")
	assert.False(t, submitOutcomeUnknown(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)))
	assert.False(t, submitOutcomeUnknown(errors.New("other")))
	// A worker killed mid-request after an earlier attempt was answered busy: the heartbeat timeout reaches the
	// workflow (non-retryable by the lost-aware policy) with that busy answer as its cause. Found by the mixed
	// chaos batch, where it ended a task as DeadlineExceeded minutes before its deadline.
	assert.True(t, submitOutcomeUnknown(activityFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, enumspb.TIMEOUT_TYPE_HEARTBEAT)))
	assert.True(t, submitOutcomeUnknown(activityFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, enumspb.TIMEOUT_TYPE_START_TO_CLOSE)))
	assert.False(t, submitOutcomeUnknown(activityFailure(enumspb.RETRY_STATE_TIMEOUT, enumspb.TIMEOUT_TYPE_HEARTBEAT)),
		"the deadline's budget spent, as in histories recorded before this change")
	assert.Contains(t, lostSubmitTypes, "TemporalTimeout:StartToClose", "the server's spelling of a timeout type")
	assert.Contains(t, lostSubmitTypes, "TemporalTimeout:Heartbeat")
}

// The lost-aware Submit policy adds the unknown-outcome types without touching the shared provider list.
func (s *SolveCaptchaSuite) TestLostAwarePolicyLeavesSharedListAlone() {
	before := append([]string(nil), activities.NonRetryableProviderErrors...)
	s.expectSubmit("1")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "1", Code: "C", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.result()
	s.Equal(before, activities.NonRetryableProviderErrors)
}

// While the lost submission's answer is awaited, the status query shows it: awaiting its callback, counted, with no
// provider task ID yet (not the previous submission's).
func (s *SolveCaptchaSuite) TestLostSubmitStatusWhileWaiting() {
	s.expectSubmitCalls(lostAnswer())
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(captchaflow.StatusQuery)
		s.Require().NoError(err)
		var st captchaflow.Status
		s.Require().NoError(v.Get(&st))
		s.Equal(captchaflow.PhaseAwaitingCallback, st.Phase)
		s.Equal(1, st.Submits)
		s.Empty(st.ProviderTaskID)
	}, 10*time.Second)
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "31", Code: "CODE-31", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal("31", s.result().ProviderTaskID)
}

// The lost submission's own pingback URL says the provider gave up on it: nothing more can come, so the task submits
// again at once instead of waiting out lost_answer_wait_seconds.
func (s *SolveCaptchaSuite) TestLostSubmitCalledBackUnsolvableResubmitsAtOnce() {
	at := s.expectSubmitCalls(lostAnswer(), "222")
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true,
		RunID: "default-test-run-id", Submission: 1})
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true,
		RunID: "default-test-run-id", Submission: 2})
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-222", r.Code)
	s.Equal(2, r.Submits)
	s.Require().Len(*at, 2)
	s.Less((*at)[1].Sub(start), 25*time.Second, "resubmitted on the lost submission's unsolvable word, not after the wait")
}

// A callback of another run (its URL names that run) is never a lost submission's answer, even while one waits.
func (s *SolveCaptchaSuite) TestEarlierRunCallbackIsNotTheLostAnswer() {
	s.expectSubmitCalls(lostAnswer())
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "EARLIER", Authenticated: true,
		RunID: "an-earlier-run", Submission: 1})
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true,
		RunID: "default-test-run-id", Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-111", r.Code)
	s.Equal("111", r.ProviderTaskID)
}

// Issue 29, finding 1: CapMonster calls back with the getTaskResult body, which names no task. After a lost
// createTask answer, that authenticated solution is the lost submission's answer: one submission, nothing paid twice.
func (s *SolveCaptchaSuite) TestLostSubmitAnsweredByACallbackWithoutTaskID() {
	s.expectSubmitCalls(lostAnswer())
	s.signalAt(20*time.Second, captchaflow.Callback{Code: "CODE-CM", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("CODE-CM", r.Code)
	s.Equal(1, r.Submits, "one createTask, one payment")
}

// A waiting submission's tokened callback is its answer whatever task it names: a solution without a task ID is
// taken, and an unsolvable word without one resubmits, with no getTaskResult asked to confirm either.
func (s *SolveCaptchaSuite) TestTokenedCallbackWithoutTaskIDNeedsNoConfirmation() {
	polls := 0
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Maybe().
		Return(func(context.Context, activities.PollRequest) (activities.PollResult, error) {
			polls++
			return activities.PollResult{}, temporal.NewApplicationError("not ready", activities.FailureNotReady)
		})
	s.expectSubmit("100", "200")
	s.signalAt(10*time.Second, captchaflow.Callback{Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(40*time.Second, captchaflow.Callback{Code: "CODE-2", Authenticated: true, RunID: testRunID, Submission: 2})
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("CODE-2", r.Code)
	s.Equal("200", r.ProviderTaskID, "the submission's own task")
	s.Equal(2, r.Submits)
	s.Zero(polls, "nothing to confirm")
	s.Less(r.ReceivedAt.Sub(start), 41*time.Second, "taken when it came")
}
