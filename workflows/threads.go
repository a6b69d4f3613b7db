package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// Metrics of provider thread admission (PROVIDER_THREADS). The gauges come from the semaphore workflow, so they are
// per task queue (one semaphore each) whichever worker runs it.
const (
	MetricSlotsInUse = "captchaflow_provider_slots_in_use"
	MetricSlotsPlan  = "captchaflow_provider_slots_plan"
	MetricSlotsQueue = "captchaflow_provider_slots_queued"
	// MetricSlotsReclaimed counts slots taken back from holders that stopped running without releasing them.
	MetricSlotsReclaimed = "captchaflow_provider_slots_reclaimed_total"
	// MetricSlotQueueWait is how long a submission waited in PhaseQueued for its slot.
	MetricSlotQueueWait = "captchaflow_slot_queue_wait_seconds"
)

var (
	// slotReclaimInterval spaces the checks for holders that stopped running; the timer runs only while some
	// slot is held, so an idle semaphore adds no history.
	slotReclaimInterval = 30 * time.Second
	// semaphoreMaxEvents is how many history events one run of the semaphore may grow to before it continues as
	// new with its state (well under Temporal's 50 K event limit and its 10 K warning).
	semaphoreMaxEvents = 2000
	// semaphoreMaxSignals bounds the signals one run handles (each costs it about five events: the signal, its
	// workflow task, and the grant it leads to), a second guard beside the history length.
	semaphoreMaxSignals = 300
)

func registerThreads(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
}

// ProviderThreads is the semaphore behind PROVIDER_THREADS: one long-running workflow per namespace and task queue
// (ID activities.ThreadsWorkflowID) that hands out at most Threads slots, in the order requests arrived. A task asks
// with AcquireSlot (signal-with-start), is granted by a SlotGrantedSignal and releases with a ReleaseSlotSignal
// when its submission resolves. Slots of holders that stopped running (terminated, timed out, reset) are
// reclaimed every slotReclaimInterval; a grant that cannot be delivered (the requester is gone) frees the slot at
// once. Past semaphoreMaxEvents it continues as new, carrying its state.
func ProviderThreads(ctx workflow.Context, st activities.SemaphoreState) error {
	sem := &semaphore{st: st}
	if err := workflow.SetQueryHandler(ctx, activities.SlotsQuery, func() (activities.SemaphoreState, error) {
		return sem.st, nil
	}); err != nil {
		return err
	}
	acquire := workflow.GetSignalChannel(ctx, activities.AcquireSlotSignal)
	release := workflow.GetSignalChannel(ctx, activities.ReleaseSlotSignal)
	var reclaimTimer workflow.Future
	var cancelReclaim workflow.CancelFunc
	for handled := 0; ; handled++ {
		if ctx.Err() != nil {
			// Cancelled (by an operator): the next AcquireSlot starts a fresh semaphore, and the tasks holding a
			// slot now release into nothing; PROVIDER_THREADS may be exceeded until they resolve.
			return temporal.NewCanceledError()
		}
		sem.grant(ctx)
		sem.report(ctx)
		info := workflow.GetInfo(ctx)
		if handled >= semaphoreMaxSignals || info.GetCurrentHistoryLength() >= semaphoreMaxEvents || info.GetContinueAsNewSuggested() {
			// Signals already delivered to this run are taken into the state; any arriving later go to the next run.
			sem.drain(acquire, release)
			if cancelReclaim != nil {
				cancelReclaim()
			}
			return workflow.NewContinueAsNewError(ctx, activities.ThreadsWorkflowType, sem.st)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(acquire, func(c workflow.ReceiveChannel, _ bool) {
			var req activities.SlotRequest
			c.Receive(ctx, &req)
			sem.onAcquire(req)
		})
		sel.AddReceive(release, func(c workflow.ReceiveChannel, _ bool) {
			var rel activities.SlotRelease
			c.Receive(ctx, &rel)
			sem.onRelease(rel)
		})
		if len(sem.st.Holders) > 0 && reclaimTimer == nil {
			var timerCtx workflow.Context
			timerCtx, cancelReclaim = workflow.WithCancel(ctx)
			reclaimTimer = workflow.NewTimer(timerCtx, slotReclaimInterval)
		}
		if reclaimTimer != nil {
			sel.AddFuture(reclaimTimer, func(workflow.Future) {
				reclaimTimer, cancelReclaim = nil, nil
				sem.reclaim(ctx)
			})
		}
		sel.Select(ctx)
	}
}

type semaphore struct {
	st activities.SemaphoreState
}

func sameSlot(a, b activities.SlotRequest) bool {
	return a.WorkflowID == b.WorkflowID && a.RunID == b.RunID && a.Seq == b.Seq
}

func (s *semaphore) onAcquire(req activities.SlotRequest) {
	if req.Threads > 0 {
		s.st.Threads = req.Threads // the latest worker setting wins
	}
	held := slices.ContainsFunc(s.st.Holders, func(h activities.SlotHolder) bool { return sameSlot(h.SlotRequest, req) })
	queued := slices.ContainsFunc(s.st.Queue, func(q activities.SlotRequest) bool { return sameSlot(q, req) })
	if held || queued {
		return // a retried AcquireSlot
	}
	s.st.Queue = append(s.st.Queue, req)
}

func (s *semaphore) onRelease(rel activities.SlotRelease) {
	key := activities.SlotRequest{WorkflowID: rel.WorkflowID, RunID: rel.RunID, Seq: rel.Seq}
	s.st.Holders = slices.DeleteFunc(s.st.Holders, func(h activities.SlotHolder) bool { return sameSlot(h.SlotRequest, key) })
	s.st.Queue = slices.DeleteFunc(s.st.Queue, func(q activities.SlotRequest) bool { return sameSlot(q, key) })
}

// drain takes the signals already delivered into the state without blocking (before continue-as-new).
func (s *semaphore) drain(acquire, release workflow.ReceiveChannel) {
	for {
		var req activities.SlotRequest
		var rel activities.SlotRelease
		// Acquires first: a task releases only after its acquire was accepted, so when both of one slot wait here
		// the acquire is the older (the selector in the loop prefers acquires for the same reason).
		switch {
		case acquire.ReceiveAsync(&req):
			s.onAcquire(req)
		case release.ReceiveAsync(&rel):
			s.onRelease(rel)
		default:
			return
		}
	}
}

// grant hands free slots to the head of the queue. The grants go out together; one that cannot be delivered (the
// requester's run is gone) frees its slot again for the next in line.
func (s *semaphore) grant(ctx workflow.Context) {
	for len(s.st.Queue) > 0 && len(s.st.Holders) < s.st.Threads {
		type sent struct {
			h activities.SlotHolder
			f workflow.Future
		}
		var batch []sent
		for len(s.st.Queue) > 0 && len(s.st.Holders) < s.st.Threads {
			req := s.st.Queue[0]
			s.st.Queue = s.st.Queue[1:]
			h := activities.SlotHolder{SlotRequest: req, GrantedAt: workflow.Now(ctx)}
			s.st.Holders = append(s.st.Holders, h)
			f := workflow.SignalExternalWorkflow(ctx, req.WorkflowID, req.RunID, activities.SlotGrantedSignal,
				activities.SlotGrant{Seq: req.Seq, RunID: req.RunID, Semaphore: workflow.GetInfo(ctx).WorkflowExecution.ID})
			batch = append(batch, sent{h, f})
		}
		for _, b := range batch {
			if err := b.f.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Info("slot grant not delivered; the requester is gone",
					"WorkflowID", b.h.WorkflowID, "RunID", b.h.RunID, "Error", err)
				s.onRelease(activities.SlotRelease{WorkflowID: b.h.WorkflowID, RunID: b.h.RunID, Seq: b.h.Seq})
			}
		}
	}
}

