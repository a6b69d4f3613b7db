package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// Metrics of provider thread admission; the semaphore's gauges carry the tag semaphore (its workflow ID).
const (
	MetricSlotsInUse     = "captchaflow_provider_slots_in_use"
	MetricSlotsPlan      = "captchaflow_provider_slots_plan"
	MetricSlotsQueue     = "captchaflow_provider_slots_queued"
	MetricSlotsReclaimed = "captchaflow_provider_slots_reclaimed_total"
	// MetricSlotsOverPlan: slots granted by a semaphore run since replaced, or taken from one that does not answer.
	MetricSlotsOverPlan = "captchaflow_provider_slots_over_plan_total"
	MetricSlotQueueWait = "captchaflow_slot_queue_wait_seconds"
)

// semaphoreMaxEvents: the semaphore continues as new past it (Temporal suggests 4 K events, warns at 10 K).
var semaphoreMaxEvents = 4000

// StartThreadsWorker serves taskQueue's semaphores on their own task queue when acts has a plan (stop is never nil).
func StartThreadsWorker(c client.Client, taskQueue string, o worker.Options, acts *activities.Activities) (stop func(), err error) {
	if activities.PlannedThreads(acts) == 0 {
		return func() {}, nil
	}
	w := worker.New(c, activities.ThreadsTaskQueue(taskQueue), o)
	w.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
	w.RegisterActivity(acts.CheckSlotHolders)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the provider-threads worker: %w", err)
	}
	return w.Stop, nil
}

func same(a activities.SlotRequest) func(activities.SlotRequest) bool {
	return func(b activities.SlotRequest) bool { return a.WorkflowID == b.WorkflowID && a.Seq == b.Seq }
}

// semaphore is one provider's slots: the holders, and the asks waiting in order.
type semaphore struct {
	id             string
	plan           int
	holders, queue []activities.SlotRequest
	inFlight       int // grants not yet known delivered, and a holder check running
	timer          workflow.Future
	wake           workflow.Channel
}

