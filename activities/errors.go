package activities

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/captchaai"
)

// Application error types the activities raise besides the contract's FailureProviderConfig and
// FailureProviderUnknown; the workflow and retry policies branch on them, callers never see them.
const (
	// FailureProviderTransient: a busy provider, network trouble or a 5xx; retried after the provider's documented
	// wait for its code (NextRetryDelay, see transientError), else with the retry policy's backoff.
	FailureProviderTransient = "ProviderTransient"
	// FailureResubmit: the provider gave up on this task (unsolvable); a new submission may succeed.
	FailureResubmit = "ProviderResubmit"
	// FailureNotReady: the task is still being solved; the poll's retry policy spaces the next look.
	FailureNotReady = "NotReady"
	// FailureWorkerConfig: the worker itself is misconfigured (e.g. no NOTIFY_SECRET). Retried, so that fixing the
	// configuration and restarting the worker lets the task carry on instead of losing it.
	FailureWorkerConfig = "WorkerConfig"
	// FailureDeliveryRejected: notify_url answered with a non-2xx status; retried.
	FailureDeliveryRejected = "DeliveryRejected"
	// FailureSubmitOutcomeUnknown: in.php failed after the request was written (timeout, connection reset or EOF,
	// an unreadable answer, a 5xx that is not the provider's own error word: a gateway lost its answer), so the provider may have created the task and charged for it. Retryable as far as the
	// activity is concerned (a workflow scheduled before this type existed retries it as the transient failure it
	// used to be); the workflow's Submit retry policy lists it as non-retryable and waits for the task's
	// authenticated callback instead of paying for a second submission at once.
	FailureSubmitOutcomeUnknown = "SubmitOutcomeUnknown"
	// FailureProviderZeroBalance: in.php answered ERROR_ZERO_BALANCE (2captcha: no money on the account; CaptchaAI:
	// no free thread). Retryable as far as the activity is concerned, after the documented 60 s ±20 % (a workflow
	// scheduled before this type existed retries it as the ProviderTransient failure it used to be); the workflow's
	// Submit retry policy lists it as non-retryable and waits in PhaseAwaitingBalance, where the status query and the
	// Web UI say why. Details: the code, then the paced wait (a time.Duration) the workflow sleeps before submitting
	// again.
	FailureProviderZeroBalance = "ProviderZeroBalance"
)

// codeZeroBalance is the in.php answer that pauses a task's submissions (FailureProviderZeroBalance).
const codeZeroBalance = "ERROR_ZERO_BALANCE"

// zeroBalanceError is the FailureProviderZeroBalance error for an in.php ERROR_ZERO_BALANCE answer: paced like a
// transient one (NextRetryDelay, for a retry policy that retries it), with the same wait in its details for the
// workflow that does not.
func zeroBalanceError(ctx context.Context, msg string) error {
	wait := pacedDelay(captchaai.RetryAfter(codeZeroBalance), timeLeft(ctx), rand.Float64())
	activity.GetLogger(ctx).Warn("in.php answered ERROR_ZERO_BALANCE: submissions wait until the balance is back", "Wait", wait)
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderZeroBalance, temporal.ApplicationErrorOptions{
		NextRetryDelay: wait,
		Details:        []any{codeZeroBalance, wait},
	})
}

// submitOutcomeUnknown is the FailureSubmitOutcomeUnknown error for an in.php request whose answer was lost. Its
// NextRetryDelay is 0: a retry (by an older workflow's policy) keeps that policy's backoff.
func submitOutcomeUnknown(ctx context.Context, err error) error {
	activity.GetLogger(ctx).Warn("in.php failed after the request was sent: the provider may have created the task", "Error", err)
	return temporal.NewApplicationError("in.php's answer was lost after the request was sent: "+err.Error(), FailureSubmitOutcomeUnknown)
}

// NonRetryableProviderErrors are the provider error types no retry policy should retry.
var NonRetryableProviderErrors = []string{captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, FailureResubmit}

// providerError turns a captchaai error into a typed Temporal application error. The client has already removed
// the API key from the message. A transient answer is paced by what it means: see transientError.
func providerError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *captchaai.Error
	code := ""
	if errors.As(err, &pe) {
		code = pe.Code
	}
	msg := err.Error()
	switch captchaai.ClassOf(err) {
	case captchaai.ClassNotReady:
		return temporal.NewApplicationError(msg, FailureNotReady, code)
	case captchaai.ClassResubmit:
		return temporal.NewNonRetryableApplicationError(msg, FailureResubmit, nil, code)
	case captchaai.ClassConfig:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderConfig, nil, code)
	case captchaai.ClassUnknown:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderUnknown, nil, code)
	default:
		return transientError(ctx, msg, code)
	}
}

