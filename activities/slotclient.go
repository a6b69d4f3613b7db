package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// The worker's side of the semaphore: one slotClient per worker process coalesces the AcquireSlot requests of the
// moment into one update per task queue (a semaphore takes at most 10 updates in flight, Temporal's default
// history.maxInFlightUpdates, and each costs it two history events however many requests it carries), and answers
// re-asks from a short-lived view of the semaphore instead of asking it.

const (
	// maxSlotBatch bounds the requests of one update (each is at most ~0.5 KB).
	maxSlotBatch = 200
	// semaphoreCallTimeout bounds one update (with start) to the semaphore.
	semaphoreCallTimeout = 20 * time.Second
	// viewTTL is how long a described semaphore answers re-asks: a replacement is noticed this much later at most.
	viewTTL = time.Second
)

// ErrNoSemaphore: no semaphore runs for the task queue and this worker has no PROVIDER_THREADS to start one with.
var ErrNoSemaphore = errors.New("no provider-threads semaphore runs for this task queue and this worker has no " +
	"PROVIDER_THREADS to start one with: give every worker of the task queue the same PROVIDER_THREADS")

type slotClient struct {
	c    client.Client
	plan int // this worker's PROVIDER_THREADS: the plan of a semaphore it starts

	mu       sync.Mutex
	batchers map[string]*slotBatcher // by task queue
	views    map[string]semaphoreView
}

// semaphoreView is what DescribeWorkflow says of the semaphore: enough to tell whether a ticket's instance runs.
type semaphoreView struct {
	at      time.Time
	running bool
	epoch   string
	plan    int
	runID   string
	reset   bool // the current run came from a reset
}

func (a *Activities) slotClient(c client.Client) *slotClient {
	a.slotsOnce.Do(func() {
		a.slots = &slotClient{c: c, plan: a.ProviderThreads, batchers: map[string]*slotBatcher{}, views: map[string]semaphoreView{}}
	})
	return a.slots
}

// ticketCurrent tells whether the semaphore instance epoch still runs, knowing what it was told. A reset run has not
// taken up its own epoch until it has handled a request: until then its memo still names the run it was reset from.
func (sc *slotClient) ticketCurrent(ctx context.Context, id, epoch string) (bool, error) {
	v, err := sc.view(ctx, id)
	if err != nil {
		return false, err
	}
	return v.running && v.epoch == epoch && (!v.reset || v.epoch == v.runID), nil
}

func (sc *slotClient) view(ctx context.Context, id string) (semaphoreView, error) {
	sc.mu.Lock()
	v, ok := sc.views[id]
	sc.mu.Unlock()
	if ok && time.Since(v.at) < viewTTL {
		return v, nil
	}
	v, err := describeSemaphore(ctx, sc.c, id)
	if err != nil {
		return v, err
	}
	sc.mu.Lock()
	sc.views[id] = v
	sc.mu.Unlock()
	return v, nil
}

func describeSemaphore(ctx context.Context, c client.Client, id string) (semaphoreView, error) {
	v := semaphoreView{at: time.Now()}
	desc, err := c.DescribeWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("describing %s: %w", id, err)
	}
	resp := desc.RawResponse
	info := resp.GetWorkflowExecutionInfo()
	v.running = info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	v.runID = info.GetExecution().GetRunId()
	v.reset = resp.GetWorkflowExtendedInfo().GetLastResetTime() != nil
	dc := converter.GetDefaultDataConverter()
	if p := info.GetMemo().GetFields()[MemoEpoch]; p != nil {
		_ = dc.FromPayload(p, &v.epoch) // unreadable: no epoch, so every ticket is re-sent
	}
	if p := info.GetMemo().GetFields()[MemoPlan]; p != nil {
		_ = dc.FromPayload(p, &v.plan)
	}
	return v, nil
}

// acquire sends req with the other requests of the moment for this task queue and waits for its ticket.
func (sc *slotClient) acquire(ctx context.Context, taskQueue string, req SlotRequest) (SlotTicket, error) {
	sc.mu.Lock()
	b, ok := sc.batchers[taskQueue]
	if !ok {
		b = &slotBatcher{sc: sc, taskQueue: taskQueue}
		sc.batchers[taskQueue] = b
	}
	sc.mu.Unlock()
	return b.submit(ctx, req)
}

// slotBatcher sends the pending requests of one task queue, one update at a time: requests arriving while an
// update is in flight go together in the next one.
type slotBatcher struct {
	sc        *slotClient
	taskQueue string

	mu      sync.Mutex
	pending []pendingSlot
	sending bool
}

type pendingSlot struct {
	req  SlotRequest
	done chan slotAnswer
}