// ProviderThreads grants at most st.Plan slots, first come first served, by signal the moment one is free, and
// takes back every SlotReaskInterval the slots of holders whose task ended. Cancelling it does nothing.
func ProviderThreads(ctx workflow.Context, st activities.SemaphoreState) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	s := &semaphore{id: workflow.GetInfo(ctx).WorkflowExecution.ID, plan: st.Plan, holders: st.Holders, queue: st.Queue,
		wake: workflow.NewBufferedChannel(ctx, 1)}
	if err := workflow.SetQueryHandler(ctx, activities.SlotsQuery, func() (activities.SlotsView, error) {
		return activities.SlotsView{Plan: s.plan, InUse: len(s.holders), Queued: len(s.queue), Holders: slices.Clone(s.holders)}, nil
	}); err != nil {
		return err
	}
	acquire := workflow.GetSignalChannel(ctx, activities.AcquireSlotSignal)
	release := workflow.GetSignalChannel(ctx, activities.ReleaseSlotSignal)
	for {
		s.drain(ctx, acquire, release)
		for ; len(s.holders) < s.plan && len(s.queue) > 0; s.queue = s.queue[1:] {
			s.holders = append(s.holders, s.queue[0])
			s.send(ctx, s.queue[0])
		}
		m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"semaphore": s.id})
		m.Gauge(MetricSlotsInUse).Update(float64(len(s.holders)))
		m.Gauge(MetricSlotsPlan).Update(float64(s.plan))
		m.Gauge(MetricSlotsQueue).Update(float64(len(s.queue)))
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**provider threads:** %d/%d in use · %d queued", len(s.holders), s.plan, len(s.queue)))
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() >= semaphoreMaxEvents || info.GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return s.inFlight == 0 }); err != nil {
				return err
			}
			s.drain(ctx, acquire, release)
			return workflow.NewContinueAsNewError(ctx, activities.ThreadsWorkflowType,
				activities.SemaphoreState{Plan: s.plan, Holders: s.holders, Queue: s.queue})
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(acquire, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(release, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(s.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		if s.timer == nil && len(s.holders) > 0 {
			s.timer = workflow.NewTimer(ctx, activities.SlotReaskInterval)
		}
		if s.timer != nil {
			sel.AddFuture(s.timer, func(workflow.Future) { s.timer = nil; s.reclaim(ctx) })
		}
		sel.Select(ctx)
	}
}

// drain takes every ask and release; a granted slot it does not know was granted over the plan by another run.
func (s *semaphore) drain(ctx workflow.Context, acquire, release workflow.ReceiveChannel) {
	for {
		var r activities.SlotRequest
		switch {
		case acquire.ReceiveAsync(&r):
			s.onAcquire(ctx, r)
		case release.ReceiveAsync(&r):
			if !s.drop(r) && !r.Ungranted {
				workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
			}
		default:
			return
		}
	}
}

// onAcquire queues an ask (the latest ask's plan is the plan); one held is granted again to the run asking (its
// grant was lost, or a reset run asks), one queued keeps its place.
func (s *semaphore) onAcquire(ctx workflow.Context, r activities.SlotRequest) {
	if r.Plan > 0 {
		s.plan, r.Plan = r.Plan, 0
	}
	if i := slices.IndexFunc(s.holders, same(r)); i >= 0 {
		s.holders[i] = r
		s.send(ctx, r)
	} else if i := slices.IndexFunc(s.queue, same(r)); i >= 0 {
		s.queue[i] = r
	} else {
		s.queue = append(s.queue, r)
	}
}

// drop frees r's slot or takes it out of the queue, and tells whether it knew r.
func (s *semaphore) drop(r activities.SlotRequest) bool {
	n := len(s.holders) + len(s.queue)
	s.holders, s.queue = slices.DeleteFunc(s.holders, same(r)), slices.DeleteFunc(s.queue, same(r))
	return len(s.holders)+len(s.queue) < n
}

// send signals the grant; one that cannot be delivered (the run is gone) frees the slot.
func (s *semaphore) send(ctx workflow.Context, r activities.SlotRequest) {
	f := workflow.SignalExternalWorkflow(ctx, r.WorkflowID, r.RunID, activities.SlotGrantedSignal,
		activities.SlotGrant{Seq: r.Seq, RunID: r.RunID, Semaphore: s.id})
	s.background(ctx, func(ctx workflow.Context) {
		if f.Get(ctx, nil) != nil && slices.Contains(s.holders, r) {
			s.drop(r)
		}
	})
}

// reclaim frees, in the background, the slots of holders whose task ended.
func (s *semaphore) reclaim(ctx workflow.Context) {
	s.background(ctx, func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
		var dead []activities.SlotRequest
		if err := workflow.ExecuteActivity(actx, acts.CheckSlotHolders, s.holders).Get(ctx, &dead); err != nil {
			workflow.GetLogger(ctx).Warn("could not check the slot holders; trying again later", "Error", err)
		}
		for _, h := range dead {
			s.drop(h)
		}
		workflow.GetMetricsHandler(ctx).Counter(MetricSlotsReclaimed).Inc(int64(len(dead)))
	})
}

// background runs f as a goroutine counted in inFlight, and wakes the main loop when it ends.
func (s *semaphore) background(ctx workflow.Context, f func(workflow.Context)) {
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		f(ctx)
		s.inFlight--
		s.wake.SendAsync(nil)
	})
}

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
	releasing   []workflow.Future     // releases not yet known delivered: the solve waits for them to end
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
		timer := workflow.NewTimer(timerCtx, d)
		err = s.await(ctx, func() bool { return a.granted || s.table.answered() != nil || timer.IsReady() })
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
	for dctx, _ := workflow.NewDisconnectedContext(ctx); all && len(a.releasing) > 0; a.releasing = a.releasing[1:] {
		if err := a.releasing[0].Get(dctx, nil); err != nil {
			s.logger.Warn("could not release the provider slot; the semaphore takes it back once the task delivers", "Error", err)
		}
	}
}

// releaseTo gives rel's slot back, from a disconnected context so that a cancelled task still releases.
func (s *solver) releaseTo(ctx workflow.Context, rel activities.SlotRelease) {
	if rel.Semaphore == "" {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	info := workflow.GetInfo(ctx).WorkflowExecution
	rel.WorkflowID, rel.RunID = info.ID, info.RunID
	s.admission.releasing = append(s.admission.releasing, workflow.ExecuteLocalActivity(localOptions(dctx, askPatience),
		activities.ReleaseSlotName, rel))
}
