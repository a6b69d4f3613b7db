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

// Metrics of provider thread admission (PROVIDER_THREADS). The gauges come from the semaphore workflow, so they are
// per task queue (one semaphore each) whichever worker runs it.
const (
	MetricSlotsInUse = "captchaflow_provider_slots_in_use"
	MetricSlotsPlan  = "captchaflow_provider_slots_plan"
	MetricSlotsQueue = "captchaflow_provider_slots_queued"
	// MetricSlotsOldestWait is how long the first task in line has been waiting, in seconds (0 with none).
	MetricSlotsOldestWait = "captchaflow_provider_slots_oldest_wait_seconds"
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
	// new with its state (Temporal suggests continue-as-new at 4 K events and warns at 10 K; the limit is 50 K).
	semaphoreMaxEvents = 4000
	// semaphoreFence is how long a new semaphore instance grants nothing new: long enough for every task holding a
	// slot of the instance before it to re-assert it (tasks re-assert every SlotReaskInterval), so the plan holds
	// across a replacement.
	semaphoreFence = activities.SlotReaskInterval + 15*time.Second
	// maxGrantsInFlight bounds the grant signals not yet delivered (Temporal refuses more than 2 000 pending
	// signals of one workflow).
	maxGrantsInFlight = 500
	// maxQueueBytes bounds the queue by the bytes it packs to before compression (see packQueue), so that it
	// always fits the 2 MB payload limit when carried to the next run, one batch over it included; past it an
	// ask is refused and AcquireSlot retried.
	maxQueueBytes = 1_200_000
	// maxAcquireBatch bounds the requests of one AcquireSlotsUpdate.
	maxAcquireBatch = 1000
)

func registerThreads(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
}

// ProviderThreads is the semaphore behind PROVIDER_THREADS: one long-running workflow per namespace and task queue
// (ID activities.ThreadsWorkflowID) that hands out at most st.Threads slots, first come first served. AcquireSlot
// asks with the AcquireSlotsUpdate, batched per worker: a free slot is granted in the answer, otherwise the request
// queues and a SlotGrantedSignal follows. Tasks release with the ReleaseSlotSignal. Slots of holders that stopped
// running are reclaimed every slotReclaimInterval; a grant that cannot be delivered frees its slot at once.
//
// It continues as new past semaphoreMaxEvents, and when cancelled (an operator's cancel must not drop the queue),
// carrying st and the queue, packed. A new instance (started afresh after one was terminated, or reset) has a new
// epoch: tasks see it on their next re-ask and register again, holders included, and it grants nothing new for
// semaphoreFence so that the plan holds across the replacement.
func ProviderThreads(ctx workflow.Context, st activities.SemaphoreState, packed []byte) error {
	s, err := newSemaphore(ctx, st, packed)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "SemaphoreState", nil)
	}
	if err := s.setHandlers(ctx); err != nil {
		return err
	}
	return s.loop(ctx)
}

type semaphore struct {
	st          activities.SemaphoreState // Threads, Epoch, Fence; holders and the queue live below
	id          string
	fencedUntil time.Time
	holders     []activities.SlotHolder
	held        map[slotKey]bool
	queue       *slotQueue
	queueBytes  int
	// grantsInFlight counts grant signals sent but not yet known delivered; reclaiming, a holder check running.
	grantsInFlight int
	reclaiming     bool
	// queueUnsorted: tasks re-register in any order during a fence; the queue is sorted by first ask when it ends.
	queueUnsorted bool
	reclaimTimer  workflow.Future
	fenceTimer    workflow.Future
	wake          workflow.Channel // a grant or check finished: the loop looks again
	gctx          workflow.Context // disconnected: a grant in flight outlives a cancellation
}

func newSemaphore(ctx workflow.Context, st activities.SemaphoreState, packed []byte) (*semaphore, error) {
	queued, err := unpackQueue(packed)
	if err != nil {
		return nil, err
	}
	s := &semaphore{id: workflow.GetInfo(ctx).WorkflowExecution.ID, held: map[slotKey]bool{},
		queue: newSlotQueue(nil), wake: workflow.NewBufferedChannel(ctx, 1)}
	s.gctx, _ = workflow.NewDisconnectedContext(ctx)
	for _, h := range st.Holders {
		s.addHolder(h)
	}
	for _, r := range append(st.Queue, queued...) {
		s.enqueue(r)
	}
	if st.FencedUntil != nil {
		s.fencedUntil, s.queueUnsorted = *st.FencedUntil, true
	}
	st.Holders, st.Queue, st.FencedUntil = nil, nil, nil
	s.st = st
	s.checkEpoch(ctx)
	return s, nil
}

