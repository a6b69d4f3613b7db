package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// acts is only used for its method values: workflow.ExecuteActivity takes the activity's name and signature
// from them; the worker runs the registered instance.
var acts *activities.Activities

// errResubmit marks a submission the provider gave up on; run decides whether another one is allowed.
var errResubmit = errors.New("provider gave up on the submission")

// errSubmitRefused marks (besides errResubmit) an in.php request the provider refused with an unsolvable-class
// code: it counted against max_submits, and the next one waits resubmitBackoff.
var errSubmitRefused = errors.New("in.php refused the submission")

// SolveCaptcha submits one CAPTCHA task to the provider and returns its solution: from the provider's callback
// when it arrives in time, else from polling res.php, whichever comes first. Unsolvable answers are resubmitted up
// to max_submits; the result is delivered to notify_url if set.
func SolveCaptcha(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
	return solveCaptcha(ctx, in, 0)
}

// solveCaptcha is SolveCaptcha on a worker whose PROVIDER_THREADS is threads (0: unset); Register binds it.
func solveCaptcha(ctx workflow.Context, in captchaflow.Input, threads int) (captchaflow.Result, error) {
	s := &solver{
		threads:   threads,
		in:        in.WithDefaults(),
		status:    captchaflow.Status{Phase: captchaflow.PhaseSubmitting},
		callbacks: workflow.GetSignalChannel(ctx, captchaflow.CallbackSignal),
		logger:    workflow.GetLogger(ctx),
		// Read before WithDefaults fills it in: such a task takes the worker's per-method default (see attempt).
		callbackTimeoutUnset: in.CallbackTimeoutSeconds == 0,
	}
	if err := s.setup(ctx); err != nil {
		return captchaflow.Result{}, err
	}
	res, err := s.run(ctx)
	s.drainCallbacks(ctx)
	s.drainGrants()
	return res, err
}

type solver struct {
	in     captchaflow.Input
	status captchaflow.Status
	// deadlineAt is when deadline_seconds runs out, fixed once the input is valid.
	deadlineAt time.Time
	callbacks  workflow.ReceiveChannel
	logger     log.Logger
	// cancelTimer stops the current submission's callback timer when more work follows, so that it does not fire
	// into a later phase. It is nil until a submission was accepted.
	cancelTimer workflow.CancelFunc
	// refusals counts in.php requests refused as unsolvable; it grows the backoff before the next one.
	refusals int

	// callbackTimeoutUnset tells whether the input left callback_timeout_seconds to the worker's per-method
	// default, which each accepted Submit hands back (SubmitResult.CallbackTimeoutSeconds).
	callbackTimeoutUnset bool
	// roundSubmits is status.Submits when the current solve began: max_submits bounds each solve (the first and
	// every refresh) on its own.
	roundSubmits int

	// threads is this worker's PROVIDER_THREADS (0: unset). slots tells whether this task takes slots (decided
	// once, see slotsInEffect), grants is where the semaphore's grants arrive, and slotSeq numbers the slots asked.
	threads      int
	slotsDecided bool
	slots        bool
	grants       workflow.ReceiveChannel
	slotSeq      int
}

// setup registers the status query before anything can block, so it answers from the first workflow task on.
func (s *solver) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, captchaflow.StatusQuery, func() (captchaflow.Status, error) { return s.statusNow(), nil })
}

