package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/captchaai"
)

// await waits for the current submission's code: the callback while the timer runs, then the callback or the
// poll, whichever comes first.
func (s *solver) await(ctx workflow.Context) (code string, via captchaflow.Via, err error) {
	w := &waiter{s: s, ctx: ctx}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	s.cancelTimer = cancelTimer

	// A callback can overtake in.php's answer; if it is already here, no timer is needed at all.
	var cb captchaflow.Callback
	for w.code == "" && w.err == nil && s.callbacks.ReceiveAsync(&cb) {
		w.onCallback(cb)
	}
	if w.code == "" && w.err == nil {
		w.timer = workflow.NewTimer(timerCtx, min(s.in.CallbackTimeout(), s.remaining(ctx)))
	}
	for w.code == "" && w.err == nil {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.callbacks, func(c workflow.ReceiveChannel, _ bool) {
			var cb captchaflow.Callback
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

// waiter is the state of one await: the futures it selects on and, once known, the code or the error. It reads
// the solver (input, status, logger) through s and never changes it.
type waiter struct {
	s          *solver
	ctx        workflow.Context
	timer      workflow.Future
	poll       workflow.Future
	cancelPoll workflow.CancelFunc
	confirm    workflow.Future
	// confirms counts the res.php confirmations this submission started (see maxConfirmsPerSubmission).
	confirms int

	code string
	via  captchaflow.Via
	err  error
}

// onCallback takes an authenticated callback's code for the current submission when it is a solution. A provider
// status word (2captcha-style pingbacks carry "the token, the answer, or an error code") is taken for what it
// says: unsolvable means resubmit, anything else is checked with res.php. An unauthenticated callback only
// triggers a res.php confirmation (whatever its code: nothing vouches for it, not even for "unsolvable"), and
// anything stale, empty or oversized is logged and dropped.
func (w *waiter) onCallback(cb captchaflow.Callback) {
	switch {
	case cb.ProviderTaskID != w.s.status.ProviderTaskID:
		w.s.logger.Warn("ignoring callback for another provider task (stale or forged)",
			"CallbackProviderTaskID", cb.ProviderTaskID, "ProviderTaskID", w.s.status.ProviderTaskID)
	case cb.Code == "":
		w.s.logger.Warn("ignoring callback without a code", "ProviderTaskID", cb.ProviderTaskID)
	case len(cb.Code) > captchaflow.MaxCodeBytes && changed(w.ctx, changeIgnoreOversizedCallback):
		w.s.logger.Warn("ignoring callback with a code over the bound on a code", "ProviderTaskID", cb.ProviderTaskID,
			"Bytes", len(cb.Code), "MaxCodeBytes", captchaflow.MaxCodeBytes, "Authenticated", cb.Authenticated)
	case cb.Authenticated && captchaai.IsStatusWord(cb.Code) && changed(w.ctx, changeStatusWordCallback):
		w.onStatusWord(strings.TrimSpace(cb.Code))
	case cb.Authenticated:
		w.code, w.via = cb.Code, captchaflow.ViaCallback
	default:
		// Nothing authenticates this callback, so its code is never used: res.php is asked instead.
		w.confirmWithResPHP("unauthenticated callback")
	}
}

// onStatusWord handles an authenticated callback that carries a provider status word instead of a solution.
func (w *waiter) onStatusWord(code string) {
	if captchaai.ClassifyCode(code) == captchaai.ClassResubmit {
		w.s.logger.Info("the provider called back that it gave up; resubmitting", "ProviderTaskID", w.s.status.ProviderTaskID, "Code", code)
		w.err = fmt.Errorf("%w: the callback said %s", errResubmit, code)
		return
	}
	// An unknown ERROR_ word can be as long as a code may be; the log quotes its start.
	w.confirmWithResPHP(fmt.Sprintf("callback with the status word %.64s", code))
}

// confirmWithResPHP asks res.php for the current submission's code, unless it is already being asked or this
// submission's confirmations are spent: a flood of forged callbacks then costs at most maxConfirmsPerSubmission
// res.php requests, and the timer and the poll still recover the result.
func (w *waiter) confirmWithResPHP(why string) {
	id := w.s.status.ProviderTaskID
	switch {
	case w.poll != nil || w.confirm != nil:
		// Already asking res.php; the answer will come from there.
		w.s.logger.Info(why+" while res.php is being asked; ignored", "ProviderTaskID", id)
	case w.confirms >= maxConfirmsPerSubmission && changed(w.ctx, changeBoundConfirmations):
		w.s.logger.Warn(why+" after this submission's res.php confirmations were spent; ignored (the timer and poll still run)",
			"ProviderTaskID", id, "Confirmations", w.confirms)
	default:
		w.s.logger.Info(why+"; confirming with res.php", "ProviderTaskID", id)
		w.confirms++
		w.confirm = workflow.ExecuteActivity(confirmOptions(w.ctx, w.s.remaining(w.ctx)), acts.Poll,
			activities.PollRequest{ProviderTaskID: id})
	}
}

// onTimer switches to polling when the callback timeout fires: the provider's pingback was lost, late or never
// sent, and the one Poll activity's retry policy now asks res.php every poll interval until the deadline.
func (w *waiter) onTimer(f workflow.Future) {
	if err := f.Get(w.ctx, nil); err != nil {
		w.err = err // only cancellation of the workflow itself gets here
		return
	}
	if w.s.remaining(w.ctx) <= 0 {
		w.err = deadlineExceeded(w.s.in.DeadlineSeconds)
		return
	}
	w.s.logger.Info("no callback in time; polling res.php", "ProviderTaskID", w.s.status.ProviderTaskID)
	w.s.setPhaseSearchable(w.ctx, captchaflow.PhasePolling)
	countFallbackPoll(w.ctx)
	var pollCtx workflow.Context
	pollCtx, w.cancelPoll = workflow.WithCancel(w.ctx)
	w.poll = workflow.ExecuteActivity(pollOptions(pollCtx, w.s.in.PollInterval(), w.s.remaining(w.ctx)), acts.Poll,
		activities.PollRequest{ProviderTaskID: w.s.status.ProviderTaskID})
}

// onPoll ends the wait with the polled code, or with the poll's classified failure (deadline, resubmit, config).
func (w *waiter) onPoll(f workflow.Future) {
	var r activities.PollResult
	if err := f.Get(w.ctx, &r); err != nil {
		w.err = w.s.classify(err)
		return
	}
	w.code, w.via = r.Code, captchaflow.ViaPoll
}

// onConfirm settles an unauthenticated callback: res.php's code wins, "unsolvable" means resubmit, and any other
// failure means the hint was wrong or early, so the wait goes on (the timer or poll still runs).
func (w *waiter) onConfirm(f workflow.Future) {
	w.confirm = nil
	var r activities.PollResult
	err := f.Get(w.ctx, &r)
	if err == nil {
		w.code, w.via = r.Code, captchaflow.ViaCallback
		return
	}
	if classified := w.s.classify(err); errors.Is(classified, errResubmit) {
		w.err = classified
		return
	}
	w.s.logger.Warn("unauthenticated callback not confirmed by res.php; still waiting",
		"ProviderTaskID", w.s.status.ProviderTaskID, "Error", err)
}
