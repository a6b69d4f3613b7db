package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/captchaflow/captchaflow/activities"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// acts is only used for its method values: workflow.ExecuteActivity takes the activity's name and signature
// from them; the worker runs the registered instance.
var acts *activities.Activities

// errResubmit marks a submission the provider gave up on; run decides whether another one is allowed.
var errResubmit = errors.New("provider gave up on the submission")

// SolveCaptcha submits one CAPTCHA task to the provider and returns its solution: from the provider's callback
// when it arrives in time, else from polling res.php, whichever comes first. Unsolvable answers are resubmitted up
// to max_submits; the result is delivered to notify_url if set.
func SolveCaptcha(ctx workflow.Context, in Input) (Result, error) {
	s := &solver{
		in:        in.WithDefaults(),
		status:    Status{Phase: PhaseSubmitting},
		callbacks: workflow.GetSignalChannel(ctx, CallbackSignal),
		logger:    workflow.GetLogger(ctx),
	}
	if err := s.setup(ctx); err != nil {
		return Result{}, err
	}
	res, err := s.run(ctx)
	s.drainCallbacks(ctx)
	return res, err
}

type solver struct {
	in        Input
	status    Status
	deadline  time.Time
	callbacks workflow.ReceiveChannel
	logger    log.Logger
	// cancelTimer stops the current submission's callback timer when more work follows, so that it does not fire
	// into a later phase.
	cancelTimer workflow.CancelFunc
}

func (s *solver) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, StatusQuery, func() (Status, error) { return s.status, nil })
}

func (s *solver) run(ctx workflow.Context) (Result, error) {
	// Validate iterates a map only to sort its keys and parses URLs; both are pure.
	//workflowcheck:ignore
	if err := s.in.Validate(); err != nil {
		return Result{}, s.fail(ctx, OutcomeInvalidInput,
			temporal.NewNonRetryableApplicationError("invalid input: "+err.Error(), ErrInvalidInput, nil))
	}
	s.deadline = workflow.Now(ctx).Add(s.in.deadline())
	s.setPhase(ctx, PhaseSubmitting, false)

	var res Result
	for {
		var err error
		res, err = s.attempt(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errResubmit) {
			return Result{}, s.fail(ctx, outcomeOf(err), err)
		}
		if s.status.Submits >= s.in.MaxSubmits {
			return Result{}, s.fail(ctx, OutcomeUnsolvable, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the provider could not solve the task in %d submission(s)", s.status.Submits),
				ErrUnsolvable, nil))
		}
		s.logger.Info("resubmitting", "ProviderTaskID", s.status.ProviderTaskID, "Submits", s.status.Submits)
		s.cancelTimer()
		countResubmit(ctx)
	}

	recordResultLatency(ctx, res.ReceivedAt.Sub(res.SubmittedAt))
	if s.in.NotifyURL != "" {
		s.cancelTimer()
		if err := s.deliver(ctx, res); err != nil {
			return Result{}, s.fail(ctx, OutcomeDeliveryFailed, err)
		}
	}
	s.setPhase(ctx, PhaseDone, false)
	countFinished(ctx, string(res.Via))
	return res, nil
}

// attempt makes one submission and waits for its result.
func (s *solver) attempt(ctx workflow.Context) (Result, error) {
	s.setPhase(ctx, PhaseSubmitting, false)
	remaining := s.remaining(ctx)
	if remaining <= 0 {
		return Result{}, deadlineExceeded(s.in.DeadlineSeconds)
	}
	var sub activities.SubmitResult
	err := workflow.ExecuteActivity(submitOptions(ctx, remaining), acts.Submit,
		activities.SubmitRequest{Method: s.in.Method, Params: s.in.Params}).Get(ctx, &sub)
	if err != nil {
		return Result{}, s.classify(err)
	}
	s.status.ProviderTaskID = sub.ProviderTaskID
	s.status.Submits++
	s.status.SubmittedAt = workflow.Now(ctx)
	s.setPhase(ctx, PhaseAwaitingCallback, true)

	code, via, err := s.await(ctx)
	if err != nil {
		return Result{}, err
	}
	return Result{
		ProviderTaskID: s.status.ProviderTaskID,
		Code:           code,
		Via:            via,
		SubmittedAt:    s.status.SubmittedAt,
		ReceivedAt:     workflow.Now(ctx),
		Submits:        s.status.Submits,
	}, nil
}