// retryJitter spreads a paced wait by ±20 %, so tasks the provider turned away together do not all come back in the
// same second and get turned away again.
const retryJitter = 0.2

// deadlineMargin keeps a paced retry this far inside the activity's schedule-to-close deadline (the task's
// deadline). Temporal refuses a retry that would start after it and fails the activity at once; the margin absorbs
// the round trip to the server and a little clock skew between worker and server.
const deadlineMargin = time.Second

// transientError is a retryable FailureProviderTransient error with the provider's code in its details. When the code
// has a documented wait (captchaai.RetryAfter: 5 s for ERROR_NO_SLOT_AVAILABLE … 5 min for IP_BANNED) the error asks
// Temporal to retry after that wait, ±20 % (NextRetryDelay overrides the retry policy's interval for this one retry;
// the next answer decides the one after); any other transient failure keeps the policy's backoff (NextRetryDelay 0).
// The wait is cut to the time left before the task's deadline, so a busy answer never ends a task early: the
// workflow's retry policies run until the deadline, and Temporal would fail the activity at once if the wait went past
// it. No workflow change and no history event: the retry is the server's, as before.
func transientError(ctx context.Context, msg, code string) error {
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderTransient, temporal.ApplicationErrorOptions{
		NextRetryDelay: pacedDelay(captchaai.RetryAfter(code), timeLeft(ctx), rand.Float64()),
		Details:        []any{code},
	})
}

// pacedDelay is wait spread by ±retryJitter (u in [0, 1) picks where in the spread), cut to left - deadlineMargin when
// the deadline is nearer than that. A zero wait stays zero: the retry policy decides. With left <= deadlineMargin
// (or 0: no deadline known) the wait is not cut; nothing could run before the deadline anyway.
func pacedDelay(wait, left time.Duration, u float64) time.Duration {
	if wait <= 0 {
		return 0
	}
	d := time.Duration(float64(wait) * (1 - retryJitter + 2*retryJitter*u))
	if left > deadlineMargin && d > left-deadlineMargin {
		d = left - deadlineMargin
	}
	return d
}

// timeLeft is the time until the activity's schedule-to-close deadline, across all its attempts (Temporal's retry
// expiration: scheduled time + schedule-to-close timeout), or 0 when the activity has none.
func timeLeft(ctx context.Context) time.Duration {
	info := activity.GetInfo(ctx)
	if info.ScheduleToCloseTimeout <= 0 {
		return 0
	}
	return time.Until(info.ScheduledTime.Add(info.ScheduleToCloseTimeout))
}

// maxQuotedCode bounds how much of a refused answer goes into an error message.
const maxQuotedCode = 64

// solutionError refuses a res.php answer that arrived as a success but cannot be a solution:
//
//   - a provider status word (CAPCHA_NOT_READY, ERROR_CAPTCHA_UNSOLVABLE, any ERROR_…) is treated as what it says,
//     exactly as if res.php had answered it as an error: NotReady is polled again, unsolvable means resubmit, a
//     configuration code fails, an unknown ERROR_ word is ProviderUnknown;
//   - an answer longer than captchaflow.MaxCodeBytes is a non-retryable ProviderUnknown failure naming its size:
//     res.php keeps answering the same for the task, so retrying it would only poll until the deadline, and a code
//     that size is never stored in workflow history.
func solutionError(ctx context.Context, code string) error {
	if len(code) > captchaflow.MaxCodeBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("captchaai get: the answer is %d bytes, over the %d-byte bound on a code", len(code), captchaflow.MaxCodeBytes),
			captchaflow.FailureProviderUnknown, nil)
	}
	if !captchaai.IsStatusWord(code) {
		return nil
	}
	quoted := code
	if len(quoted) > maxQuotedCode { // a status word is ASCII: cutting bytes cuts no rune
		quoted = quoted[:maxQuotedCode] + "..."
	}
	return providerError(ctx, &captchaai.Error{Op: "get", Code: quoted, Class: captchaai.ClassifyCode(code),
		Err: errors.New("answered as a solution")})
}
