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
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
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
	// FailureSubmitOutcomeUnknown: a submission failed after the request was written (timeout, connection reset or
	// EOF, an unreadable answer, a 5xx that is not the provider's own error word: a gateway lost its answer), so the
	// provider may have created the task and charged for it. The workflow's Submit retry policy lists it as
	// non-retryable and waits for the task's authenticated callback instead of paying for a second submission at
	// once. Details: LostDetails.
	FailureSubmitOutcomeUnknown = "SubmitOutcomeUnknown"
	// FailureProviderZeroBalance: the provider answered ERROR_ZERO_BALANCE (2captcha: no money on the account;
	// CaptchaAI: no free thread). The workflow's Submit retry policy lists it as non-retryable and waits in
	// PhaseAwaitingBalance, where the status query and the Web UI say why. Details: the code, then the paced wait
	// (a time.Duration, the documented 60 s ±20 %) the workflow sleeps before submitting again.
	FailureProviderZeroBalance = "ProviderZeroBalance"
	// FailureProviderUnavailable: every provider the task may use has its circuit open; retried when the first one
	// half-opens (NextRetryDelay), so a task pinned to one provider waits for it.
	FailureProviderUnavailable = "ProviderUnavailable"
	// FailureProviderGaveUp: the submission's provider has been unreachable past PROVIDER_GIVE_UP and the task may
	// go elsewhere: the workflow abandons the submission and submits to another provider. Details: the provider.
	FailureProviderGaveUp = "ProviderGaveUp"
)

// codeZeroBalance is the answer that pauses a task's submissions (FailureProviderZeroBalance).
const codeZeroBalance = "ERROR_ZERO_BALANCE"

// zeroBalanceError is the FailureProviderZeroBalance error for an ERROR_ZERO_BALANCE answer: paced like a
// transient one (NextRetryDelay, for a retry policy that retries it), with the same wait in its details for the
// workflow that does not.
func zeroBalanceError(ctx context.Context, msg string) error {
	wait := pacedDelay(callback.RetryAfter(codeZeroBalance), timeLeft(ctx), rand.Float64())
	activity.GetLogger(ctx).Warn("the provider answered ERROR_ZERO_BALANCE: submissions wait until the balance is back", "Wait", wait)
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderZeroBalance, temporal.ApplicationErrorOptions{
		NextRetryDelay: wait,
		Details:        []any{codeZeroBalance, wait},
	})
}

// submitOutcomeUnknown is the FailureSubmitOutcomeUnknown error for a submission whose answer was lost.
func submitOutcomeUnknown(ctx context.Context, lost LostDetails, err error) error {
	activity.GetLogger(ctx).Warn("the provider failed after the request was sent: it may have created the task",
		"Provider", lost.Provider, "Error", err)
	return temporal.NewApplicationError("the provider's answer was lost after the request was sent: "+err.Error(),
		FailureSubmitOutcomeUnknown, lost)
}

// NonRetryableProviderErrors are the provider error types no retry policy should retry.
var NonRetryableProviderErrors = []string{captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, FailureResubmit}

// providerError turns a provider client's error into a typed Temporal application error. The client has already removed
// the API key from the message. A transient answer is paced by what it means: see transientError.
func providerError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	code, msg := codeOf(err), err.Error()
	switch providers.ClassOf(err) {
	case callback.ClassNotReady:
		return temporal.NewApplicationError(msg, FailureNotReady, code)
	case callback.ClassResubmit:
		return temporal.NewNonRetryableApplicationError(msg, FailureResubmit, nil, code)
	case callback.ClassConfig:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderConfig, nil, code)
	case callback.ClassUnknown:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderUnknown, nil, code)
	default:
		return transientError(ctx, msg, code)
	}
}

