package workflows

import (
	"cmp"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// askPatience bounds the retries of one AcquireSlot or ReleaseSlot (Temporal unreachable from the worker).
const askPatience = time.Minute

// admission is the task's side: before each submission it asks its provider's semaphore for a slot (phase queued)
// and holds it until that submission settles.
type admission struct {
	decided, on bool
	seq         int // the submission whose slot is asked or held
	granted     bool
	ticket      activities.SlotTicket // Semaphore "" once the slot is given back
	kept        []keptSlot            // slots of submissions still open when their attempt ended (a lost answer)
	releasing   int                   // releases not yet tried: the solve waits for them to end
}

type keptSlot struct {
	rel activities.SlotRelease
	sub *submission
}

// onGrant takes a grant for the request being asked at its ticket's semaphore, and tells whether it is this run's
// but for another request or semaphore (it is sent back).
func (a *admission) onGrant(g activities.SlotGrant, ours func(runID string) bool) (stray bool) {
	if g.Seq == a.seq && g.Semaphore == a.ticket.Semaphore && ours(g.RunID) {
		a.granted = true
		return false
	}
	return ours(g.RunID)
}

// admit holds a slot for the next submission. It returns the release to run on every way out of the attempt, or
// the outcome that ends the attempt before it submits. Whether a task takes slots is decided once and recorded by
// changeProviderThreads (versions.go): asked only when this worker has a plan or the task replays.
func (s *solver) admit(ctx workflow.Context) (release func(), o outcome, ok bool) {
	a, none := &s.admission, func() {}
	if !a.decided && s.remaining(ctx) > 0 {
		a.decided = true
		if s.settings.ProviderThreads > 0 || workflow.IsReplaying(ctx) {
			a.on = workflow.GetVersion(ctx, changeProviderThreads, workflow.DefaultVersion, 1) == 1
		}
	}
	if s.remaining(ctx) <= 0 || !a.on {
		return none, outcome{}, true
	}
	a.seq++
	a.granted, a.ticket = false, activities.SlotTicket{}
	seq, made := a.seq, len(s.table.subs)
	release = func() {
		rel := activities.SlotRelease{Semaphore: a.ticket.Semaphore, Seq: seq, Ungranted: !a.granted}
		a.granted, a.ticket.Semaphore = false, ""
		if len(s.table.subs) > made && s.table.subs[made].open() {
			a.kept = append(a.kept, keptSlot{rel, s.table.subs[made]})
		} else {
			s.releaseTo(ctx, rel)
		}
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
	queuedAt, info := workflow.Now(ctx), workflow.GetInfo(ctx).WorkflowExecution
	for !a.granted && s.table.answered() == nil {
		s.releaseKept(ctx, false)
		ask := activities.SlotAsk{SlotRequest: activities.SlotRequest{WorkflowID: info.ID, RunID: info.RunID, Seq: a.seq},
			Method: s.in.Method, Params: s.in.Params, Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid}
		if t := a.ticket; t.Semaphore != "" {
			ask.Ticket = &t
		}
		f := workflow.ExecuteLocalActivity(localOptions(ctx, s.remaining(ctx)), activities.AcquireSlotName, ask)
		s.waitFor(ctx, f)
		err := f.Get(ctx, &a.ticket)
		d := min(s.remaining(ctx), activities.SlotReaskInterval)
		switch {
		case err != nil && (temporal.IsCanceledError(err) || d <= 0):
			return cmp.Or(ctx.Err(), deadlineExceeded(s.in.DeadlineSeconds))
		case err != nil || a.ticket.Stuck:
			s.logger.Warn("the provider-threads semaphore does not answer: submitting without a slot", "Error", err)
			workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
			return nil
		case a.ticket.Semaphore == "":
			return nil // the provider has no plan
		case d <= 0:
			return deadlineExceeded(s.in.DeadlineSeconds)
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		_, err = s.awaitTimer(ctx, workflow.NewTimer(timerCtx, d), func() bool { return a.granted || s.table.answered() != nil })
		if cancelTimer(); err != nil {
			return err // the task was cancelled
		}
	}
	workflow.GetMetricsHandler(ctx).Timer(MetricSlotQueueWait).Record(workflow.Now(ctx).Sub(queuedAt))
	return nil
}

// localOptions bound a slot's local activity by askPatience and the time left.
func localOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
		ScheduleToCloseTimeout: min(max(remaining, time.Second), askPatience),
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second}})
}

// releaseKept gives back the kept slots whose submissions settled, or all of them (the solve ended: it then waits
// until every release has been tried).
func (s *solver) releaseKept(ctx workflow.Context, all bool) {
	a := &s.admission
	a.kept = slices.DeleteFunc(a.kept, func(k keptSlot) bool {
		if all || !k.sub.open() {
			s.releaseTo(ctx, k.rel)
		}
		return all || !k.sub.open()
	})
	if dctx, _ := workflow.NewDisconnectedContext(ctx); all {
		_ = workflow.Await(dctx, func() bool { return a.releasing == 0 })
	}
}

// releaseTo gives rel's slot back, from a disconnected context so that a cancelled task still releases. A release
// that fails is tried again every SlotReaskInterval while the task runs, so no later step holds the slot.
func (s *solver) releaseTo(ctx workflow.Context, rel activities.SlotRelease) {
	if rel.Semaphore == "" {
		return
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	info := workflow.GetInfo(ctx).WorkflowExecution
	rel.WorkflowID, rel.RunID = info.ID, info.RunID
	send := func() workflow.Future {
		return workflow.ExecuteLocalActivity(localOptions(ctx, askPatience), activities.ReleaseSlotName, rel)
	}
	f := send()
	s.admission.releasing++
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, nil)
		for s.admission.releasing--; err != nil; err = send().Get(ctx, nil) {
			s.logger.Warn("could not release the provider slot; trying again", "Error", err)
			if workflow.Sleep(ctx, activities.SlotReaskInterval) != nil {
				return
			}
		}
	})
}
