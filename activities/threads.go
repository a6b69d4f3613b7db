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
)

// Provider thread admission (PROVIDER_THREADS): one ProviderThreads workflow per namespace and task queue hands
// out the slots; a SolveCaptcha task asks for one with AcquireSlot, is granted it by the SlotGrantedSignal and gives
// it back with the ReleaseSlotSignal. The names and shapes live here because AcquireSlot starts the workflow.
const (
	// ThreadsWorkflowType is the registered name of the semaphore workflow.
	ThreadsWorkflowType = "ProviderThreads"
	// AcquireSlotSignal (a SlotRequest) queues a task for a slot; ReleaseSlotSignal (a SlotRelease) gives a slot
	// back or leaves the queue; SlotGrantedSignal (a SlotGrant) tells the task its turn has come.
	AcquireSlotSignal = "acquire"
	ReleaseSlotSignal = "release"
	SlotGrantedSignal = "slot-granted"
	// SlotsQuery answers the semaphore's SemaphoreState.
	SlotsQuery = "slots"

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

// SemaphoreState is the semaphore's whole state, carried across continue-as-new and answered by SlotsQuery.
type SemaphoreState struct {
	Threads int           `json:"threads"`
	Holders []SlotHolder  `json:"holders,omitempty"`
	Queue   []SlotRequest `json:"queue,omitempty"`
}

// AcquireSlot queues req on the task queue's semaphore, starting the semaphore if it is not running
// (signal-with-start). A retry after a lost answer sends the request again; the semaphore ignores a duplicate.
func (a *Activities) AcquireSlot(ctx context.Context, req SlotRequest) (SlotTicket, error) {
	info := activity.GetInfo(ctx)
	id := ThreadsWorkflowID(info.TaskQueue)
	_, err := activity.GetClient(ctx).SignalWithStartWorkflow(ctx, id, AcquireSlotSignal, req,
		client.StartWorkflowOptions{TaskQueue: info.TaskQueue}, ThreadsWorkflowType, SemaphoreState{Threads: req.Threads})
	if err != nil {
		return SlotTicket{}, fmt.Errorf("asking the provider-threads semaphore for a slot: %w", err)
	}
	return SlotTicket{Semaphore: id}, nil
}

// CheckSlotHolders returns the holders whose workflow run is no longer running (terminated, timed out, reset,
// or completed without releasing): their slots are to be reclaimed. A holder it cannot describe for another
// reason is kept (the next check asks again).
func (a *Activities) CheckSlotHolders(ctx context.Context, holders []SlotHolder) ([]SlotHolder, error) {
	return checkSlotHolders(ctx, activity.GetClient(ctx), holders)
}

func checkSlotHolders(ctx context.Context, c client.Client, holders []SlotHolder) ([]SlotHolder, error) {
	var dead []SlotHolder
	var errs []error
	for _, h := range holders {
		desc, err := c.DescribeWorkflow(ctx, h.WorkflowID, h.RunID)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			dead = append(dead, h)
		case err != nil:
			errs = append(errs, err)
		case desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
			dead = append(dead, h)
		}
	}
	if len(dead) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return dead, nil
}
