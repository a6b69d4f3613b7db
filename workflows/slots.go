package workflows

import (
	"cmp"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// Slots of PROVIDER_THREADS, on the task's side: before each in.php request the task queues for a slot (phase
// queued) and holds it until that submission settles.

// acquireStartToClose bounds one AcquireSlot attempt (one signal-with-start).
const acquireStartToClose = 10 * time.Second

// admission is the task's side of PROVIDER_THREADS.
type admission struct {
	decided bool
	on      bool // the task takes slots
	seq     int  // the submission whose slot is asked or held
	granted bool
	ticket  activities.SlotTicket
	// released: the current request's slot was given back (its submission resolved)
	released bool
	// queuedAt is when the current request joined the queue (its place in line, kept across re-asks).
	queuedAt time.Time
	hold     hold
	// kept are the slots of submissions still open when their attempt ended (a lost answer whose wait is over):
	// each covers its submission, which may be solving, until it settles or the solve ends.
	kept []keptSlot
}

type keptSlot struct {
	seq       int
	semaphore string
	sub       *submission
}

// hold re-asserts a held slot every activities.SlotReaskInterval while its submission lasts, so a
// replaced semaphore learns its holders before it grants anything new.
type hold struct {
	timer  workflow.Future
	cancel workflow.CancelFunc
	assert workflow.Future
}

// keepSlot runs the hold's timer and re-assertions; the wait selects on what it returns.
func (s *solver) keepSlot(ctx workflow.Context) []workflow.Future {
	a := &s.admission
	if !a.on || !a.granted {
		return nil
	}
	h := &a.hold
	if h.assert != nil && h.assert.IsReady() {
		var ticket activities.SlotTicket
		if h.assert.Get(ctx, &ticket) == nil && ticket.Epoch != "" {
			a.ticket = ticket // the instance that knows the slot now
		}
		h.assert = nil
	}
	if h.timer != nil && h.timer.IsReady() {
		h.timer = nil
		h.assert = workflow.ExecuteActivity(acquireOptions(ctx, max(s.remaining(ctx), acquireStartToClose)),
			acts.AcquireSlot, s.slotRequest(ctx, true))
	}
	if h.timer == nil {
		var timerCtx workflow.Context
		timerCtx, h.cancel = workflow.WithCancel(ctx)
		h.timer = workflow.NewTimer(timerCtx, activities.SlotReaskInterval)
	}
	return []workflow.Future{h.timer, h.assert}
}

// stopHold ends the hold when its submission resolves: the slot is no longer this task's to re-assert.
func (a *admission) stopHold() {
	if a.hold.cancel != nil {
		a.hold.cancel()
	}
	a.hold = hold{}
	a.granted, a.released = false, true
}

// onGrant takes a grant for the request being asked, and tells whether the grant is this run's but for a request
// already given up (it is sent back, or the slot would stay counted until the task ends).
func (a *admission) onGrant(g activities.SlotGrant, ours func(runID string) bool) (stray bool) {
	switch {
	case g.RunID != "" && !ours(g.RunID):
		return false // another run's: not ours to answer
	case g.Seq == a.seq && !a.released:
		a.granted = true
		if g.Semaphore != "" {
			a.ticket.Semaphore = g.Semaphore
		}
		return false
	}
	return ours(g.RunID)
}

// slotsInEffect decides, once per task, whether it takes slots: the worker's PROVIDER_THREADS, recorded as the
// marker of changeProviderThreads (see versions.go). It is asked only when this worker has the setting or the task
// is being replayed (so the recorded answer is found whatever this worker's setting): a task that runs on a worker
// without the setting records nothing.
func (s *solver) slotsInEffect(ctx workflow.Context) bool {
	a := &s.admission
	if !a.decided {
		a.decided = true
		if s.settings.ProviderThreads > 0 || workflow.IsReplaying(ctx) {
			a.on = workflow.GetVersion(ctx, changeProviderThreads, workflow.DefaultVersion, 1) == 1
		}
		if a.on {
			s.signals.grants = workflow.GetSignalChannel(ctx, activities.SlotGrantedSignal)
		}
	}
	return a.on
}

// admit holds a slot for the next submission when PROVIDER_THREADS is in effect. It returns the release to run
// on every way out of the attempt, or the outcome that ends the attempt before it submits.
func (s *solver) admit(ctx workflow.Context) (release func(), o outcome, ok bool) {
	none := func() {}
	if s.remaining(ctx) <= 0 || !s.slotsInEffect(ctx) {
		return none, outcome{}, true
	}
	a := &s.admission
	a.seq++
	a.granted, a.released, a.ticket = false, false, activities.SlotTicket{}
	seq, made := a.seq, len(s.table.subs)
	release = func() {
		a.stopHold()
		if len(s.table.subs) > made && s.table.subs[made].open() {
			a.kept = append(a.kept, keptSlot{seq, a.ticket.Semaphore, s.table.subs[made]})
			return
		}
		s.releaseSlot(ctx, seq)
	}
	if err := s.acquireSlot(ctx); err != nil {
		release()
		return none, failed(err), false
	}
	if o, ok := s.takeLostAnswer(ctx); ok {
		release()
		return none, o, false
	}
	return release, outcome{}, true
}

// acquireSlot queues the submission for a slot and waits, in PhaseQueued, until the semaphore grants it, the
// deadline comes or a lost submission answers. Callbacks are routed meanwhile.
func (s *solver) acquireSlot(ctx workflow.Context) error {
	a := &s.admission
	phase := captchaflow.PhaseQueued
	if s.status.Waiting != "" {
		phase = captchaflow.PhaseAwaitingBalance // the pause goes on while the task queues: one phase, searched and queried
	}
	s.setPhaseSearchable(ctx, phase)
	queuedAt := workflow.Now(ctx)
	for !a.granted {
		if err := s.askSlot(ctx, queuedAt); err != nil {
			return err
		}
		if a.granted {
			break
		}
		if err := s.awaitGrant(ctx); err != nil {
			return err
		}
		if s.table.answered() != nil {
			return nil
		}
	}
	workflow.GetMetricsHandler(ctx).Timer(MetricSlotQueueWait).Record(workflow.Now(ctx).Sub(queuedAt))
	return nil
}

// askSlot runs AcquireSlot once (re-asking with the previous ticket, so nothing is sent while the semaphore that
// queued the request still runs).
func (s *solver) askSlot(ctx workflow.Context, queuedAt time.Time) error {
	a := &s.admission
	s.releaseKept(ctx, false)
	a.queuedAt = queuedAt
	f := workflow.ExecuteActivity(acquireOptions(ctx, s.remaining(ctx)), acts.AcquireSlot, s.slotRequest(ctx, false))
	s.waitFor(ctx, f)
	var ticket activities.SlotTicket
	if err := f.Get(ctx, &ticket); err != nil {
		if retryBudgetSpent(err) {
			return deadlineExceeded(s.in.DeadlineSeconds)
		}
		return err
	}
	if ticket.Epoch != "" || ticket.Granted {
		a.ticket, a.granted = ticket, a.granted || ticket.Granted
	}
	return nil
}

// slotRequest is the request for the current submission's slot: an ask, or (held) a holder's re-assertion.
func (s *solver) slotRequest(ctx workflow.Context, held bool) activities.SlotRequest {
	a := &s.admission
	info := workflow.GetInfo(ctx).WorkflowExecution
	req := activities.SlotRequest{WorkflowID: info.ID, RunID: info.RunID, Seq: a.seq, RequestedAt: a.queuedAt, Held: held}
	if a.ticket.Epoch != "" {
		ticket := a.ticket
		req.Ticket = &ticket
	}
	return req
}

// acquireOptions bound one AcquireSlot (one update or signal to the semaphore), retried until the deadline.
func acquireOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(acquireStartToClose, remaining),
		ScheduleToCloseTimeout: remaining,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
	})
}

