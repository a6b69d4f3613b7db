package workflows

import (
	"errors"
	"time"

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

// attempt makes one submission and waits for its result. Under PROVIDER_THREADS it first holds a slot, and gives
// it back on every way out. A lost submission answering meanwhile ends it with that answer.
func (s *solver) attempt(ctx workflow.Context) outcome {
	if o, ok := s.takeLostAnswer(ctx); ok {
		return o
	}
	release, o, ok := s.admit(ctx)
	if !ok {
		return o
	}
	defer release()
	if s.status.Waiting == "" {
		s.setPhase(ctx, captchaflow.PhaseSubmitting)
	} else {
		// A task waiting for the balance stays in PhaseAwaitingBalance until in.php accepts.
		s.balancePhase(ctx)
	}
	remaining := s.remaining(ctx)
	if remaining <= 0 {
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	sub := s.table.add(workflow.Now(ctx))
	submitCtx, cancelSubmit := workflow.WithCancel(ctx)
	f := workflow.ExecuteActivity(submitOptionsLostAware(submitCtx, remaining), acts.Submit, activities.SubmitRequest{
		Method: s.in.Method, Params: s.in.Params, RunID: s.table.runID, Submission: sub.N,
		Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid})
	s.wait(ctx, func() bool { return f.IsReady() || s.table.answered() != nil },
		func() []workflow.Future { return []workflow.Future{f} })
	if !f.IsReady() {
		// A lost submission answered while in.php was asked (or its retries waited): no more in.php requests.
		cancelSubmit()
		o, _ := s.takeLostAnswer(ctx)
		return o
	}
	var r activities.SubmitResult
	if err := f.Get(ctx, &r); err != nil {
		return s.submitFailed(ctx, sub, err)
	}
	return s.accepted(ctx, sub, r)
}

// submitFailed decides what a failed Submit means: its answer lost (wait for the submission's callback), a zero
// balance (pause), an in.php refusal (count it, back off), or a failure of the task.
func (s *solver) submitFailed(ctx workflow.Context, sub *submission, err error) outcome {
	sub.State = subRefused
	if submitOutcomeUnknown(err) {
		sub.Provider, sub.giveUp = lostAt(err)
		// in.php's answer was lost: the provider may be solving (and charging for) a task we have no ID for.
		if s.remaining(ctx) <= 0 {
			return failed(deadlineExceeded(s.in.DeadlineSeconds))
		}
		if v := workflow.GetVersion(ctx, changeAwaitLostSubmission, workflow.DefaultVersion, lostWaitVersion); v > 0 {
			return s.awaitLost(ctx, sub, err, v)
		}
	}
	if zeroBalance(err) && changed(ctx, changePauseOnZeroBalance) {
		return s.awaitBalance(ctx, err)
	}
	o := s.classify(err)
	if o.kind == outResubmit && changed(ctx, changeCountSubmitRefusals) {
		// The provider refused this in.php request as unsolvable: it was a submission all the same, and the next
		// one must wait (in.php would otherwise be asked again at once, for as long as it refuses).
		s.status.Submits++
		s.refusals++
		return resubmit(outRefused, "in.php refused the submission: "+o.reason)
	}
	return o
}

// accepted records the submission in.php accepted and waits for its code.
func (s *solver) accepted(ctx workflow.Context, sub *submission, r activities.SubmitResult) outcome {
	if s.callbackTimeoutUnset && r.CallbackTimeoutSeconds > 0 {
		// The worker's default for the method, from the activity's result: in history, so replay keeps it.
		s.in.CallbackTimeoutSeconds = r.CallbackTimeoutSeconds
	}
	s.status.Waiting, s.status.WaitingSince = "", time.Time{} // the balance is back
	s.status.ProviderTaskID = r.ProviderTaskID
	s.route.accepted(sub, r, &s.in)
	s.status.Provider = r.Provider
	s.status.Submits++
	s.status.SubmittedAt = workflow.Now(ctx)
	s.table.learnID(sub, r.ProviderTaskID, r.Named)
	if r.Code != "" {
		// The provider answered the submission with its code: nothing to wait for, nothing to poll.
		return s.solvedBy(sub, r.Code, captchaflow.ViaSubmit, workflow.Now(ctx))
	}
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	return s.await(ctx, sub)
}

// solvedBy is the result of sub's code, which arrived at captchaflow at receivedAt.
func (s *solver) solvedBy(sub *submission, code string, via captchaflow.Via, receivedAt time.Time) outcome {
	s.table.settle(sub)
	return outcome{kind: outSolved, res: captchaflow.Result{
		ProviderTaskID: sub.ProviderID,
		Provider:       sub.Provider,
		Code:           code,
		Via:            via,
		SubmittedAt:    sub.SubmittedAt,
		ReceivedAt:     receivedAt,
		Submits:        s.status.Submits,
	}}
}

// classify maps a failed provider activity to what the task does next.
func (s *solver) classify(err error) outcome {
	if retryBudgetSpent(err) {
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.FailureResubmit {
		return resubmit(outResubmit, appErr.Message())
	}
	return failed(err)
}

// retryBudgetSpent tells whether a provider activity stopped because its schedule-to-close timeout (the task's
// deadline) ran out: either as a timeout, or as a retryable error the retry policy had no time left to retry.
func retryBudgetSpent(err error) bool {
	if isTimeout(err) {
		return true
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.FailureNotReady, activities.FailureProviderTransient, activities.FailureProviderZeroBalance,
			activities.FailureProviderUnavailable:
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr)
}