// run validates the input, then submits and awaits until a submission yields a code (resubmitting while the
// provider answers unsolvable, up to max_submits), and delivers the code to notify_url when one is set. Every
// way out goes through fail or ends in PhaseDone, so the metrics and the status query always see the outcome.
func (s *solver) run(ctx workflow.Context) (captchaflow.Result, error) {
	// The workflow ID is one segment of the callback URL: an ID the ingress refuses would send every pingback to
	// a 400 and leave the task to polling, so it is refused here (a start from the CLI or another SDK is not
	// checked by anything else).
	if err := captchaflow.ValidateWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID); err != nil &&
		changed(ctx, changeRefuseInvalidWorkflowID) {
		return captchaflow.Result{}, s.fail(ctx, OutcomeInvalidInput,
			temporal.NewNonRetryableApplicationError("invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil))
	}
	// Validate iterates a map only to sort its keys and parses URLs; both are pure.
	//workflowcheck:ignore
	if err := s.in.Validate(); err != nil {
		return captchaflow.Result{}, s.fail(ctx, OutcomeInvalidInput,
			temporal.NewNonRetryableApplicationError("invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil))
	}
	s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
	s.setPhase(ctx, captchaflow.PhaseSubmitting)

	res, err := s.solve(ctx)
	if err != nil {
		return captchaflow.Result{}, s.fail(ctx, failureOutcome(err), err)
	}
	if s.in.NotifyURL != "" {
		s.cancelTimer()
		if res, err = s.deliverFresh(ctx, res); err != nil {
			return captchaflow.Result{}, s.fail(ctx, failureOutcome(err), err)
		}
	}
	s.setPhase(ctx, captchaflow.PhaseDone)
	countFinished(ctx, successOutcome(res.Via))
	return res, nil
}

// solve submits and awaits until a submission yields a code, resubmitting while the provider answers unsolvable,
// up to max_submits in.php requests for this solve. Its failures are ready to return (failureOutcome names them).
func (s *solver) solve(ctx workflow.Context) (captchaflow.Result, error) {
	s.roundSubmits = s.status.Submits
	for {
		res, err := s.attempt(ctx)
		if err == nil {
			res = s.received(ctx, res)
			recordResultLatency(ctx, res.ReceivedAt.Sub(res.SubmittedAt))
			return res, nil
		}
		if errors.Is(err, errAwaitedBalance) {
			continue // no submission was made: max_submits is untouched
		}
		if !errors.Is(err, errResubmit) {
			return captchaflow.Result{}, err
		}
		if n := s.status.Submits - s.roundSubmits; n >= s.in.MaxSubmits {
			return captchaflow.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the provider could not solve the task in %d submission(s); last: %v", n, err),
				captchaflow.FailureUnsolvable, nil)
		}
		s.logger.Info("resubmitting", "ProviderTaskID", s.status.ProviderTaskID, "Submits", s.status.Submits, "Reason", err)
		if s.cancelTimer != nil {
			s.cancelTimer()
		}
		countResubmit(ctx)
		if errors.Is(err, errSubmitRefused) {
			if err := s.backOff(ctx); err != nil {
				return captchaflow.Result{}, err
			}
		}
	}
}

// attempt makes one submission and waits for its result. With PROVIDER_THREADS in effect it first waits for a slot
// and gives it back on every way out.
func (s *solver) attempt(ctx workflow.Context) (captchaflow.Result, error) {
	if s.remaining(ctx) > 0 && s.slotsInEffect(ctx) {
		s.slotSeq++
		seq := s.slotSeq
		defer s.releaseSlot(ctx, seq)
		if err := s.acquireSlot(ctx, seq); err != nil {
			return captchaflow.Result{}, err
		}
	}
	if s.status.Waiting == "" {
		s.setPhase(ctx, captchaflow.PhaseSubmitting)
	} else {
		// A task waiting for the balance stays in PhaseAwaitingBalance until in.php accepts (no event: the
		// searchable phase was set when the pause began).
		s.setPhase(ctx, captchaflow.PhaseAwaitingBalance)
	}
	remaining := s.remaining(ctx)
	if remaining <= 0 {
		return captchaflow.Result{}, deadlineExceeded(s.in.DeadlineSeconds)
	}
	submittedAt := workflow.Now(ctx)
	var sub activities.SubmitResult
	err := workflow.ExecuteActivity(submitOptionsLostAware(ctx, remaining), acts.Submit,
		activities.SubmitRequest{Method: s.in.Method, Params: s.in.Params}).Get(ctx, &sub)
	if err != nil && submitOutcomeUnknown(err) {
		// in.php's answer was lost: the provider may be solving (and charging for) a task we have no ID for.
		if s.remaining(ctx) <= 0 {
			return captchaflow.Result{}, deadlineExceeded(s.in.DeadlineSeconds)
		}
		if changed(ctx, changeAwaitLostSubmission) {
			return s.awaitLostSubmission(ctx, submittedAt, err)
		}
	}
	if err != nil && zeroBalance(err) && changed(ctx, changePauseOnZeroBalance) {
		return captchaflow.Result{}, s.awaitBalance(ctx, err)
	}
	if err != nil {
		err = s.classify(err)
		if errors.Is(err, errResubmit) && changed(ctx, changeCountSubmitRefusals) {
			// The provider refused this in.php request as unsolvable: it was a submission all the same, and the
			// next one must wait (in.php would otherwise be asked again at once, for as long as it refuses).
			s.status.Submits++
			s.refusals++
			return captchaflow.Result{}, fmt.Errorf("%w: %w", errSubmitRefused, err)
		}
		return captchaflow.Result{}, err
	}
	if s.callbackTimeoutUnset && sub.CallbackTimeoutSeconds > 0 {
		// The worker's default for the method, from the activity's result: in history, so replay keeps it.
		s.in.CallbackTimeoutSeconds = sub.CallbackTimeoutSeconds
	}
	s.status.Waiting, s.status.WaitingSince = "", time.Time{} // the balance is back
	s.status.ProviderTaskID = sub.ProviderTaskID
	s.status.Submits++
	s.status.SubmittedAt = workflow.Now(ctx)
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)

	code, via, err := s.await(ctx)
	if err != nil {
		return captchaflow.Result{}, err
	}
	return captchaflow.Result{
		ProviderTaskID: s.status.ProviderTaskID,
		Code:           code,
		Via:            via,
		SubmittedAt:    s.status.SubmittedAt,
		ReceivedAt:     workflow.Now(ctx),
		Submits:        s.status.Submits,
	}, nil
}

// backOff waits before the in.php request that follows a refused one: resubmitBackoff(refusals), cut to the time
// left (attempt then reports the deadline instead of submitting).
func (s *solver) backOff(ctx workflow.Context) error {
	d := min(resubmitBackoff(s.refusals), s.remaining(ctx))
	if d <= 0 {
		return nil
	}
	s.logger.Info("in.php refused the submission; backing off", "Backoff", d, "Submits", s.status.Submits)
	return workflow.Sleep(ctx, d)
}

// classify maps a failed provider activity to what the workflow does next.
func (s *solver) classify(err error) error {
	if retryBudgetSpent(err) {
		return deadlineExceeded(s.in.DeadlineSeconds)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.FailureResubmit {
		return fmt.Errorf("%w: %s", errResubmit, appErr.Message())
	}
	return err
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
		case activities.FailureNotReady, activities.FailureProviderTransient, activities.FailureProviderZeroBalance:
			return true
		}
	}
	return false
}