func (s *semaphore) setHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, activities.SlotsQuery, func() (activities.SlotsView, error) {
		return s.view(ctx), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, activities.AcquireSlotsUpdate, s.acquireBatch,
		workflow.UpdateHandlerOptions{Validator: s.validateBatch}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, activities.PlanUpdate, s.setPlan,
		workflow.UpdateHandlerOptions{Validator: s.validatePlan})
}

func (s *semaphore) loop(ctx workflow.Context) error {
	acquire := workflow.GetSignalChannel(ctx, activities.AcquireSlotSignal)
	release := workflow.GetSignalChannel(ctx, activities.ReleaseSlotSignal)
	for {
		s.drain(ctx, acquire, release)
		if ctx.Err() != nil {
			workflow.GetLogger(ctx).Warn("semaphore cancelled: continuing as new with its holders and queue " +
				"(terminate it to replace it; a replacement waits for the holders to re-assert their slots)")
			return s.continueAsNew(ctx, acquire, release)
		}
		s.checkEpoch(ctx)
		s.grant(ctx)
		s.schedule(ctx)
		s.report(ctx)
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() >= semaphoreMaxEvents || info.GetContinueAsNewSuggested() {
			return s.continueAsNew(ctx, acquire, release)
		}
		s.wait(ctx, acquire, release)
	}
}

// wait blocks until a signal, a timer, a finished grant or check, or a cancellation; the loop then drains.
func (s *semaphore) wait(ctx workflow.Context, acquire, release workflow.ReceiveChannel) {
	sel := workflow.NewSelector(ctx)
	noop := func(workflow.ReceiveChannel, bool) {}
	sel.AddReceive(acquire, noop)
	sel.AddReceive(release, noop)
	sel.AddReceive(ctx.Done(), noop)
	sel.AddReceive(s.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	if s.fenceTimer != nil {
		sel.AddFuture(s.fenceTimer, func(workflow.Future) { s.fenceTimer = nil })
	}
	if s.reclaimTimer != nil {
		sel.AddFuture(s.reclaimTimer, func(workflow.Future) {
			s.reclaimTimer = nil
			s.reclaim(ctx)
		})
	}
	sel.Select(ctx)
}

// drain takes every signal already delivered, acquires first: a task releases only after its acquire was accepted,
// so when both of one request wait here the acquire is the older.
func (s *semaphore) drain(ctx workflow.Context, acquire, release workflow.ReceiveChannel) {
	var req activities.SlotRequest
	for acquire.ReceiveAsync(&req) {
		if req.Validate() == nil {
			s.onAcquire(ctx, req, false)
		}
		req = activities.SlotRequest{}
	}
	var rel activities.SlotRelease
	for release.ReceiveAsync(&rel) {
		s.onRelease(releaseKey(rel))
	}
}

func (s *semaphore) poke() { s.wake.SendAsync(struct{}{}) }

// continueAsNew hands the state to the next run once every grant in flight is settled and every update answered.
func (s *semaphore) continueAsNew(ctx workflow.Context, acquire, release workflow.ReceiveChannel) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx) // a cancellation meanwhile must not end it without its state
	if err := workflow.Await(ctx, func() bool {
		return s.grantsInFlight == 0 && !s.reclaiming && workflow.AllHandlersFinished(ctx)
	}); err != nil {
		return err
	}
	s.drain(ctx, acquire, release)
	packed, err := packQueue(s.queue.list(-1))
	if err != nil {
		return err
	}
	st := s.st
	st.Holders = slices.Clone(s.holders)
	if s.fenced(ctx) {
		st.FencedUntil = &s.fencedUntil
	}
	return workflow.NewContinueAsNewError(ctx, activities.ThreadsWorkflowType, st, packed)
}

// checkEpoch takes up a new epoch: on a fresh start, and on the first workflow task after a reset (a mutable side
// effect, so the history before the reset point replays with the epoch it had). After a reset what this run knows
// may be stale: it forgets it, and every task registers again.
func (s *semaphore) checkEpoch(ctx workflow.Context) {
	info := workflow.GetInfo(ctx)
	carried := s.st.Epoch
	var epoch string
	err := workflow.MutableSideEffect(ctx, "epoch", func(workflow.Context) any {
		return epochOf(info.WorkflowExecution.RunID, info.OriginalRunID, carried)
	}, func(a, b any) bool { return a == b }).Get(&epoch)
	if err != nil || epoch == s.st.Epoch {
		return
	}
	fresh := s.st.Epoch == ""
	if !fresh {
		s.holders, s.held, s.queue, s.queueBytes = nil, map[slotKey]bool{}, newSlotQueue(nil), 0
	}
	if !fresh || s.st.Fence {
		s.fencedUntil = workflow.Now(ctx).Add(semaphoreFence)
		s.queueUnsorted = true
	}
	s.st.Epoch, s.st.Fence = epoch, false
	workflow.GetLogger(ctx).Info("semaphore epoch", "Epoch", epoch, "Reset", !fresh, "FencedUntil", s.fencedUntil)
	s.upsertMemo(ctx)
}

