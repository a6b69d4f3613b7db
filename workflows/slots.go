package workflows

import (
	"cmp"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// askPatience bounds the retries of one AcquireSlot or ReleaseSlot (Temporal unreachable from the worker).
const askPatience = time.Minute

// admission is the task's side of provider thread admission: before each submission it asks its provider's
// semaphore for a slot (phase queued) and holds it until that submission settles.
type admission struct {
	decided, on bool
	seq         int // the submission whose slot is asked or held
	granted     bool
	released    bool // the current request's slot was given back
	ticket      activities.SlotTicket
	// kept are the slots of submissions still open when their attempt ended (a lost answer whose wait is over).
	kept []keptSlot
	// releasing are the releases not yet known delivered: the solve waits for them before it ends.
	releasing []workflow.Future
}

type keptSlot struct {
	seq       int
	semaphore string
	sub       *submission
}

// stopHold marks the current request's slot given back.
func (a *admission) stopHold() { a.granted, a.released = false, true }

// onGrant takes a grant for the request being asked at the semaphore its ticket names, and tells whether it is this
// run's but for another request or semaphore (it is sent back).
func (a *admission) onGrant(g activities.SlotGrant, ours func(runID string) bool) (stray bool) {
	switch {
	case !ours(g.RunID):
		return false
	case g.Seq == a.seq && !a.released && g.Semaphore == a.ticket.Semaphore:
		a.granted = true
		return false
	}
	return true
}

// slotsInEffect decides once per task whether it takes slots, recorded by changeProviderThreads (versions.go):
// asked only when this worker has a plan or the task replays, so a task without one records nothing.
func (s *solver) slotsInEffect(ctx workflow.Context) bool {
	a := &s.admission
	if !a.decided {
		a.decided = true
		if s.settings.ProviderThreads > 0 || workflow.IsReplaying(ctx) {
			a.on = workflow.GetVersion(ctx, changeProviderThreads, workflow.DefaultVersion, 1) == 1
		}
	}
	return a.on
}

// admit holds a slot for the next submission. It returns the release to run on every way out of the attempt, or
// the outcome that ends the attempt before it submits.
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
		s.releaseTo(ctx, a.ticket.Semaphore, seq)
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

// acquireSlot asks for the slot and waits in PhaseQueued for the grant, asking again every SlotReaskInterval. A
// semaphore that cannot be asked, or whose workflow task keeps failing, is passed by (counted): it strands nobody.
func (s *solver) acquireSlot(ctx workflow.Context) error {
	a := &s.admission
	phase := captchaflow.PhaseQueued
	if s.status.Waiting != "" {
		phase = captchaflow.PhaseAwaitingBalance // a zero-balance pause goes on while the task queues
	}
	s.setPhaseSearchable(ctx, phase)
	queuedAt := workflow.Now(ctx)
	for !a.granted && s.table.answered() == nil {
		s.releaseKept(ctx, false)
		f := workflow.ExecuteLocalActivity(localOptions(ctx, s.remaining(ctx)), activities.AcquireSlotName, s.slotAsk(ctx))
		s.waitFor(ctx, f)
		err := f.Get(ctx, &a.ticket)
		switch {
		case err != nil && (temporal.IsCanceledError(err) || s.remaining(ctx) <= 0):
			return cmp.Or(ctx.Err(), deadlineExceeded(s.in.DeadlineSeconds))
		case err != nil || a.ticket.Stuck:
			s.logger.Warn("the provider-threads semaphore does not answer: submitting without a slot", "Error", err)
			workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
			return nil
		case a.ticket.Semaphore == "":
			return nil // the provider has no plan
		}
		if err := s.awaitGrant(ctx); err != nil {
			return err
		}
	}
	workflow.GetMetricsHandler(ctx).Timer(MetricSlotQueueWait).Record(workflow.Now(ctx).Sub(queuedAt))
	return nil
}

func (s *solver) slotAsk(ctx workflow.Context) activities.SlotAsk {
	info := workflow.GetInfo(ctx).WorkflowExecution
	ask := activities.SlotAsk{SlotRequest: activities.SlotRequest{WorkflowID: info.ID, RunID: info.RunID, Seq: s.admission.seq},
		Method: s.in.Method, Params: s.in.Params, Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid}
	if t := s.admission.ticket; t.Semaphore != "" {
		ask.Ticket = &t
	}
	return ask
}

// localOptions bound a slot's local activity by askPatience and the time left.
func localOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
		ScheduleToCloseTimeout: min(max(remaining, time.Second), askPatience),
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second}})
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
	_ = s.await(ctx, func() bool { return a.granted || timer.IsReady() || s.table.answered() != nil })
	if timer.IsReady() && !a.granted {
		return timer.Get(ctx, nil) // nil (ask again), or the task was cancelled
	}
	return nil
}

// releaseKept gives back the kept slots whose submissions settled, or all of them (the solve ended: it then waits
// until every release is delivered).
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
	for ; all && len(a.releasing) > 0; a.releasing = a.releasing[1:] {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		if err := a.releasing[0].Get(dctx, nil); err != nil {
			s.logger.Warn("could not release the provider slot; the semaphore reclaims it when the task ends", "Error", err)
		}
	}
}

// releaseTo gives the slot of request seq back to semaphore, from a disconnected context so that a cancelled task
// still releases.
func (s *solver) releaseTo(ctx workflow.Context, semaphore string, seq int) {
	if semaphore == "" {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	info := workflow.GetInfo(ctx).WorkflowExecution
	s.admission.releasing = append(s.admission.releasing, workflow.ExecuteLocalActivity(localOptions(dctx, askPatience),
		activities.ReleaseSlotName, activities.SlotRelease{Semaphore: semaphore, WorkflowID: info.ID, RunID: info.RunID, Seq: seq}))
}