func (s *solver) deliver(ctx workflow.Context, res captchaflow.Result) error {
	s.setPhaseSearchable(ctx, captchaflow.PhaseDelivering)
	// Marshalling a struct is deterministic; workflowcheck cannot see through encoding/json's type cache.
	//workflowcheck:ignore
	body, err := json.Marshal(notification{TaskID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: res})
	if err != nil {
		return err
	}
	opts := deliverOptions(ctx, s.in.DeliveryTimeout())
	// A token that expires is delivered only while it lives: the delivery's schedule-to-close ends just before
	// expires_at (the attempt in flight is cut off then too: its context's deadline is the schedule-to-close).
	// The change is asked only where its behaviour differs from the old (a token already dead, a delivery cut by
	// the expiry), so a task whose token is delivered in time records no version marker (no event, no action).
	untilExpiry := time.Duration(-1)
	if !res.ExpiresAt.IsZero() {
		untilExpiry = res.ExpiresAt.Sub(workflow.Now(ctx)) - deliveryExpiryMargin
		if untilExpiry <= 0 && changed(ctx, changeTokenExpiry) {
			return fmt.Errorf("%w before its delivery began", errTokenExpired)
		}
		if untilExpiry < s.in.DeliveryTimeout() {
			opts = expiringDeliverOptions(ctx, untilExpiry)
		} else {
			untilExpiry = -1 // delivery_timeout_seconds ends first: a failure is DeliveryFailed as before
		}
	}
	err = workflow.ExecuteActivity(opts, acts.Deliver,
		activities.DeliverRequest{NotifyURL: s.in.NotifyURL, Body: body, Refresh: res.Refreshes}).Get(ctx, nil)
	if err != nil {
		if temporal.IsCanceledError(err) && ctx.Err() != nil {
			// The workflow was cancelled while delivering: it ends cancelled (as it asked), and the result stays in
			// the cancellation's details, so it is not lost either.
			return temporal.NewCanceledError(res)
		}
		if untilExpiry > 0 && expiredWhileFailing(err) && changed(ctx, changeTokenExpiry) {
			return fmt.Errorf("%w while notify_url kept failing: %w", errTokenExpired, err)
		}
		// The result stays in the failure's details (and in history): a failed delivery never loses it.
		return temporal.NewNonRetryableApplicationError("delivering the result to notify_url failed: "+err.Error(),
			captchaflow.FailureDeliveryFailed, err, res)
	}
	return nil
}

