package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/captchaai"
)

// Never pay twice for one submission (#10 §6). The provider has no idempotency key, so an in.php request whose
// answer was lost — the worker was killed while it ran, or the request timed out or the connection broke after it
// was written — may have created a task that is being solved and will be paid for. Submitting again at once (what
// the Submit retry policy used to do) pays for a second one. But the pingback URL names this workflow and carries
// its token: an authenticated callback with a provider task ID the workflow never learned can only come from such a
// submission, so it is this task's answer. A submission whose outcome is unknown therefore waits up to the callback
// timeout for that callback and only then submits again (counted against max_submits, bounded by the deadline).

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

// awaitLostSubmission handles a Submit whose outcome is unknown. The request counts as a submission (it may have
// been paid for). For up to the callback timeout (cut to the deadline) the workflow takes an authenticated callback
// whose code is a solution and whose provider task ID is not the previous submission's: that is the lost
// submission's answer, and its ID becomes the Result's provider_task_id (the submission the code came from). Nothing
// else can be learned about the lost submission — there is no ID to poll res.php with — so status words and
// unauthenticated callbacks are logged and dropped (an unsolvable lost task costs the wait, never a second payment
// while it may still be solving). Without a callback in time it returns errResubmit (run submits again, within
// max_submits) or, at the deadline, DeadlineExceeded.
func (s *solver) awaitLostSubmission(ctx workflow.Context, submittedAt time.Time, cause error) (captchaflow.Result, error) {
	previous := s.status.ProviderTaskID
	// The status query shows this submission: its provider task ID is unknown until its callback names it.
	s.status.ProviderTaskID = ""
	s.status.Submits++
	s.status.SubmittedAt = submittedAt
	s.setPhase(ctx, captchaflow.PhaseAwaitingCallback)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**phase:** %s · submission %d/%d: in.php's answer was lost, waiting for its callback",
		captchaflow.PhaseAwaitingCallback, s.status.Submits, s.in.MaxSubmits))
	wait := min(s.in.CallbackTimeout(), s.remaining(ctx))
	s.logger.Warn("in.php's answer was lost; waiting for the submission's callback before submitting again",
		"Submits", s.status.Submits, "Wait", wait, "Error", cause)

	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	s.cancelTimer = cancelTimer
	var got *captchaflow.Callback
	consider := func(cb captchaflow.Callback) {
		if lostSubmissionAnswer(cb, previous) {
			got = &cb
			return
		}
		s.logger.Info("callback ignored while in.php's answer is lost (not an authenticated solution from another submission)",
			"CallbackProviderTaskID", cb.ProviderTaskID, "Authenticated", cb.Authenticated, "PreviousProviderTaskID", previous)
	}
	var cb captchaflow.Callback
	for got == nil && s.callbacks.ReceiveAsync(&cb) {
		consider(cb)
	}
	if got == nil {
		timer := workflow.NewTimer(timerCtx, wait)
		var timerErr error
		fired := false
		for got == nil && !fired {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(s.callbacks, func(c workflow.ReceiveChannel, _ bool) {
				var cb captchaflow.Callback
				if c.ReceiveAsync(&cb) {
					consider(cb)
				}
			})
			sel.AddFuture(timer, func(f workflow.Future) { timerErr, fired = f.Get(ctx, nil), true })
			sel.Select(ctx)
		}
		if got == nil {
			switch {
			case timerErr != nil:
				return captchaflow.Result{}, timerErr // only cancellation of the workflow itself gets here
			case s.remaining(ctx) <= 0:
				countLostSubmit(ctx, LostOutcomeDeadline)
				return captchaflow.Result{}, deadlineExceeded(s.in.DeadlineSeconds)
			}
			countLostSubmit(ctx, LostOutcomeResubmit)
			return captchaflow.Result{}, fmt.Errorf("%w: in.php's answer was lost and no callback came within %s", errResubmit, wait)
		}
	}
	cancelTimer()
	countLostSubmit(ctx, LostOutcomeCallback)
	s.status.ProviderTaskID = got.ProviderTaskID
	s.logger.Info("the lost submission called back", "ProviderTaskID", got.ProviderTaskID, "Submits", s.status.Submits)
	// The provider task ID is known now: CaptchaTaskId finds the task by it, as for any other submission.
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	return captchaflow.Result{
		ProviderTaskID: got.ProviderTaskID,
		Code:           got.Code,
		Via:            captchaflow.ViaCallback,
		SubmittedAt:    submittedAt,
		ReceivedAt:     workflow.Now(ctx),
		Submits:        s.status.Submits,
	}, nil
}

// lostSubmissionAnswer tells whether cb can be the answer of a submission whose in.php answer was lost: it is
// authenticated (the sender knows this workflow's callback token, which only our pingback URLs carry), it names a
// provider task other than the previous submission (whose late callbacks are stale), and its code is a solution —
// not empty, not over captchaflow.MaxCodeBytes, not a provider status word.
func lostSubmissionAnswer(cb captchaflow.Callback, previous string) bool {
	return cb.Authenticated && cb.ProviderTaskID != "" && cb.ProviderTaskID != previous &&
		strings.TrimSpace(cb.Code) != "" && len(cb.Code) <= captchaflow.MaxCodeBytes && !captchaai.IsStatusWord(cb.Code)
}

func countLostSubmit(ctx workflow.Context, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricSubmitsLost).Inc(1)
}
