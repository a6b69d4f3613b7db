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

// outcomeKind is what one attempt came to; solve switches on it.
type outcomeKind int

const (
	outSolved   outcomeKind = iota // a code: res
	outResubmit                    // the provider gave up on the submission (or its answer was lost for good)
	outRefused                     // in.php refused it as unsolvable: counted, and the next one backs off
	outBalance                     // in.php answered zero balance and the task waited: submit again, uncounted
	outFailed                      // the task fails with err
	outGaveUp                      // its provider was unreachable past PROVIDER_GIVE_UP: submit elsewhere, uncounted
)

// outcome is one attempt's result as a value.
type outcome struct {
	kind   outcomeKind
	res    captchaflow.Result
	err    error
	reason string // why a resubmission, for the log and the Unsolvable message
}

func failed(err error) outcome { return outcome{kind: outFailed, err: err} }

func resubmit(kind outcomeKind, reason string) outcome { return outcome{kind: kind, reason: reason} }

// classify maps a failed provider activity to what the task does next.
func (s *solver) classify(err error) outcome {
	if retryBudgetSpent(err) {
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.Type() == activities.FailureResubmit {
		return resubmit(outResubmit, appErr.Message())
	}
	return failed(err)
}

// retryBudgetSpent tells whether a provider activity stopped because the task's deadline (its schedule-to-close)
// ran out: as a timeout, or as a retryable error with no time left to retry it.
func retryBudgetSpent(err error) bool {
	switch failureType(err) {
	case activities.FailureNotReady, activities.FailureProviderTransient, activities.FailureProviderZeroBalance,
		activities.FailureProviderUnavailable:
		return true
	}
	return isTimeout(err)
}

func isTimeout(err error) bool {
	_, ok := errors.AsType[*temporal.TimeoutError](err)
	return ok
}

// failureType is err's application error type, "" when it has none.
func failureType(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return appErr.Type()
	}
	return ""
}

func deadlineExceeded(seconds int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no result within deadline_seconds=%d", seconds), captchaflow.FailureDeadlineExceeded, nil)
}

// lostSubmitTypes are the Submit failures whose outcome is unknown (the request may have created a paid task):
// non-retryable, so the workflow waits for the submission's callback instead of the server retrying at once.
var lostSubmitTypes = []string{
	activities.FailureSubmitOutcomeUnknown,
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_START_TO_CLOSE.String(),
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_HEARTBEAT.String(),
}

// submitOutcomeUnknown tells whether a failed Submit may have created a provider task. A timeout is looked at
// first: the server hands it over with the previous attempt's failure as its cause, which says nothing of this one.
func submitOutcomeUnknown(err error) bool {
	if timeoutErr, ok := errors.AsType[*temporal.TimeoutError](err); ok {
		switch timeoutErr.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_HEARTBEAT:
			actErr, ok := errors.AsType[*temporal.ActivityError](err)
			return ok && actErr.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE
		}
		return false
	}
	return failureType(err) == activities.FailureSubmitOutcomeUnknown
}

// lostAt is the provider of a lost Submit and its give-up bound (0: the task has nowhere else to go).
func lostAt(err error) (provider string, giveUp time.Duration) {
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	if !ok || !appErr.HasDetails() {
		return "", 0
	}
	var d activities.LostDetails
	if appErr.Details(&d) != nil || d.Alternatives == 0 {
		return d.Provider, 0
	}
	return d.Provider, time.Duration(d.GiveUpSeconds) * time.Second
}

func gaveUp(err error) bool { return failureType(err) == activities.FailureProviderGaveUp }

func zeroBalance(err error) bool { return failureType(err) == activities.FailureProviderZeroBalance }

// balanceWait is the paced wait the zero-balance failure carries (a minute when it carries none).
func balanceWait(err error) time.Duration {
	var code string
	var d time.Duration
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.Details(&code, &d) == nil && d > 0 {
		return d
	}
	return time.Minute
}

// route is what a task learned about its providers; the Submit activity picks one from it (and records the pick).
type route struct {
	exclude []string // given up (unreachable past PROVIDER_GIVE_UP): never asked again by this task
	avoid   []string // found this task unsolvable: asked last
}

// accepted takes from the Submit result the provider, whether the task may give it up, and its poll spacing.
func (r *route) accepted(sub *submission, res activities.SubmitResult, in *captchaflow.Input) {
	sub.Provider = res.Provider
	if res.Alternatives > 0 {
		sub.giveUp = time.Duration(res.GiveUpSeconds) * time.Second
	}
	in.PollIntervalSeconds = max(in.PollIntervalSeconds, res.PollIntervalSeconds)
}

// unsolvable moves the next submission away from the provider that gave up on sub.
func (r *route) unsolvable(ctx workflow.Context, sub *submission) {
	if sub.Provider == "" {
		return
	}
	countProvider(ctx, MetricProviderUnsolvable, sub.Provider)
	if !slices.Contains(r.avoid, sub.Provider) {
		r.avoid = append(r.avoid, sub.Provider)
	}
}

// giveUp abandons sub: its provider has been unreachable past PROVIDER_GIVE_UP (at most one extra payment).
func (s *solver) giveUp(ctx workflow.Context, sub *submission) outcome {
	sub.State = subAbandoned
	if !slices.Contains(s.route.exclude, sub.Provider) {
		s.route.exclude = append(s.route.exclude, sub.Provider)
	}
	countProvider(ctx, MetricProviderGaveUp, sub.Provider)
	s.logger.Warn("provider unreachable past PROVIDER_GIVE_UP: submission abandoned, submitting elsewhere",
		"Provider", sub.Provider, "Submission", sub.N, "ProviderTaskID", sub.ProviderID)
	return outcome{kind: outGaveUp, reason: fmt.Sprintf("provider %s unreachable past PROVIDER_GIVE_UP", sub.Provider)}
}

// providerGivenUp asks the worker (a local activity: one recorded marker) whether provider is down past
// PROVIDER_GIVE_UP; a failure to ask counts as no.
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
