package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// signals are the channels a task listens on: the provider's callbacks, the untokened hints (fed by their
// Update's handler) and, under PROVIDER_THREADS, the semaphore's grants.
type signals struct {
	callbacks workflow.ReceiveChannel
	hints     workflow.Channel
	grants    workflow.ReceiveChannel
}

func newSignals(ctx workflow.Context) signals {
	return signals{
		callbacks: workflow.GetSignalChannel(ctx, captchaflow.CallbackSignal),
		hints:     workflow.NewBufferedChannel(ctx, captchaflow.UntokenedHintsPerSubmission),
	}
}

// handleHints registers the untokened hint's Update. Its validator runs before anything is recorded, so a hint
// the task cannot use (not waiting, budget spent) leaves no event in history; the handler counts the hint against
// the submission's budget and hands it to the wait.
func (s *solver) handleHints(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, captchaflow.UntokenedUpdate,
		func(ctx workflow.Context, hint captchaflow.UntokenedHint) error {
			if cur := s.table.current(); cur != nil {
				cur.untokened++
			}
			s.signals.hints.SendAsync(captchaflow.Callback{ProviderTaskID: hint.ProviderTaskID})
			return nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, hint captchaflow.UntokenedHint) error {
			return s.acceptsHint(hint)
		}})
}

// acceptsHint is the hint Update's validator (it must not change state): the current submission waits for a
// callback or polls, the hint names its provider task, and its budget of hints is not spent.
func (s *solver) acceptsHint(hint captchaflow.UntokenedHint) error {
	cur := s.table.current()
	switch {
	case cur == nil || (cur.State != subWaiting && cur.State != subPolling):
		return fmt.Errorf("the task is not waiting for a callback")
	case hint.ProviderTaskID != cur.ProviderID:
		return fmt.Errorf("the task waits for another provider task")
	case cur.untokened >= captchaflow.UntokenedHintsPerSubmission:
		return fmt.Errorf("this submission's %d untokened hints are spent", captchaflow.UntokenedHintsPerSubmission)
	}
	return nil
}

// wait is the task's one wait: until done holds it routes every callback and hint into the table (and every grant
// to the admission), whatever the task is waiting for. What is already buffered is routed before done is asked,
// so a callback that arrived with the event that woke the task counts at once. futures are what done looks at;
// each wakes the wait when it is ready.
func (s *solver) wait(ctx workflow.Context, done func() bool, futures func() []workflow.Future) {
	for {
		s.routeBuffered(ctx)
		if done() {
			return
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.signals.callbacks, func(c workflow.ReceiveChannel, _ bool) { s.receiveCallback(ctx, c) })
		sel.AddReceive(s.signals.hints, func(c workflow.ReceiveChannel, _ bool) { s.receiveHint(c) })
		if s.signals.grants != nil {
			sel.AddReceive(s.signals.grants, func(c workflow.ReceiveChannel, _ bool) { s.receiveGrant(ctx, c) })
		}
		var waitingFor []workflow.Future
		if futures != nil {
			waitingFor = futures()
		}
		for _, f := range append(waitingFor, s.keepSlot(ctx)...) {
			if f != nil {
				sel.AddFuture(f, func(workflow.Future) {})
			}
		}
		sel.Select(ctx)
	}
}

// waitFor waits for f, routing callbacks meanwhile.
func (s *solver) waitFor(ctx workflow.Context, f workflow.Future) {
	s.wait(ctx, f.IsReady, func() []workflow.Future { return []workflow.Future{f} })
}

// sleep waits d, routing callbacks meanwhile; a lost submission answering ends it early.
func (s *solver) sleep(ctx workflow.Context, d time.Duration) error {
	timerCtx, cancel := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(timerCtx, d)
	s.wait(ctx, func() bool { return timer.IsReady() || s.table.answered() != nil },
		func() []workflow.Future { return []workflow.Future{timer} })
	if !timer.IsReady() {
		cancel()
		return nil
	}
	return timer.Get(ctx, nil) // an error only when the workflow itself is cancelled
}

func (s *solver) routeBuffered(ctx workflow.Context) {
	for s.receiveCallback(ctx, s.signals.callbacks) {
	}
	for s.receiveHint(s.signals.hints) {
	}
	for s.signals.grants != nil && s.receiveGrant(ctx, s.signals.grants) {
	}
}

// receiveCallback routes one callback, if one is buffered. ReceiveAsync, not Receive: a corrupt payload is
// dropped by the SDK and must not block the wait.
func (s *solver) receiveCallback(ctx workflow.Context, c workflow.ReceiveChannel) bool {
	var cb captchaflow.Callback
	if !c.ReceiveAsync(&cb) {
		return false
	}
	if cb.ReceivedAt.IsZero() { // an ingress that does not stamp it: the signal's workflow task is the best we know
		cb.ReceivedAt = workflow.Now(ctx)
	}
	sub, r, why := s.table.route(cb)
	switch r {
	case routedStale:
		s.logger.Info("callback ignored: "+why, "CallbackProviderTaskID", cb.ProviderTaskID,
			"CallbackSubmission", cb.Submission, "Authenticated", cb.Authenticated)
	case routedLostAnswer:
		s.logger.Info("a submission whose in.php answer was lost called back", "ProviderTaskID", cb.ProviderTaskID,
			"Submission", sub.N)
	}
	return true
}

// receiveHint files one untokened hint (its Update's validator let it in), if one is buffered.
func (s *solver) receiveHint(c workflow.ReceiveChannel) bool {
	var cb captchaflow.Callback
	if !c.ReceiveAsync(&cb) {
		return false
	}
	if _, _, why := s.table.routeHint(cb); why != "" {
		s.logger.Info("untokened hint ignored: "+why, "CallbackProviderTaskID", cb.ProviderTaskID)
	}
	return true
}

func (s *solver) receiveGrant(ctx workflow.Context, c workflow.ReceiveChannel) bool {
	var g activities.SlotGrant
	if !c.ReceiveAsync(&g) {
		return false
	}
	run := workflow.GetInfo(ctx).WorkflowExecution.RunID
	// Grants name the run that asked: this one or, replayed after a reset, one of its reset chain.
	ours := func(r string) bool { return r != "" && (r == run || r == s.table.runID || r == s.admission.ticket.RunID) }
	if s.admission.onGrant(g, ours) {
		s.logger.Info("a grant for a request already given up: sent back", "Seq", g.Seq)
		s.releaseTo(ctx, g.Semaphore, g.Seq)
	}
	return true
}

// drainSignals consumes duplicate and late callbacks and grants so that completing is not held up by them; they
// change nothing.
func (s *solver) drainSignals(ctx workflow.Context) {
	var cb captchaflow.Callback
	for s.signals.callbacks.ReceiveAsync(&cb) {
		s.logger.Info("duplicate or late callback ignored", "CallbackProviderTaskID", cb.ProviderTaskID)
	}
	var g activities.SlotGrant
	for s.signals.grants != nil && s.signals.grants.ReceiveAsync(&g) {
	}
}
