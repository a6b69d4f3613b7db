package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// await waits for an accepted submission's code: the callback while the timer runs, then the callback or the
// poll, whichever comes first; a lost submission of the same solve answering first wins too.
func (s *solver) await(ctx workflow.Context, sub *submission) outcome {
	w := &waiter{s: s, ctx: ctx, sub: sub}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	s.cancelTimer = cancelTimer
	s.wait(ctx, func() bool {
		// A callback can overtake in.php's answer; if it is already here, no timer is needed at all.
		if !w.step() && w.timer == nil {
			d := min(s.in.CallbackTimeout(), s.remaining(ctx))
			if d <= 0 { // a workflow task that ran past the deadline (after an outage): no timer can be set
				w.finish(failed(deadlineExceeded(s.in.DeadlineSeconds)))
				return true
			}
			w.timer = workflow.NewTimer(timerCtx, d)
		}
		return w.done != nil
	}, w.futures)
	if w.cancelPoll != nil {
		w.cancelPoll()
	}
	return *w.done
}

// waiter is the state of one submission's wait: the futures it looks at and, once known, its outcome.
type waiter struct {
	s          *solver
	ctx        workflow.Context
	sub        *submission
	timer      workflow.Future
	poll       workflow.Future
	cancelPoll workflow.CancelFunc
	confirm    workflow.Future
	// confirms counts the res.php confirmations this submission started (see maxConfirmsPerSubmission).
	confirms int
	done     *outcome
}

// futures are what the wait looks at: the timer until the poll starts, then the poll; a confirmation in flight.
func (w *waiter) futures() []workflow.Future {
	if w.poll != nil {
		return []workflow.Future{w.poll, w.confirm}
	}
	return []workflow.Future{w.timer, w.confirm}
}

// step acts on what is ready, in the order callbacks, timer or poll, confirmation; it tells whether the wait
// is over.
func (w *waiter) step() bool {
	for len(w.sub.inbox) > 0 && w.done == nil {
		cb := w.sub.inbox[0]
		w.sub.inbox = w.sub.inbox[1:]
		w.onCallback(cb)
	}
	if w.done == nil {
		if lost := w.s.table.answered(); lost != nil && lost != w.sub {
			w.finish(w.s.solvedBy(lost, lost.answer.Code, captchaflow.ViaCallback, lost.answer.ReceivedAt))
		}
	}
	if w.done == nil && w.poll == nil && w.timer != nil && w.timer.IsReady() {
		w.onTimer()
	}
	if w.done == nil && w.poll != nil && w.poll.IsReady() {
		w.onPoll()
	}
	if w.done == nil && w.confirm != nil && w.confirm.IsReady() {
		w.onConfirm()
	}
	return w.done != nil
}

func (w *waiter) finish(o outcome) {
	if o.kind == outResubmit {
		w.sub.State = subUnsolvable
		w.s.route.unsolvable(w.ctx, w.sub)
	}
	w.done = &o
}

// onCallback acts on a callback routed to this submission. An authenticated one carrying a solution is the
// result; a provider status word (2captcha-style pingbacks carry "the token, the answer, or an error code") is
// taken for what it says: unsolvable means resubmit, anything else is checked with res.php. An unauthenticated
// callback only triggers a res.php confirmation (nothing vouches for it, not even for "unsolvable"), and an empty
// or oversized code is logged and dropped.
func (w *waiter) onCallback(cb captchaflow.Callback) {
	logger := w.s.logger
	switch {
	case otherCandidate(w.sub, cb):
		w.onCandidateCallback(cb)
	case cb.Code == "" && cb.Authenticated:
		logger.Warn("ignoring callback without a code", "ProviderTaskID", cb.ProviderTaskID)
	case len(cb.Code) > captchaflow.MaxCodeBytes:
		logger.Warn("ignoring callback with a code over the bound on a code", "ProviderTaskID", cb.ProviderTaskID,
			"Bytes", len(cb.Code), "MaxCodeBytes", captchaflow.MaxCodeBytes, "Authenticated", cb.Authenticated)
	case cb.Authenticated && cb.ProviderTaskID != w.sub.ProviderID:
		// Signed for this submission but naming another provider task: nothing says whose code it is.
		w.confirmWithResPHP("a callback naming another provider task")
	case cb.Authenticated && callback.IsStatusWord(cb.Code):
		w.onStatusWord(strings.TrimSpace(cb.Code))
	case cb.Authenticated:
		w.finish(w.s.solvedBy(w.sub, cb.Code, captchaflow.ViaCallback, cb.ReceivedAt))
	default:
		// Nothing authenticates it (an untokened hint carries no code at all): res.php is asked instead.
		w.confirmWithResPHP("unauthenticated callback")
	}
}

