package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// Never pay twice for one submission. The provider has no idempotency key, so an in.php request whose answer was
// lost — the worker was killed while it ran, or the request timed out or the connection broke after it was written
// — may have created a task that is being solved and will be paid for. Submitting again at once pays for a second
// one. But the pingback URL names this run and submission and carries their token: its callback is this
// submission's answer. A submission whose outcome is unknown therefore waits up to lost_answer_wait_seconds for that
// callback and only then submits again (counted against max_submits, bounded by the deadline); its answer is still
// taken if it comes later.

// lostSubmitTypes are the Submit failures whose outcome is unknown, as retry-policy error types: the activity's own
// FailureSubmitOutcomeUnknown, and a start-to-close or heartbeat timeout of an attempt (a killed or stuck worker).
// Listing them as non-retryable hands them to the workflow instead of to the server's immediate retry; a failure
// before the request was written (DNS, connection refused, TLS) stays a retried ProviderTransient.
var lostSubmitTypes = []string{
	activities.FailureSubmitOutcomeUnknown,
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_START_TO_CLOSE.String(),
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_HEARTBEAT.String(),
}

// Labels of MetricSubmitsLost's outcome: what became of a submission whose in.php answer was lost.
const (
	MetricSubmitsLost   = "captchaflow_submits_lost_total"
	LostOutcomeCallback = "callback"    // its authenticated callback came: the task is solved, nothing paid twice
	LostOutcomeResubmit = "resubmitted" // no callback within the callback timeout: submitted again (or max_submits spent)
	LostOutcomeDeadline = "deadline"    // the deadline came first
	// LostOutcomeUnsolvable: its own pingback said the provider gave up on it; submitted again at once.
	LostOutcomeUnsolvable = "unsolvable"
)

// submitOptionsLostAware are submitOptions whose retry policy does not retry a Submit failure of unknown outcome.
// The retry policy is not part of a command's identity on replay, so this needs no version: only what the workflow
// does with such a failure (awaitLostSubmission) is versioned, and a history recorded before it holds no such
// failure (the server retried them).
func submitOptionsLostAware(ctx workflow.Context, remaining time.Duration) workflow.Context {
	ctx = submitOptions(ctx, remaining)
	opts := workflow.GetActivityOptions(ctx)
	retry := *opts.RetryPolicy
	retry.NonRetryableErrorTypes = slices.Concat(retry.NonRetryableErrorTypes, lostSubmitTypes,
		[]string{activities.FailureProviderZeroBalance}) // the workflow pauses on it: see awaitBalance
	opts.RetryPolicy = &retry
	return workflow.WithActivityOptions(ctx, opts)
}

// submitOutcomeUnknown tells whether a failed Submit may have created a provider task: the activity said its
// in.php request failed after it was written, or an attempt timed out (start-to-close or heartbeat: the worker died
// or hung mid-request) and the retry policy handed it over as non-retryable. A timeout with any other retry state
// (the deadline's budget was spent, as in histories recorded before this change) is not: the deadline decides.
//
// The timeout is looked for first: the server hands a timed-out attempt over with the previous attempt's failure as
// its cause (say a busy in.php answer before the worker died), and that cause says nothing about this attempt.
func submitOutcomeUnknown(err error) bool {
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		switch timeoutErr.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_HEARTBEAT:
		default:
			return false
		}
		var actErr *temporal.ActivityError
		return errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE
	}
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.FailureSubmitOutcomeUnknown
}

// lostWaitVersion is changeAwaitLostSubmission's current version: 1 waited the callback timeout and dropped a
// later answer; 2 waits lost_answer_wait_seconds with the searchable phase set, and the submission stays open to
// its answer until the task ends.
const lostWaitVersion = 2

// awaitLost handles a Submit whose outcome is unknown. The request counts as a submission (it may have been paid
// for). Until the lost-answer wait ends (cut to the deadline) no other in.php request is made; the submission's
// authenticated callback, routed to it by the table whatever the task is doing, is its answer. Nothing else can be
// learned about it — there is no ID to poll res.php with — so status words and hints are dropped (an unsolvable
// lost task costs the wait, never a second payment while it may still be solving).
func (s *solver) awaitLost(ctx workflow.Context, sub *submission, cause error, version workflow.Version) outcome {
	previous := s.status.ProviderTaskID
	s.status.ProviderTaskID = ""
	s.status.Provider = sub.Provider
	s.status.Submits++
	s.status.SubmittedAt = sub.SubmittedAt
	wait := min(s.in.CallbackTimeout(), s.remaining(ctx))
	if version >= lostWaitVersion {
		wait = min(s.in.LostAnswerWait(), s.remaining(ctx))
		s.table.lostUnsolvableEndsWait = true
		s.status.Waiting, s.status.WaitingSince = "", time.Time{} // in.php answered something: no zero-balance pause
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	} else {
		s.setPhase(ctx, captchaflow.PhaseAwaitingCallback)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**phase:** %s · submission %d/%d: in.php's answer was lost, waiting for its callback",
		captchaflow.PhaseAwaitingCallback, s.status.Submits, s.in.MaxSubmits))
	s.logger.Warn("in.php's answer was lost; waiting for the submission's callback before submitting again",
		"Submits", s.status.Submits, "Wait", wait, "Error", cause)
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	s.cancelTimer = cancelTimer
	if s.table.lost(sub, previous) != nil {
		return s.lostAnswered(ctx, sub)
	}
	timer := workflow.NewTimer(timerCtx, wait)
	if s.waitLostAnswer(ctx, sub, previous, timer) {
		cancelTimer()
		return s.giveUp(ctx, sub)
	}
	if answered := s.table.answered(); answered != nil {
		cancelTimer() // this submission's answer, or an earlier lost one's that came meanwhile
		return s.lostAnswered(ctx, answered)
	}
	if sub.State == subUnsolvable {
		cancelTimer()
		countLostSubmit(ctx, LostOutcomeUnsolvable)
		return resubmit(outResubmit, "the submission whose in.php answer was lost called back unsolvable")
	}
	return s.lostWaitOver(ctx, sub, timer)
}