// epochOf is a run's epoch: its own run ID when it was reset or starts afresh, else the one it carries.
func epochOf(runID, originalRunID, carried string) string {
	if (originalRunID != "" && runID != originalRunID) || carried == "" {
		return runID
	}
	return carried
}

func (s *semaphore) upsertMemo(ctx workflow.Context) {
	if err := workflow.UpsertMemo(ctx, map[string]any{activities.MemoEpoch: s.st.Epoch, activities.MemoPlan: s.st.Threads}); err != nil {
		workflow.GetLogger(ctx).Error("could not record the semaphore's epoch and plan in its memo", "Error", err)
	}
}

func (s *semaphore) fenced(ctx workflow.Context) bool { return workflow.Now(ctx).Before(s.fencedUntil) }

func (s *semaphore) freeSlot() bool { return s.st.Threads == 0 || len(s.holders) < s.st.Threads }

func (s *semaphore) addHolder(h activities.SlotHolder) {
	h.Ticket, h.Held = nil, false
	s.holders = append(s.holders, h)
	s.held[requestKey(h.SlotRequest)] = true
}

func (s *semaphore) enqueue(r activities.SlotRequest) {
	r.Ticket, r.Held = nil, false
	if s.queue.push(r) {
		s.queueBytes += packedSize(r)
	}
}

// packedSize is about what r packs to before compression: the bound maxQueueBytes counts.
func packedSize(r activities.SlotRequest) int { return len(r.WorkflowID) + len(r.RunID) + 16 }

// onAcquire registers req: a holder re-asserting its slot is a holder (even above the plan: the slot is in use), a
// request already seen keeps its place, a new one is granted at once when answer allows it (an update, not a
// legacy request, a free slot, nobody in line, no fence), else queued.
func (s *semaphore) onAcquire(ctx workflow.Context, req activities.SlotRequest, answer bool) activities.SlotTicket {
	t := activities.SlotTicket{Semaphore: s.id, Epoch: s.st.Epoch, RunID: req.RunID}
	k := requestKey(req)
	switch {
	case s.held[k]:
		t.Granted = true
	case req.Held:
		s.dequeue(k)
		s.addHolder(activities.SlotHolder{SlotRequest: req, GrantedAt: workflow.Now(ctx)})
		t.Granted = true
	case s.queue.has(k):
	case answer && req.Threads == 0 && s.freeSlot() && s.queue.len() == 0 && !s.fenced(ctx):
		s.addHolder(activities.SlotHolder{SlotRequest: req, GrantedAt: workflow.Now(ctx)})
		t.Granted = true
	default:
		s.enqueue(req)
	}
	return t
}

func (s *semaphore) dequeue(k slotKey) {
	if r, ok := s.queue.get(k); ok {
		s.queueBytes -= packedSize(r)
		s.queue.remove(k)
	}
}

// onRelease frees the slot of k, or takes k out of the queue; an unknown request is ignored.
func (s *semaphore) onRelease(k slotKey) {
	if s.held[k] {
		delete(s.held, k)
		s.holders = slices.DeleteFunc(s.holders, func(h activities.SlotHolder) bool { return requestKey(h.SlotRequest) == k })
		return
	}
	s.dequeue(k)
}

func (s *semaphore) acquireBatch(ctx workflow.Context, reqs []activities.SlotRequest) ([]activities.SlotTicket, error) {
	s.checkEpoch(ctx)
	tickets := make([]activities.SlotTicket, len(reqs))
	for i, r := range reqs {
		tickets[i] = s.onAcquire(ctx, r, true)
	}
	s.poke()
	return tickets, nil
}

// validateBatch refuses, before anything is written to history, a batch that is empty, too big or names no task
// run, and every batch once the queue has grown to what it can carry to the next run (one batch may pass the
// bound: at most maxAcquireBatch requests of at most ~250 bytes).
func (s *semaphore) validateBatch(reqs []activities.SlotRequest) error {
	if len(reqs) == 0 || len(reqs) > maxAcquireBatch {
		return fmt.Errorf("%d requests in one batch: 1 to %d", len(reqs), maxAcquireBatch)
	}
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	if s.queueBytes >= maxQueueBytes {
		return fmt.Errorf("the provider-threads queue is full (%d requests waiting): ask again later", s.queue.len())
	}
	return nil
}