// await waits for the current submission's code: the callback while the timer runs, then the callback or the
// poll, whichever comes first.
func (s *solver) await(ctx workflow.Context) (code string, via Via, err error) {
	w := &waiter{solver: s, ctx: ctx}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	s.cancelTimer = cancelTimer

	// A callback can overtake in.php's answer; if it is already here, no timer is needed at all.
	var cb Callback
	for w.code == "" && w.err == nil && s.callbacks.ReceiveAsync(&cb) {
		w.onCallback(cb)
	}
	if w.code == "" && w.err == nil {
		w.timer = workflow.NewTimer(timerCtx, min(s.in.callbackTimeout(), s.remaining(ctx)))
	}
	for w.code == "" && w.err == nil {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.callbacks, func(c workflow.ReceiveChannel, _ bool) {
			var cb Callback
			// ReceiveAsync, not Receive: a corrupt payload is dropped by the SDK and must not block the loop.
			if c.ReceiveAsync(&cb) {
				w.onCallback(cb)
			}
		})
		if w.poll == nil {
			sel.AddFuture(w.timer, w.onTimer)
		} else {
			sel.AddFuture(w.poll, w.onPoll)
		}
		if w.confirm != nil {
			sel.AddFuture(w.confirm, w.onConfirm)
		}
		sel.Select(ctx)
	}
	if w.cancelPoll != nil {
		w.cancelPoll()
	}
	return w.code, w.via, w.err
}

// waiter is the state of one await.
type waiter struct {
	*solver
	ctx        workflow.Context
	timer      workflow.Future
	poll       workflow.Future
	cancelPoll workflow.CancelFunc
	confirm    workflow.Future

	code string
	via  Via
	err  error
}

func (w *waiter) onCallback(cb Callback) {
	switch {
	case cb.ProviderTaskID != w.status.ProviderTaskID:
		w.logger.Warn("ignoring callback for another provider task (stale or forged)",
			"CallbackProviderTaskID", cb.ProviderTaskID, "ProviderTaskID", w.status.ProviderTaskID)
	case cb.Code == "":
		w.logger.Warn("ignoring callback without a code", "ProviderTaskID", cb.ProviderTaskID)
	case cb.Authenticated:
		w.code, w.via = cb.Code, ViaCallback
	case w.poll != nil || w.confirm != nil:
		// Already asking res.php; the answer will come from there.
		w.logger.Info("unauthenticated callback while res.php is being asked; ignored", "ProviderTaskID", cb.ProviderTaskID)
	default:
		// Nothing authenticates this callback, so its code is never used: res.php is asked instead.
		w.logger.Info("unauthenticated callback; confirming with res.php", "ProviderTaskID", cb.ProviderTaskID)
		w.confirm = workflow.ExecuteActivity(confirmOptions(w.ctx, w.remaining(w.ctx)), acts.Poll,
			activities.PollRequest{ProviderTaskID: w.status.ProviderTaskID})
	}
}

func (w *waiter) onTimer(f workflow.Future) {
	if err := f.Get(w.ctx, nil); err != nil {
		w.err = err // only cancellation of the workflow itself gets here
		return
	}
	if w.remaining(w.ctx) <= 0 {
		w.err = deadlineExceeded(w.in.DeadlineSeconds)
		return
	}
	w.logger.Info("no callback in time; polling res.php", "ProviderTaskID", w.status.ProviderTaskID)
	w.setPhase(w.ctx, PhasePolling, true)
	countFallbackPoll(w.ctx)
	var pollCtx workflow.Context
	pollCtx, w.cancelPoll = workflow.WithCancel(w.ctx)
	w.poll = workflow.ExecuteActivity(pollOptions(pollCtx, w.in.pollInterval(), w.remaining(w.ctx)), acts.Poll,
		activities.PollRequest{ProviderTaskID: w.status.ProviderTaskID})
}

