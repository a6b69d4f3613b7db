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

// ThreadsWorkflowID is the semaphore's workflow ID for a task queue: one per namespace and task queue.
func ThreadsWorkflowID(taskQueue string) string { return "captchaflow-threads:" + taskQueue }

// SlotReaskInterval is how often a queued task re-asks for its slot: the bound on recovering from a replaced
// semaphore.
const SlotReaskInterval = 30 * time.Second

// SlotRequest asks for a slot for one submission (Seq) of the task WorkflowID/RunID.
type SlotRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
	// Threads is what tasks recorded before the plan was stated per task queue sent; new tasks leave it 0.
	Threads     int       `json:"threads,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// Held re-asserts a slot this submission was granted, so a replaced semaphore learns its holders.
	Held bool `json:"held,omitempty"`
	// Ticket is the previous answer, when re-asking: nothing is sent while the semaphore that queued the request
	// still runs.
	Ticket *SlotTicket `json:"ticket,omitempty"`
}

// SlotTicket is AcquireSlot's answer.
type SlotTicket struct {
	// Semaphore is the workflow ID the release goes to.
	Semaphore string `json:"semaphore"`
	// Epoch names the semaphore instance that took the request: stable across its continue-as-new, new after it
	// was terminated, reset or started afresh.
	Epoch string `json:"epoch"`
	// Granted: the slot is held at once; no SlotGrantedSignal follows.
	Granted bool `json:"granted,omitempty"`
}

// SlotRelease gives back (or stops waiting for) the slot of submission Seq of WorkflowID/RunID.
type SlotRelease struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
}

// SlotGrant tells a task that submission Seq of run RunID holds a slot (RunID is empty in grants sent before grants
// named their run).
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
func (a *Activities) AcquireSlot(ctx context.Context, req SlotRequest) error {
	info := activity.GetInfo(ctx)
	if req.Threads == 0 {
		req.Threads = a.ProviderThreads // the plan this worker states
	}
	_, err := activity.GetClient(ctx).SignalWithStartWorkflow(ctx, ThreadsWorkflowID(info.TaskQueue), AcquireSlotSignal, req,
		client.StartWorkflowOptions{TaskQueue: info.TaskQueue}, ThreadsWorkflowType, SemaphoreState{Threads: req.Threads})
	if err != nil {
		return fmt.Errorf("asking the provider-threads semaphore for a slot: %w", err)
	}
	return nil
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
