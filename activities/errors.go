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

// Application error types the workflow and retry policies branch on (callers never see them).
const (
	FailureProviderTransient = "ProviderTransient" // busy, network or 5xx: retried after the code's wait, else backoff
	FailureResubmit          = "ProviderResubmit"  // the provider gave up on this task; a new submission may succeed
	FailureNotReady          = "NotReady"          // still being solved; the poll's retry policy spaces the next look
	FailureWorkerConfig      = "WorkerConfig"      // retried, so a fixed and restarted worker carries the task on
	FailureDeliveryRejected  = "DeliveryRejected"  // notify_url answered non-2xx; retried
	// FailureSubmitOutcomeUnknown: the answer was lost after the request was written, so a paid task may exist; the
	// workflow waits for its callback instead of paying twice. Details: LostDetails.
	FailureSubmitOutcomeUnknown = "SubmitOutcomeUnknown"
	// FailureProviderZeroBalance: ERROR_ZERO_BALANCE; the workflow waits in PhaseAwaitingBalance. Details: the code, the wait.
	FailureProviderZeroBalance = "ProviderZeroBalance"
	FailureProviderUnavailable = "ProviderUnavailable" // every provider's circuit is open; retried when one half-opens
	FailureProviderGaveUp      = "ProviderGaveUp"      // unreachable past PROVIDER_GIVE_UP. Details: the provider
)

// zeroBalanceError is paced like a transient error (for a policy that retries it), its wait also in its details.
func zeroBalanceError(ctx context.Context, msg string) error {
	wait := pacedDelay(callback.RetryAfter(callback.CodeZeroBalance), timeLeft(ctx), rand.Float64())
	activity.GetLogger(ctx).Warn("the provider answered ERROR_ZERO_BALANCE: submissions wait until the balance is back", "Wait", wait)
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderZeroBalance, temporal.ApplicationErrorOptions{
		NextRetryDelay: wait,
		Details:        []any{callback.CodeZeroBalance, wait},
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

// providerError types a client's error (already redacted) by its class for the retry policies.
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

const (
	retryJitter    = 0.2         // ±20 %: tasks turned away together do not all come back together
	deadlineMargin = time.Second // a retry past the deadline fails at once; room for the round trip and skew
)

// transientError is retried after the code's documented wait (0 keeps the policy's backoff), cut to the deadline.
func transientError(ctx context.Context, msg, code string) error {
	return temporal.NewApplicationErrorWithOptions(msg, FailureProviderTransient, temporal.ApplicationErrorOptions{
		NextRetryDelay: pacedDelay(callback.RetryAfter(code), timeLeft(ctx), rand.Float64()),
		Details:        []any{code},
	})
}

// pacedDelay is wait spread by ±retryJitter (u in [0, 1) picks where), cut to left - deadlineMargin; 0 stays 0.
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

// timeLeft is the time until the activity's schedule-to-close deadline across its attempts, or 0 with none.
func timeLeft(ctx context.Context) time.Duration {
	info := activity.GetInfo(ctx)
	if info.ScheduleToCloseTimeout <= 0 {
		return 0
	}
	return time.Until(info.ScheduledTime.Add(info.ScheduleToCloseTimeout))
}

const maxQuotedCode = 64 // of a refused answer, in an error message

// solutionError refuses a success answer that cannot be a solution: a status word means what it says; an oversized
// answer fails the poll (the provider keeps answering the same).
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

// Metrics of the provider layer; all but MetricProviderAnswers are tagged provider and exist with PROVIDERS_FILE only.
const (
	// MetricProviderAnswers counts answers by op and code: AnswerOK, a callback.KnownCode, AnswerNetwork, AnswerOther.
	MetricProviderAnswers     = "captchaflow_provider_answers_total"
	MetricProviderSubmissions = "captchaflow_provider_submissions_total"    // by provider and outcome (Submission*)
	MetricCircuitState        = "captchaflow_provider_circuit_state"        // 0 closed, 1 half-open, 2 open, at scrape
	MetricCircuitOpened       = "captchaflow_provider_circuit_opened_total" // by provider and reason (providers.Reason*)
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

// refusedSolutionCode is the code label of a "solution" solutionError refused: a documented word, else AnswerOther.
func refusedSolutionCode(solution string) string {
	if len(solution) <= captchaflow.MaxCodeBytes {
		if code, ok := callback.KnownCode(solution); ok {
			return code
		}
	}
	return AnswerOther
}

// countAnswer counts one answer of p, tagged with its name on a routed worker.
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
