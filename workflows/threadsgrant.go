package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// The semaphore's grants, holder checks, plan and reports (see ProviderThreads).

// grant hands free slots to the head of the queue, each by a SlotGrantedSignal naming the run and request it
// answers. A grant that cannot be delivered (the requester's run is gone) frees its slot again.
func (s *semaphore) grant(ctx workflow.Context) {
	if s.fenced(ctx) {
		return
	}
	if s.queueUnsorted {
		s.queue.sortByRequestedAt()
		s.queueUnsorted = false
	}
	for s.freeSlot() && s.grantsInFlight < maxGrantsInFlight {
		r, ok := s.queue.peek()
		if !ok {
			return
		}
		s.dequeue(requestKey(r))
		h := activities.SlotHolder{SlotRequest: r, GrantedAt: workflow.Now(ctx)}
		s.addHolder(h)
		s.sendGrant(h)
	}
}

func (s *semaphore) sendGrant(h activities.SlotHolder) {
	f := workflow.SignalExternalWorkflow(s.gctx, h.WorkflowID, h.RunID, activities.SlotGrantedSignal,
		activities.SlotGrant{Seq: h.Seq, RunID: h.RunID, Semaphore: s.id})
	s.grantsInFlight++
	workflow.Go(s.gctx, func(ctx workflow.Context) {
		err := f.Get(ctx, nil)
		s.grantsInFlight--
		if err != nil {
			workflow.GetLogger(ctx).Info("slot grant not delivered; the requester is gone",
				"WorkflowID", h.WorkflowID, "RunID", h.RunID, "Error", err)
			s.onRelease(requestKey(h.SlotRequest))
		}
		s.poke()
	})
}

// schedule starts the timers the state needs: the end of a fence, and the next holder check while any slot is held.
func (s *semaphore) schedule(ctx workflow.Context) {
	if s.fenceTimer == nil && s.fenced(ctx) {
		s.fenceTimer = workflow.NewTimer(ctx, s.fencedUntil.Sub(workflow.Now(ctx)))
	}
	if s.reclaimTimer == nil && !s.reclaiming && len(s.holders) > 0 {
		s.reclaimTimer = workflow.NewTimer(ctx, slotReclaimInterval)
	}
}

// reclaim frees, in the background, the slots of holders whose run stopped without releasing.
func (s *semaphore) reclaim(ctx workflow.Context) {
	if len(s.holders) == 0 {
		return
	}
	s.reclaiming = true
	holders := slices.Clone(s.holders)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { s.reclaiming = false; s.poke() }()
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		var dead []activities.SlotHolder
		if err := workflow.ExecuteActivity(actx, acts.CheckSlotHolders, holders).Get(ctx, &dead); err != nil {
			workflow.GetLogger(ctx).Warn("could not check the slot holders; trying again later", "Error", err)
			return
		}
		for _, h := range dead {
			workflow.GetLogger(ctx).Warn("reclaiming the slot of a task that stopped without releasing it",
				"WorkflowID", h.WorkflowID, "RunID", h.RunID, "Seq", h.Seq)
			s.onRelease(requestKey(h.SlotRequest))
		}
		if len(dead) > 0 {
			workflow.GetMetricsHandler(ctx).Counter(MetricSlotsReclaimed).Inc(int64(len(dead)))
		}
	})
}

// validatePlan refuses a negative plan, and a plan that differs from the one in force unless it is to be set: the
// thread count is one stated value per task queue.
func (s *semaphore) validatePlan(change activities.PlanChange) error {
	switch {
	case change.Threads < 0:
		return fmt.Errorf("plan: %d threads is negative", change.Threads)
	case !change.Set && change.Threads != s.st.Threads:
		return fmt.Errorf("PROVIDER_THREADS=%d disagrees with the plan of %d threads the semaphore %s holds: give every "+
			"worker of the task queue the same value, or change the plan with `worker -set-provider-threads %d`",
			change.Threads, s.st.Threads, s.id, change.Threads)
	}
	return nil
}

func (s *semaphore) setPlan(ctx workflow.Context, change activities.PlanChange) (int, error) {
	s.checkEpoch(ctx)
	if change.Set && change.Threads != s.st.Threads {
		workflow.GetLogger(ctx).Warn("provider-threads plan changed", "From", s.st.Threads, "To", change.Threads)
		s.st.Threads = change.Threads
		s.upsertMemo(ctx)
		s.poke()
	}
	return s.st.Threads, nil
}

func (s *semaphore) view(ctx workflow.Context) activities.SlotsView {
	v := activities.SlotsView{Threads: s.st.Threads, InUse: len(s.holders), Queued: s.queue.len(), Epoch: s.st.Epoch,
		Holders: slices.Clone(s.holders), QueueHead: s.queue.list(activities.SlotsViewQueueHead)}
	if v.Holders == nil {
		v.Holders = []activities.SlotHolder{}
	}
	if len(v.QueueHead) > 0 {
		v.OldestWaitSeconds = max(0, workflow.Now(ctx).Sub(v.QueueHead[0].RequestedAt).Seconds())
	}
	if s.fenced(ctx) {
		until := s.fencedUntil
		v.FencedUntil = &until
	}
	return v
}

// report publishes the view as gauges and as the Web UI's current details.
func (s *semaphore) report(ctx workflow.Context) {
	v := s.view(ctx)
	m := workflow.GetMetricsHandler(ctx)
	m.Gauge(MetricSlotsInUse).Update(float64(v.InUse))
	m.Gauge(MetricSlotsPlan).Update(float64(v.Threads))
	m.Gauge(MetricSlotsQueue).Update(float64(v.Queued))
	m.Gauge(MetricSlotsOldestWait).Update(v.OldestWaitSeconds)
	details := fmt.Sprintf("**provider threads:** %d/%d in use · %d queued · oldest wait %.0f s", v.InUse, v.Threads,
		v.Queued, v.OldestWaitSeconds)
	if v.FencedUntil != nil {
		details += " · no new grants until " + v.FencedUntil.Format(time.RFC3339) + " (replaced: holders re-assert)"
	}
	workflow.SetCurrentDetails(ctx, details)
}