// waitLostAnswer waits for the lost submission's answer until timer fires. A submission whose task may go elsewhere
// (sub.giveUp set) asks every sub.giveUp whether its provider has been unreachable that long: then it tells the
// caller to give the submission up. Asked only on this path, so a task whose answers are not lost records nothing.
func (s *solver) waitLostAnswer(ctx workflow.Context, sub *submission, previous string, timer workflow.Future) (giveUp bool) {
	settled := func() bool {
		return s.table.takeLegacyLost(sub, previous) || s.table.answered() != nil || sub.State == subUnsolvable || timer.IsReady()
	}
	for {
		var check workflow.Future
		checkCtx, cancelCheck := workflow.WithCancel(ctx)
		if sub.giveUp > 0 {
			check = workflow.NewTimer(checkCtx, sub.giveUp)
		}
		s.wait(ctx, func() bool { return settled() || (check != nil && check.IsReady()) },
			func() []workflow.Future { return []workflow.Future{timer, check} })
		if check == nil || !check.IsReady() || settled() {
			cancelCheck()
			return false
		}
		if s.providerGivenUp(ctx, sub.Provider) && !settled() {
			return true // an answer that came while the worker was asked still wins
		}
	}
}

// providerGivenUp asks the worker (a local activity: one marker, recorded) whether provider is unreachable past
// PROVIDER_GIVE_UP. A failure to ask counts as no: the task keeps waiting for the lost answer.
func (s *solver) providerGivenUp(ctx workflow.Context, provider string) bool {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	f := workflow.ExecuteLocalActivity(lctx, acts.ProviderGivenUp, provider)
	s.waitFor(ctx, f)
	var down bool
	if err := f.Get(ctx, &down); err != nil {
		s.logger.Warn("could not ask whether the provider is given up; still waiting", "Provider", provider, "Error", err)
		return false
	}
	return down
}

// lostWaitOver ends a lost submission's wait without its answer: the task submits again (within max_submits) or,
// at the deadline, fails. The submission stays open: its answer is still taken if it comes.
func (s *solver) lostWaitOver(ctx workflow.Context, sub *submission, timer workflow.Future) outcome {
	sub.lostWaitOver = true
	if err := timer.Get(ctx, nil); err != nil {
		return failed(err) // only cancellation of the workflow itself gets here
	}
	if s.remaining(ctx) <= 0 {
		countLostSubmit(ctx, LostOutcomeDeadline)
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	countLostSubmit(ctx, LostOutcomeResubmit)
	return resubmit(outResubmit, "in.php's answer was lost and no callback came in time")
}

// lostAnswered takes a lost submission's answer as the result; its provider task ID becomes the Result's and, for
// CaptchaTaskId, the current one.
func (s *solver) lostAnswered(ctx workflow.Context, sub *submission) outcome {
	countLostSubmit(ctx, LostOutcomeCallback)
	s.status.ProviderTaskID = sub.ProviderID
	s.logger.Info("the lost submission called back", "ProviderTaskID", sub.ProviderID, "Submission", sub.N)
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	return s.solvedBy(sub, sub.answer.Code, captchaflow.ViaCallback, sub.answer.ReceivedAt)
}

// takeLostAnswer is the answer of a lost submission that came while the task was doing something else (queued,
// paused, backing off), before a new submission is made.
func (s *solver) takeLostAnswer(ctx workflow.Context) (outcome, bool) {
	sub := s.table.answered()
	if sub == nil {
		return outcome{}, false
	}
	countLostSubmit(ctx, LostOutcomeCallback)
	s.status.ProviderTaskID = sub.ProviderID
	s.logger.Info("a lost submission called back before the next one", "ProviderTaskID", sub.ProviderID, "Submission", sub.N)
	return s.solvedBy(sub, sub.answer.Code, captchaflow.ViaCallback, sub.answer.ReceivedAt), true
}

func countLostSubmit(ctx workflow.Context, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricSubmitsLost).Inc(1)
}
