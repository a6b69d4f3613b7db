package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/captchaflow/captchaflow"
)

// Provider thread admission (PROVIDER_THREADS): one ProviderThreads workflow per namespace and task queue hands
// out the slots; a SolveCaptcha task asks for one with AcquireSlot, holds it at once (SlotTicket.Granted) or is
// granted it later by the SlotGrantedSignal, and gives it back with the ReleaseSlotSignal. The names and shapes live
// here because AcquireSlot and the worker's plan check talk to the workflow.
const (
	// ThreadsWorkflowType is the registered name of the semaphore workflow.
	ThreadsWorkflowType = "ProviderThreads"
	// AcquireSlotsUpdate ([]SlotRequest → []SlotTicket, one per request) is how AcquireSlot asks: the requests of
	// every AcquireSlot running on a worker at that moment travel in one update.
	AcquireSlotsUpdate = "acquire-slots"
	// PlanUpdate (PlanChange → the plan in force) checks or sets the thread count.
	PlanUpdate = "plan"
	// AcquireSlotSignal (a SlotRequest) queues a request without an answer: a grant always follows. Kept for
	// requesters that cannot take an answer (and the benchmark's signal-only design).
	AcquireSlotSignal = "acquire"
	// ReleaseSlotSignal (a SlotRelease) gives a slot back or leaves the queue; SlotGrantedSignal (a SlotGrant)
	// tells a task its turn has come.
	ReleaseSlotSignal = "release"
	SlotGrantedSignal = "slot-granted"
	// SlotsQuery answers a SlotsView.
	SlotsQuery = "slots"
	// MemoEpoch and MemoPlan are the semaphore's memo fields: its epoch and plan, readable by DescribeWorkflow
	// without a worker (AcquireSlot's re-ask check and the worker's start check).
	MemoEpoch = "epoch"
	MemoPlan  = "plan"

	AcquireSlotName      = "AcquireSlot"
	CheckSlotHoldersName = "CheckSlotHolders"
)

// SlotReaskInterval is how often a queued task re-asks for its slot and a holder re-asserts it (the bound on
// recovering from a replaced semaphore).
const SlotReaskInterval = 30 * time.Second

// ThreadsWorkflowID is the semaphore's workflow ID for a task queue: one per namespace and task queue. The '/' in
// its prefix is refused by the task-ID rule (captchaflow.ValidateWorkflowID), so no task can take the ID, and no
// report ID ("<task ID>/report") can be it either.
func ThreadsWorkflowID(taskQueue string) string { return threadsIDPrefix + taskQueue }

const threadsIDPrefix = "captchaflow/threads/"

// LegacyThreadsWorkflowID is the ID the first release's semaphore ran under (a valid task ID, hence replaced).
func LegacyThreadsWorkflowID(taskQueue string) string { return "captchaflow-threads:" + taskQueue }