type slotAnswer struct {
	ticket SlotTicket
	err    error
}

func (b *slotBatcher) submit(ctx context.Context, req SlotRequest) (SlotTicket, error) {
	p := pendingSlot{req: req, done: make(chan slotAnswer, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	if !b.sending {
		b.sending = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case a := <-p.done:
		return a.ticket, a.err
	case <-ctx.Done():
		// The request may still be registered: the task's re-ask or release settles it.
		return SlotTicket{}, ctx.Err()
	}
}

func (b *slotBatcher) run() {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxSlotBatch)
		if n == 0 {
			b.sending = false
			b.mu.Unlock()
			return
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.mu.Unlock()
		b.send(batch)
	}
}

func (b *slotBatcher) send(batch []pendingSlot) {
	reqs := make([]SlotRequest, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), semaphoreCallTimeout)
	defer cancel()
	var tickets []SlotTicket
	err := callSemaphore(ctx, b.sc.c, b.taskQueue, AcquireSlotsUpdate, reqs, b.sc.plan, &tickets)
	if err == nil && len(tickets) != len(reqs) {
		err = fmt.Errorf("the semaphore answered %d tickets for %d requests", len(tickets), len(reqs))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- slotAnswer{err: fmt.Errorf("asking the provider-threads semaphore for a slot: %w", err)}
			continue
		}
		p.done <- slotAnswer{ticket: tickets[i]}
	}
}

// callSemaphore sends the update name(arg) to the task queue's semaphore and reads its result into out. When no
// semaphore runs it starts one holding plan (refused when plan is 0), fenced when an instance before it may have
// left slots held.
func callSemaphore(ctx context.Context, c client.Client, taskQueue, name string, arg any, plan int, out any) error {
	id := ThreadsWorkflowID(taskQueue)
	upd := client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted}
	h, err := c.UpdateWorkflow(ctx, upd)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		if plan <= 0 {
			return ErrNoSemaphore
		}
		h, err = startSemaphore(ctx, c, taskQueue, plan, upd)
	}
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

func startSemaphore(ctx context.Context, c client.Client, taskQueue string, plan int, upd client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	id := ThreadsWorkflowID(taskQueue)
	op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		Memo:                     map[string]any{MemoPlan: plan},
	}, ThreadsWorkflowType, SemaphoreState{Threads: plan, Fence: previousMayHoldSlots(ctx, c, taskQueue)}, []byte(nil))
	upd.WorkflowID = ""
	return c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op, UpdateOptions: upd})
}

// previousMayHoldSlots tells whether a semaphore instance ran before on this task queue and ended without handing
// over (terminated, cancelled, failed, timed out), or one of the first release runs or ran: tasks may still hold its
// slots. When it cannot tell, it says yes (a fence costs a delay, a wrong no may exceed the plan).
func previousMayHoldSlots(ctx context.Context, c client.Client, taskQueue string) bool {
	for _, id := range []string{ThreadsWorkflowID(taskQueue), LegacyThreadsWorkflowID(taskQueue)} {
		desc, err := c.DescribeWorkflow(ctx, id, "")
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			continue
		case err != nil:
			return true
		case desc.Status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			return true
		}
	}
	return false
}

// EnsureThreadsPlan checks change.Threads against the task queue's plan (or, with change.Set, makes it the plan),
// starting the semaphore with it when none runs, and returns the plan in force. A plan that differs, unless Set,
// is refused by the semaphore with an error naming both values.
func EnsureThreadsPlan(ctx context.Context, c client.Client, taskQueue string, change PlanChange) (int, error) {
	var plan int
	err := callSemaphore(ctx, c, taskQueue, PlanUpdate, change, change.Threads, &plan)
	return plan, err
}

// RunningThreadsPlan reads the plan of the task queue's semaphore from its memo, without a worker: running is false
// when none runs.
func RunningThreadsPlan(ctx context.Context, c client.Client, taskQueue string) (plan int, running bool, err error) {
	v, err := describeSemaphore(ctx, c, ThreadsWorkflowID(taskQueue))
	return v.plan, v.running, err
}

// HandOver registers requests with the task queue's semaphore (starting it with plan when none runs): the queue and
// holders of the first release's semaphore, whose tasks ask only once, so they are granted by the new one.
func HandOver(ctx context.Context, c client.Client, taskQueue string, reqs []SlotRequest, plan int) error {
	if len(reqs) == 0 {
		return nil
	}
	var tickets []SlotTicket
	return callSemaphore(ctx, c, taskQueue, AcquireSlotsUpdate, reqs, plan, &tickets)
}