// onCandidateCallback acts on a callback from a provider the submission's pingback URL was handed to that did not
// take it (a task it created after all): a solution is that provider's, for its task, so a verdict goes there;
// anything else says nothing about this submission's task.
func (w *waiter) onCandidateCallback(cb captchaflow.Callback) {
	if !lostSubmissionAnswer(cb) {
		w.s.logger.Warn("ignoring a callback of another candidate that is not a solution", "CallbackProvider", cb.Provider,
			"CallbackProviderTaskID", cb.ProviderTaskID, "Provider", w.sub.Provider)
		return
	}
	o := w.s.solvedBy(w.sub, cb.Code, captchaflow.ViaCallback, cb.ReceivedAt)
	o.res.Provider, o.res.ProviderTaskID = cb.Provider, cb.ProviderTaskID
	w.finish(o)
}

// onStatusWord handles an authenticated callback that carries a provider status word instead of a solution.
func (w *waiter) onStatusWord(code string) {
	if callback.ClassifyCode(code) == callback.ClassResubmit {
		w.s.logger.Info("the provider called back that it gave up; resubmitting", "ProviderTaskID", w.sub.ProviderID, "Code", code)
		w.finish(resubmit(outResubmit, "the callback said "+code))
		return
	}
	// An unknown ERROR_ word can be as long as a code may be; the log quotes its start.
	w.confirmWithResPHP(fmt.Sprintf("callback with the status word %.64s", code))
}

// confirmWithResPHP asks res.php for the submission's code, unless it is already being asked or this submission's
// confirmations are spent: a flood of hints then costs at most maxConfirmsPerSubmission res.php requests, and the
// timer and the poll still recover the result.
func (w *waiter) confirmWithResPHP(why string) {
	id := w.sub.ProviderID
	switch {
	case w.poll != nil || w.confirm != nil:
		w.s.logger.Info(why+" while res.php is being asked; ignored", "ProviderTaskID", id)
	case w.confirms >= maxConfirmsPerSubmission:
		w.s.logger.Warn(why+" after this submission's res.php confirmations were spent; ignored (the timer and poll still run)",
			"ProviderTaskID", id, "Confirmations", w.confirms)
	default:
		w.s.logger.Info(why+"; confirming with res.php", "ProviderTaskID", id)
		w.confirms++
		w.confirm = workflow.ExecuteActivity(confirmOptions(w.ctx, w.s.remaining(w.ctx)), acts.Poll,
			activities.PollRequest{ProviderTaskID: id, Provider: w.sub.Provider})
	}
}

// onTimer switches to polling when the callback timeout fires: the provider's pingback was lost, late or never
// sent, and the one Poll activity's retry policy now asks res.php every poll interval until the deadline.
func (w *waiter) onTimer() {
	if err := w.timer.Get(w.ctx, nil); err != nil {
		w.finish(failed(err)) // only cancellation of the workflow itself gets here
		return
	}
	if w.s.remaining(w.ctx) <= 0 {
		w.finish(failed(deadlineExceeded(w.s.in.DeadlineSeconds)))
		return
	}
	w.s.logger.Info("no callback in time; polling res.php", "ProviderTaskID", w.sub.ProviderID)
	w.sub.State = subPolling
	w.s.setPhaseSearchable(w.ctx, captchaflow.PhasePolling)
	countFallbackPoll(w.ctx)
	var pollCtx workflow.Context
	pollCtx, w.cancelPoll = workflow.WithCancel(w.ctx)
	w.poll = workflow.ExecuteActivity(pollOptions(pollCtx, w.s.in.PollInterval(), w.s.remaining(w.ctx)), acts.Poll,
		activities.PollRequest{ProviderTaskID: w.sub.ProviderID, Provider: w.sub.Provider, GiveUp: w.sub.giveUp > 0})
}

// onPoll ends the wait with the polled code, or with the poll's classified failure (deadline, resubmit, config).
func (w *waiter) onPoll() {
	var r activities.PollResult
	if err := w.poll.Get(w.ctx, &r); err != nil {
		if gaveUp(err) {
			w.finish(w.s.giveUp(w.ctx, w.sub))
			return
		}
		w.finish(w.s.classify(err))
		return
	}
	w.finish(w.s.solvedBy(w.sub, r.Code, captchaflow.ViaPoll, workflow.Now(w.ctx)))
}

// onConfirm settles a confirmation: res.php's code wins, "unsolvable" means resubmit, and any other failure means
// the hint was wrong or early, so the wait goes on (the timer or poll still runs).
func (w *waiter) onConfirm() {
	f := w.confirm
	w.confirm = nil
	var r activities.PollResult
	err := f.Get(w.ctx, &r)
	if err == nil {
		w.finish(w.s.solvedBy(w.sub, r.Code, captchaflow.ViaCallback, workflow.Now(w.ctx)))
		return
	}
	if o := w.s.classify(err); o.kind == outResubmit {
		w.finish(o)
		return
	}
	w.s.logger.Warn("callback not confirmed by res.php; still waiting", "ProviderTaskID", w.sub.ProviderID, "Error", err)
}