// notification is the body POSTed to notify_url.
type notification struct {
	TaskID string `json:"task_id"`
	captchaflow.Result
}

func (s *solver) remaining(ctx workflow.Context) time.Duration {
	return s.deadlineAt.Sub(workflow.Now(ctx))
}

// setPhase records the phase for the status query and the Web UI's current details; it adds no history event.
func (s *solver) setPhase(ctx workflow.Context, phase captchaflow.Phase) {
	s.status.Phase = phase
	details := fmt.Sprintf("**phase:** %s", phase)
	if s.status.ProviderTaskID != "" {
		details += fmt.Sprintf(" · provider task %s · submission %d/%d", s.status.ProviderTaskID, s.status.Submits, s.in.MaxSubmits)
	}
	if s.status.Waiting != "" {
		details += fmt.Sprintf(" · **waiting:** %s, since %s", s.status.Waiting, s.status.WaitingSince.UTC().Format(time.RFC3339))
	}
	workflow.SetCurrentDetails(ctx, details)
}

// setPhaseSearchable is setPhase plus an upsert of CaptchaPhase and CaptchaTaskId. The upsert costs one history
// event, so it is used only for the phases an operator searches for (and the untokened route looks up by).
func (s *solver) setPhaseSearchable(ctx workflow.Context, phase captchaflow.Phase) {
	s.setPhase(ctx, phase)
	err := workflow.UpsertTypedSearchAttributes(ctx,
		captchaflow.TaskIDKey.ValueSet(s.status.ProviderTaskID),
		captchaflow.PhaseKey.ValueSet(string(phase)))
	if err != nil {
		s.logger.Warn("could not upsert search attributes", "Error", err)
	}
}

// fail records a terminal failure once (phase, outcome metric, log) and returns err for the workflow to return.
func (s *solver) fail(ctx workflow.Context, outcome string, err error) error {
	s.setPhase(ctx, captchaflow.PhaseFailed)
	countFinished(ctx, outcome)
	s.logger.Warn("task failed", "Outcome", outcome, "Error", err)
	return err
}

// drainCallbacks consumes duplicate and late callbacks so that completing is not held up by them; they change
// nothing.
func (s *solver) drainCallbacks(ctx workflow.Context) {
	var cb captchaflow.Callback
	for s.callbacks.ReceiveAsync(&cb) {
		s.logger.Info("duplicate or late callback ignored", "CallbackProviderTaskID", cb.ProviderTaskID)
	}
}

func deadlineExceeded(seconds int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no result within deadline_seconds=%d", seconds), captchaflow.FailureDeadlineExceeded, nil)
}

func isTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr)
}

// failureOutcome is the tasks-finished outcome for a failure that is not classified at its source.
func failureOutcome(err error) string {
	if temporal.IsCanceledError(err) {
		return OutcomeCancelled
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case captchaflow.FailureDeadlineExceeded:
			return OutcomeDeadlineExceeded
		case captchaflow.FailureUnsolvable:
			return OutcomeUnsolvable
		case captchaflow.FailureDeliveryFailed:
			return OutcomeDeliveryFailed
		case captchaflow.FailureTokenExpired:
			return OutcomeTokenExpired
		}
	}
	return OutcomeError
}