func (w *waiter) onPoll(f workflow.Future) {
	var r activities.PollResult
	if err := f.Get(w.ctx, &r); err != nil {
		w.err = w.classify(err)
		return
	}
	w.code, w.via = r.Code, ViaPoll
}

func (w *waiter) onConfirm(f workflow.Future) {
	w.confirm = nil
	var r activities.PollResult
	err := f.Get(w.ctx, &r)
	if err == nil {
		w.code, w.via = r.Code, ViaCallback
		return
	}
	if classified := w.classify(err); errors.Is(classified, errResubmit) {
		w.err = classified
		return
	}
	w.logger.Warn("unauthenticated callback not confirmed by res.php; still waiting",
		"ProviderTaskID", w.status.ProviderTaskID, "Error", err)
}

// classify maps a failed provider activity to what the workflow does next.
func (s *solver) classify(err error) error {
	if retryBudgetSpent(err) {
		return deadlineExceeded(s.in.DeadlineSeconds)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrResubmit {
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
		case activities.ErrNotReady, activities.ErrProviderTransient:
			return true
		}
	}
	return false
}

func (s *solver) deliver(ctx workflow.Context, res Result) error {
	s.setPhase(ctx, PhaseDelivering, true)
	// Marshalling a struct is deterministic; workflowcheck cannot see through encoding/json's type cache.
	//workflowcheck:ignore
	body, err := json.Marshal(notification{TaskID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: res})
	if err != nil {
		return err
	}
	err = workflow.ExecuteActivity(deliverOptions(ctx, s.in.deliveryTimeout()), acts.Deliver,
		activities.DeliverRequest{NotifyURL: s.in.NotifyURL, Body: body}).Get(ctx, nil)
	if err != nil {
		// The result stays in the failure's details (and in history): a failed delivery never loses it.
		return temporal.NewNonRetryableApplicationError("delivering the result to notify_url failed: "+err.Error(),
			ErrDeliveryFailed, err, res)
	}
	return nil
}

// notification is the body POSTed to notify_url.
type notification struct {
	TaskID string `json:"task_id"`
	Result
}

func (s *solver) remaining(ctx workflow.Context) time.Duration {
	return s.deadline.Sub(workflow.Now(ctx))
}

// setPhase records the phase for the status query and the Web UI. Upserting the CaptchaPhase search attribute
// costs one history event, so it happens only where an operator would search for it.
func (s *solver) setPhase(ctx workflow.Context, phase Phase, upsert bool) {
	s.status.Phase = phase
	details := fmt.Sprintf("**phase:** %s", phase)
	if s.status.ProviderTaskID != "" {
		details += fmt.Sprintf(" · provider task %s · submission %d/%d", s.status.ProviderTaskID, s.status.Submits, s.in.MaxSubmits)
	}
	workflow.SetCurrentDetails(ctx, details)
	if !upsert {
		return
	}
	err := workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(SearchAttrTaskID).ValueSet(s.status.ProviderTaskID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrPhase).ValueSet(string(phase)))
	if err != nil {
		s.logger.Warn("could not upsert search attributes", "Error", err)
	}
}

func (s *solver) fail(ctx workflow.Context, outcome string, err error) error {
	s.setPhase(ctx, PhaseFailed, false)
	countFinished(ctx, outcome)
	s.logger.Warn("task failed", "Outcome", outcome, "Error", err)
	return err
}

// drainCallbacks consumes duplicate and late callbacks so that completing is not held up by them; they change
// nothing.
func (s *solver) drainCallbacks(ctx workflow.Context) {
	var cb Callback
	for s.callbacks.ReceiveAsync(&cb) {
		s.logger.Info("duplicate or late callback ignored", "CallbackProviderTaskID", cb.ProviderTaskID)
	}
}

func deadlineExceeded(seconds int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no result within deadline_seconds=%d", seconds), ErrDeadlineExceeded, nil)
}

func isTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr)
}

func outcomeOf(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case ErrDeadlineExceeded:
			return OutcomeDeadlineExceeded
		case ErrUnsolvable:
			return OutcomeUnsolvable
		}
	}
	return OutcomeError
}