// codeOf is the provider code of a client's error, or "".
func codeOf(err error) string {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// retryJitter spreads a paced wait by ±20 %, so tasks the provider turned away together do not all come back in the
// same second and get turned away again.
const retryJitter = 0.2

// deadlineMargin keeps a paced retry this far inside the activity's schedule-to-close deadline (the task's
// deadline). Temporal refuses a retry that would start after it and fails the activity at once; the margin absorbs
// the round trip to the server and a little clock skew between worker and server.
const deadlineMargin = time.Second

// transientError is a retryable FailureProviderTransient error with the provider's code in its details. When the code
// has a documented wait (callback.RetryAfter: 5 s for ERROR_NO_SLOT_AVAILABLE … 5 min for IP_BANNED) the error asks
// Temporal to retry after that wait, ±20 % (NextRetryDelay overrides the retry policy's interval for this one retry;
// the next answer decides the one after); any other transient failure keeps the policy's backoff (NextRetryDelay 0).
// The wait is cut to the time left before the task's deadline, so a busy answer never ends a task early: the
// workflow's retry policies run until the deadline, and Temporal would fail the activity at once if the wait went past
// it. No workflow change and no history event: the retry is the server's, as before.
func transientError(ctx context.Context, msg, code string) error {
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderTransient, temporal.ApplicationErrorOptions{
		NextRetryDelay: pacedDelay(callback.RetryAfter(code), timeLeft(ctx), rand.Float64()),
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
			fmt.Sprintf("provider get: the answer is %d bytes, over the %d-byte bound on a code", len(code), captchaflow.MaxCodeBytes),
			captchaflow.FailureProviderUnknown, nil)
	}
	if !callback.IsStatusWord(code) {
		return nil
	}
	quoted := code
	if len(quoted) > maxQuotedCode { // a status word is ASCII: cutting bytes cuts no rune
		quoted = quoted[:maxQuotedCode] + "..."
	}
	return providerError(ctx, &providers.Error{Op: "get", Code: quoted, Class: callback.ClassifyCode(code),
		Err: errors.New("answered as a solution"), Provider: "provider"})
}

// Metrics of the provider layer. MetricProviderAnswers counts the provider's answers to Submit (op="submit"), Poll
// (op="get") and SendReport (op="report"), one per request, by code: AnswerOK, a documented provider code
// (callback.KnownCode), AnswerNetwork when no answer came (providers.IsTransportError), or AnswerOther (an HTTP
// error status, a malformed or invalid answer, an undocumented code): a fixed set whatever the provider answers.
// The others are tagged provider (a name from PROVIDERS_FILE) and exist on a worker with the file only.
const (
	MetricProviderAnswers = "captchaflow_provider_answers_total"
	// MetricProviderSubmissions counts Submit requests by provider and outcome (SubmissionAccepted, …).
	MetricProviderSubmissions = "captchaflow_provider_submissions_total"
	// MetricCircuitState is a provider's circuit: 0 closed, 1 half-open, 2 open. The worker computes it when /metrics
	// is scraped (a circuit half-opens by time alone), not the activities.
	MetricCircuitState = "captchaflow_provider_circuit_state"
	// MetricCircuitOpened counts circuits opening, by provider and reason (providers.Reason*).
	MetricCircuitOpened = "captchaflow_provider_circuit_opened_total"
)

// Label values of MetricProviderAnswers.
const (
	AnswerOpSubmit = "submit"
	AnswerOpGet    = "get"
	AnswerOpReport = "report"
	AnswerOK       = "OK"
	AnswerNetwork  = "network"
	AnswerOther    = "other"
)

// Outcome labels of MetricProviderSubmissions.
const (
	SubmissionAccepted = "accepted"
	SubmissionRefused  = "refused"   // a provider answer that created no task (busy, zero balance, unsolvable, key…)
	SubmissionLost     = "lost"      // the answer was lost after the request was written: maybe a task, maybe paid
	SubmissionSkipped  = "skipped"   // the circuit was open: nothing sent
	SubmissionAbandon  = "abandoned" // a submission given up at an unreachable provider (maybe paid for, result ignored)
)

// answerCode is the code label of a provider request that ended with err (nil: AnswerOK).
func answerCode(err error) string {
	if err == nil {
		return AnswerOK
	}
	if providers.IsTransportError(err) {
		return AnswerNetwork
	}
	if code, ok := callback.KnownCode(codeOf(err)); ok {
		return code
	}
	return AnswerOther
}

// refusedSolutionCode is the code label of a "solution" that solutionError refused: a documented status word
// answered as a solution counts as that code, anything else (an undocumented ERROR_ word, an oversized answer) as
// AnswerOther.
func refusedSolutionCode(solution string) string {
	if len(solution) <= captchaflow.MaxCodeBytes {
		if code, ok := callback.KnownCode(solution); ok {
			return code
		}
	}
	return AnswerOther
}

// countAnswer counts one answer of p, tagged with its name on a routed worker (its label set is fixed per worker).
func (a *Activities) countAnswer(ctx context.Context, p *providers.Provider, op, code string) {
	tags := map[string]string{"op": op, "code": code}
	if name := a.routedName(p); name != "" {
		tags["provider"] = name
	}
	activity.GetMetricsHandler(ctx).WithTags(tags).Counter(MetricProviderAnswers).Inc(1)
}

func (a *Activities) countSubmission(ctx context.Context, provider, outcome string) {
	if a.set().Routed {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": provider, "outcome": outcome}).
			Counter(MetricProviderSubmissions).Inc(1)
	}
}