// reclaim frees the slots of holders whose run stopped without releasing.
func (s *semaphore) reclaim(ctx workflow.Context) {
	if len(s.st.Holders) == 0 {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var dead []activities.SlotHolder
	if err := workflow.ExecuteActivity(actx, acts.CheckSlotHolders, slices.Clone(s.st.Holders)).Get(ctx, &dead); err != nil {
		workflow.GetLogger(ctx).Warn("could not check the slot holders; trying again later", "Error", err)
		return
	}
	for _, h := range dead {
		workflow.GetLogger(ctx).Warn("reclaiming the slot of a task that stopped without releasing it",
			"WorkflowID", h.WorkflowID, "RunID", h.RunID, "Seq", h.Seq)
		s.onRelease(activities.SlotRelease{WorkflowID: h.WorkflowID, RunID: h.RunID, Seq: h.Seq})
	}
	if len(dead) > 0 {
		workflow.GetMetricsHandler(ctx).Counter(MetricSlotsReclaimed).Inc(int64(len(dead)))
	}
}

func (s *semaphore) report(ctx workflow.Context) {
	m := workflow.GetMetricsHandler(ctx)
	m.Gauge(MetricSlotsInUse).Update(float64(len(s.st.Holders)))
	m.Gauge(MetricSlotsPlan).Update(float64(s.st.Threads))
	m.Gauge(MetricSlotsQueue).Update(float64(len(s.st.Queue)))
	workflow.SetCurrentDetails(ctx, fmtSlots(s.st))
}