// awaitGrant waits for the grant one re-ask interval at most, ending early when a lost submission answers.
func (s *solver) awaitGrant(ctx workflow.Context) error {
	a := &s.admission
	d := min(s.remaining(ctx), activities.SlotReaskInterval)
	if d <= 0 {
		return deadlineExceeded(s.in.DeadlineSeconds)
	}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimer(timerCtx, d)
	s.wait(ctx, func() bool {
		return a.granted || timer.IsReady() || s.table.answered() != nil
	}, func() []workflow.Future { return []workflow.Future{timer} })
	switch {
	case a.granted || !timer.IsReady():
		return nil
	case timer.Get(ctx, nil) != nil:
		return timer.Get(ctx, nil) // cancelled
	case s.remaining(ctx) <= 0:
		return deadlineExceeded(s.in.DeadlineSeconds)
	}
	return nil // re-ask
}

// releaseSlot gives the slot of submission seq back (or leaves the queue), on every way out of the attempt:
// result, unsolvable, failure, cancellation (a disconnected context, so a cancelled task still releases). A
// failure to signal is logged: the semaphore's reclaim check frees the slot once the task has ended.
func (s *solver) releaseSlot(ctx workflow.Context, seq int) {
	s.releaseTo(ctx, s.admission.ticket.Semaphore, seq)
}

// releaseKept gives back the kept slots whose submissions settled, or all of them (the solve ended).
func (s *solver) releaseKept(ctx workflow.Context, all bool) {
	a := &s.admission
	still := a.kept[:0]
	for _, k := range a.kept {
		if all || !k.sub.open() {
			s.releaseTo(ctx, k.semaphore, k.seq)
		} else {
			still = append(still, k)
		}
	}
	a.kept = still
}

// releaseTo signals the release of request seq to semaphore (empty: the task queue's).
func (s *solver) releaseTo(ctx workflow.Context, semaphore string, seq int) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	info := workflow.GetInfo(ctx)
	semaphore = cmp.Or(semaphore, activities.ThreadsWorkflowID(info.TaskQueueName))
	err := workflow.SignalExternalWorkflow(dctx, semaphore, "", activities.ReleaseSlotSignal,
		activities.SlotRelease{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, Seq: seq}).Get(dctx, nil)
	if err != nil {
		s.logger.Warn("could not release the provider slot; the semaphore reclaims it when the task ends", "Error", err)
	}
}
