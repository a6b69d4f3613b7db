package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// Metrics of provider thread admission, from the semaphore (tag semaphore: its workflow ID) and the tasks.
const (
	MetricSlotsInUse = "captchaflow_provider_slots_in_use"
	MetricSlotsPlan  = "captchaflow_provider_slots_plan"
	MetricSlotsQueue = "captchaflow_provider_slots_queued"
	// MetricSlotsReclaimed counts slots taken back from holders whose task ended without releasing them.
	MetricSlotsReclaimed = "captchaflow_provider_slots_reclaimed_total"
	// MetricSlotsOverPlan counts slots in use above the plan: holders a replaced semaphore learns of as they
	// re-assert, and tasks that waited past their patience and submitted without a grant.
	MetricSlotsOverPlan = "captchaflow_provider_slots_over_plan_total"
	// MetricSlotQueueWait is how long a submission waited in PhaseQueued for its slot.
	MetricSlotQueueWait = "captchaflow_slot_queue_wait_seconds"
)

// semaphoreMaxEvents: the semaphore continues as new past it (Temporal suggests 4 K events, warns at 10 K).
var semaphoreMaxEvents = 4000

func registerThreads(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
}

// RegisterThreads registers what a worker of activities.ThreadsTaskQueue runs.
func RegisterThreads(r worker.Registry, acts *activities.Activities) {
	registerThreads(r)
	r.RegisterActivity(acts.CheckSlotHolders)
}

// ProviderThreads is one provider's semaphore on one task queue: at most st.Plan slots held, first come first
// served, granted by signal the moment one is free. Holders whose task ended are reclaimed every
// SlotReaskInterval. Cancellation is ignored (terminate to replace it: tasks re-ask and holders re-assert).
func ProviderThreads(ctx workflow.Context, st activities.SemaphoreState) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	s := &semaphore{plan: st.Plan, holders: st.Holders, queued: map[slotKey]activities.SlotRequest{},
		id: workflow.GetInfo(ctx).WorkflowExecution.ID, wake: workflow.NewBufferedChannel(ctx, 1)}
	for _, r := range st.Queue {
		s.enqueue(r)
	}
	if err := workflow.SetQueryHandler(ctx, activities.SlotsQuery, func() (activities.SlotsView, error) {
		return activities.SlotsView{Plan: s.plan, InUse: len(s.holders), Queued: len(s.queued),
			Holders: append([]activities.SlotRequest{}, s.holders...)}, nil
	}); err != nil {
		return err
	}
	acquire := workflow.GetSignalChannel(ctx, activities.AcquireSlotSignal)
	release := workflow.GetSignalChannel(ctx, activities.ReleaseSlotSignal)
	for {
		s.drain(ctx, acquire, release)
		s.grant(ctx)
		s.report(ctx)
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() >= semaphoreMaxEvents || info.GetContinueAsNewSuggested() {
			return s.continueAsNew(ctx, acquire, release)
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

type slotKey struct {
	wid string
	seq int
}

func keyOf(r activities.SlotRequest) slotKey { return slotKey{r.WorkflowID, r.Seq} }

type semaphore struct {
	id      string
	plan    int
	holders []activities.SlotRequest
	// queue is the order of asks; queued holds those still waiting (a release or a grant removes them).
	queue    []slotKey
	queued   map[slotKey]activities.SlotRequest
	inFlight int // grants sent and not yet known delivered, and a holder check running
	timer    workflow.Future
	wake     workflow.Channel
}

func (s *semaphore) drain(ctx workflow.Context, acquire, release workflow.ReceiveChannel) {
	for {
		var r activities.SlotRequest
		switch {
		case acquire.ReceiveAsync(&r):
			s.onAcquire(ctx, r)
		case release.ReceiveAsync(&r):
			s.drop(keyOf(r))
		default:
			return
		}
	}
}

// onAcquire takes an ask or a re-assertion. A request already held is granted again to the run asking (its
// grant was lost, or it is a reset run); one already queued keeps its place.
func (s *semaphore) onAcquire(ctx workflow.Context, r activities.SlotRequest) {
	if r.Plan > 0 {
		s.plan = r.Plan
	}
	k := keyOf(r)
	if i := slices.IndexFunc(s.holders, func(h activities.SlotRequest) bool { return keyOf(h) == k }); i >= 0 {
		if !r.Held {
			s.holders[i].RunID = r.RunID
			s.send(ctx, r)
		}
		return
	}
	if r.Held {
		s.holders = append(s.holders, r)
		if len(s.holders) > s.plan {
			workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
		}
		return
	}
	s.enqueue(r)
}

func (s *semaphore) enqueue(r activities.SlotRequest) {
	if _, ok := s.queued[keyOf(r)]; !ok {
		s.queue = append(s.queue, keyOf(r))
	}
	r.Held, r.Plan = false, 0
	s.queued[keyOf(r)] = r
}

// drop frees k's slot or takes it out of the queue.
func (s *semaphore) drop(k slotKey) {
	s.holders = slices.DeleteFunc(s.holders, func(h activities.SlotRequest) bool { return keyOf(h) == k })
	delete(s.queued, k)
}

func (s *semaphore) grant(ctx workflow.Context) {
	for len(s.holders) < s.plan && len(s.queue) > 0 {
		k := s.queue[0]
		s.queue = s.queue[1:]
		if r, ok := s.queued[k]; ok {
			delete(s.queued, k)
			s.holders = append(s.holders, r)
			s.send(ctx, r)
		}
	}
}

// send signals the grant; one that cannot be delivered (the run is gone) frees the slot.
func (s *semaphore) send(ctx workflow.Context, r activities.SlotRequest) {
	f := workflow.SignalExternalWorkflow(ctx, r.WorkflowID, r.RunID, activities.SlotGrantedSignal,
		activities.SlotGrant{Seq: r.Seq, RunID: r.RunID, Semaphore: s.id})
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		if f.Get(ctx, nil) != nil && slices.ContainsFunc(s.holders, func(h activities.SlotRequest) bool { return h.RunID == r.RunID && keyOf(h) == keyOf(r) }) {
			s.drop(keyOf(r))
		}
		s.inFlight--
		s.wake.SendAsync(nil)
	})
}