// SlotRequest asks for a slot for one submission (Seq) of the task WorkflowID/RunID.
type SlotRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
	// Threads is what tasks of the first PROVIDER_THREADS release sent (their worker's setting); new tasks leave it
	// 0. A request with it is answered by a SlotGrantedSignal, never Granted at once (such a task waits for one).
	Threads     int       `json:"threads,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// Held re-asserts a slot this task was granted: the semaphore registers it as a holder, even above the plan
	// (the slot is really in use).
	Held bool `json:"held,omitempty"`
	// Ticket is the previous answer, when re-asking: AcquireSlot does nothing while the semaphore that gave it
	// still runs.
	Ticket *SlotTicket `json:"ticket,omitempty"`
}

// SlotTicket is AcquireSlot's answer.
type SlotTicket struct {
	// Semaphore is the workflow ID to send the ReleaseSlotSignal to.
	Semaphore string `json:"semaphore"`
	// Epoch names the semaphore instance that answered: the same across its continue-as-new, new after it was
	// terminated, reset or started afresh (its queue and holders then start empty).
	Epoch string `json:"epoch"`
	// Granted means the slot is held already: no SlotGrantedSignal follows for this answer.
	Granted bool `json:"granted,omitempty"`
	// RunID is the task run the ticket was issued to: a run reset from it replays the ticket but does not hold it.
	RunID string `json:"run_id,omitempty"`
}

// SlotRelease gives back (or stops waiting for) the slot of submission Seq of WorkflowID/RunID.
type SlotRelease struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
}

// SlotGrant tells a task that submission Seq of its run RunID holds a slot of the semaphore Semaphore. A task
// takes only a grant naming its own run and current request (RunID and Semaphore are empty in grants sent before
// they existed).
type SlotGrant struct {
	Seq       int    `json:"seq"`
	RunID     string `json:"run_id,omitempty"`
	Semaphore string `json:"semaphore,omitempty"`
}

// SlotHolder is a granted slot.
type SlotHolder struct {
	SlotRequest
	GrantedAt time.Time `json:"granted_at"`
}

// SemaphoreState is the semaphore's first input: what it carries across continue-as-new besides its queue, which
// travels packed in the second input (see workflows.ProviderThreads).
type SemaphoreState struct {
	// Threads is the plan: at most this many slots held at once. 0 means admission is retired: every request is
	// granted at once (set only by an operator's PlanChange, never by a worker or an activity).
	Threads int `json:"threads"`
	// Epoch names this semaphore instance (see SlotTicket.Epoch); empty on a fresh start.
	Epoch string `json:"epoch,omitempty"`
	// Fence asks a fresh instance to grant nothing new for a while: an instance before it ended without handing
	// over (terminated, failed), so tasks may still hold its slots until they re-assert them.
	Fence bool `json:"fence,omitempty"`
	// FencedUntil carries a fence in force across continue-as-new.
	FencedUntil *time.Time   `json:"fenced_until,omitempty"`
	Holders     []SlotHolder `json:"holders,omitempty"`
	// Queue is read on start (requests in order) beside the packed queue; the semaphore itself carries its queue
	// packed.
	Queue []SlotRequest `json:"queue,omitempty"`
}

// PlanChange is PlanUpdate's argument: Threads is checked against the plan in force, or made the plan with Set.
type PlanChange struct {
	Threads int  `json:"threads"`
	Set     bool `json:"set,omitempty"`
}

// SlotsView is SlotsQuery's answer: what operators read (the same figures as the metrics).
type SlotsView struct {
	Threads           int     `json:"threads"`
	InUse             int     `json:"in_use"`
	Queued            int     `json:"queued"`
	OldestWaitSeconds float64 `json:"oldest_wait_seconds"`
	Epoch             string  `json:"epoch"`
	// FencedUntil is set while a fresh instance waits for the holders of the one before to re-assert their slots.
	FencedUntil *time.Time   `json:"fenced_until,omitempty"`
	Holders     []SlotHolder `json:"holders"`
	// QueueHead is the first requests in line (at most SlotsViewQueueHead).
	QueueHead []SlotRequest `json:"queue_head,omitempty"`
}

// SlotsViewQueueHead bounds SlotsView.QueueHead, so the answer stays small with any queue.
const SlotsViewQueueHead = 20

// AcquireSlot asks the task queue's semaphore for a slot for req and answers its ticket. A re-ask (req.Ticket set)
// costs no message while the semaphore instance that answered it still runs and the ticket is this run's; otherwise
// the request is sent with the requests of every AcquireSlot running on this worker (one update), starting the
// semaphore with this worker's PROVIDER_THREADS when none runs. Idempotent: the semaphore knows a request it has seen.
func (a *Activities) AcquireSlot(ctx context.Context, req SlotRequest) (SlotTicket, error) {
	if err := req.Validate(); err != nil {
		return SlotTicket{}, temporal.NewNonRetryableApplicationError(err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	info := activity.GetInfo(ctx)
	sc := a.slotClient(activity.GetClient(ctx))
	id := ThreadsWorkflowID(info.TaskQueue)
	if t := req.Ticket; t != nil && t.Semaphore == id && t.RunID == req.RunID { // a reset run asks as itself
		current, err := sc.ticketCurrent(ctx, id, t.Epoch)
		if err != nil {
			activity.GetLogger(ctx).Warn("could not tell whether the semaphore changed; asking it", "Error", err)
		}
		if current {
			return *t, nil
		}
	}
	req.Ticket = nil // the semaphore has no use for it
	return sc.acquire(ctx, info.TaskQueue, req)
}

// Validate refuses a request that names no task run.
func (r SlotRequest) Validate() error {
	switch {
	case r.WorkflowID == "":
		return errors.New("slot request: workflow_id is empty")
	case r.RunID == "":
		return errors.New("slot request: run_id is empty")
	case r.Seq < 0:
		return fmt.Errorf("slot request: seq %d is negative", r.Seq)
	}
	return nil
}

// CheckSlotHolders returns the holders whose workflow run is no longer running (terminated, timed out, reset,
// or completed without releasing): their slots are to be reclaimed. A holder it cannot describe for another
// reason is kept (the next check asks again).
func (a *Activities) CheckSlotHolders(ctx context.Context, holders []SlotHolder) ([]SlotHolder, error) {
	return checkSlotHolders(ctx, activity.GetClient(ctx), holders)
}

// resetGrace is how long the slot of a run that was reset stays counted after it closed: the reset run re-asserts it
// as its own within one re-ask interval (it replays the hold's timer), and must not find it granted to another.
const resetGrace = SlotReaskInterval + 15*time.Second

// stopped tells whether a holder's run no longer needs its slot.
func stopped(desc *client.WorkflowExecutionDescription) bool {
	if desc.Status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false
	}
	resetAway := desc.RawResponse.GetWorkflowExtendedInfo().GetResetRunId() != ""
	return !resetAway || desc.WorkflowCloseTime == nil || time.Since(*desc.WorkflowCloseTime) >= resetGrace
}

// checkParallelism bounds the DescribeWorkflow calls of one check in flight at once.
const checkParallelism = 8

func checkSlotHolders(ctx context.Context, c client.Client, holders []SlotHolder) ([]SlotHolder, error) {
	deadAt := make([]bool, len(holders))
	errs := make([]error, len(holders))
	var g errgroup.Group
	g.SetLimit(checkParallelism)
	for i, h := range holders {
		g.Go(func() error {
			desc, err := c.DescribeWorkflow(ctx, h.WorkflowID, h.RunID)
			var notFound *serviceerror.NotFound
			switch {
			case errors.As(err, &notFound):
				deadAt[i] = true
			case err != nil:
				errs[i] = err
			default:
				deadAt[i] = stopped(desc)
			}
			return nil
		})
	}
	_ = g.Wait()
	var dead []SlotHolder
	for i, h := range holders {
		if deadAt[i] {
			dead = append(dead, h)
		}
	}
	if err := errors.Join(errs...); len(dead) == 0 && err != nil {
		return nil, err
	}
	return dead, nil
}