// reclaim frees, in the background, the slots of holders whose task ended.
func (s *semaphore) reclaim(ctx workflow.Context) {
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.inFlight--; s.wake.SendAsync(nil) }()
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
		var dead []activities.SlotRequest
		if err := workflow.ExecuteActivity(actx, acts.CheckSlotHolders, s.holders).Get(ctx, &dead); err != nil {
			workflow.GetLogger(ctx).Warn("could not check the slot holders; trying again later", "Error", err)
			return
		}
		for _, h := range dead {
			s.drop(keyOf(h))
		}
		workflow.GetMetricsHandler(ctx).Counter(MetricSlotsReclaimed).Inc(int64(len(dead)))
	})
}

func (s *semaphore) report(ctx workflow.Context) {
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"semaphore": s.id})
	m.Gauge(MetricSlotsInUse).Update(float64(len(s.holders)))
	m.Gauge(MetricSlotsPlan).Update(float64(s.plan))
	m.Gauge(MetricSlotsQueue).Update(float64(len(s.queued)))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**provider threads:** %d/%d in use · %d queued", len(s.holders), s.plan, len(s.queued)))
}

// continueAsNew hands holders and queue to the next run once every grant and check has settled.
func (s *semaphore) continueAsNew(ctx workflow.Context, acquire, release workflow.ReceiveChannel) error {
	if err := workflow.Await(ctx, func() bool { return s.inFlight == 0 }); err != nil {
		return err
	}
	s.drain(ctx, acquire, release)
	st := activities.SemaphoreState{Plan: s.plan, Holders: s.holders}
	for _, k := range s.queue {
		if r, ok := s.queued[k]; ok {
			st.Queue = append(st.Queue, r)
			delete(s.queued, k) // a key queued twice is carried once
		}
	}
	return workflow.NewContinueAsNewError(ctx, activities.ThreadsWorkflowType, st)
}
