package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
)

// Provider thread admission, in the shape of samples-go `mutex`: a ProviderThreads workflow per task queue and
// provider counts the slots; a task asks by signal-with-start (AcquireSlot), is granted by the SlotGrantedSignal
// and gives the slot back with the ReleaseSlotSignal (ReleaseSlot).
const (
	ThreadsWorkflowType = "ProviderThreads"
	AcquireSlotSignal   = "acquire"
	ReleaseSlotSignal   = "release"
	SlotGrantedSignal   = "slot-granted"
	SlotsQuery          = "slots"
	AcquireSlotName     = "AcquireSlot"
	ReleaseSlotName     = "ReleaseSlot"
)

// SlotReaskInterval bounds a task's wait for a grant before it asks again, and spaces the semaphore's holder checks.
const SlotReaskInterval = 30 * time.Second

// ThreadsTaskQueue is where a task queue's semaphores run, so that their workflow tasks (on the path of every slot
// handed on) do not wait behind the tasks'.
func ThreadsTaskQueue(taskQueue string) string { return taskQueue + "/threads" }

// ThreadsWorkflowID is the semaphore of a provider ("" without PROVIDERS_FILE); task IDs cannot hold a '/'.
func ThreadsWorkflowID(taskQueue, provider string) string {
	if provider == "" {
		return "captchaflow/threads/" + taskQueue
	}
	return "captchaflow/threads/" + taskQueue + "/" + provider
}

// SlotRequest names submission Seq of the task run WorkflowID/RunID: an ask (carrying the asking worker's plan), a
// grant or a release (naming its semaphore).
type SlotRequest struct {
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
	Plan       int    `json:"plan,omitempty"`
	Semaphore  string `json:"semaphore,omitempty"`
}

type (
	SlotGrant   = SlotRequest
	SlotRelease = SlotRequest
)

// SlotAsk is AcquireSlot's input: the request, what chooses the provider as Submit will, and the previous answer.
type SlotAsk struct {
	SlotRequest
	Method    string            `json:"method"`
	Params    map[string]string `json:"params"`
	Providers []string          `json:"providers,omitempty"`
	Exclude   []string          `json:"exclude,omitempty"`
	Avoid     []string          `json:"avoid,omitempty"`
	Ticket    *SlotTicket       `json:"ticket,omitempty"`
}

// SlotTicket is AcquireSlot's answer (Semaphore empty: the provider has no plan). RunID is the task run that asked:
// a run reset from it replays its grants. Stuck: the semaphore's workflow task keeps failing, no grant will come.
type SlotTicket struct {
	Semaphore string `json:"semaphore,omitempty"`
	Run       string `json:"run,omitempty"` // the semaphore run that took the ask
	Provider  string `json:"provider,omitempty"`
	RunID     string `json:"run_id"`
	Stuck     bool   `json:"stuck,omitempty"`
}

// SemaphoreState is what ProviderThreads carries across continue-as-new.
type SemaphoreState struct {
	Plan    int           `json:"plan"`
	Holders []SlotRequest `json:"holders,omitempty"`
	Queue   []SlotRequest `json:"queue,omitempty"`
}

// SlotsView answers SlotsQuery.
type SlotsView struct {
	Plan    int           `json:"plan"`
	InUse   int           `json:"in_use"`
	Queued  int           `json:"queued"`
	Holders []SlotRequest `json:"holders"`
}

// PlannedThreads is the largest plan of a's providers (0: none). Not a method: those are registered as activities.
func PlannedThreads(a *Activities) int {
	if a.Providers == nil {
		return a.ProviderThreads
	}
	most := 0
	for _, p := range a.Providers.All() {
		most = max(most, p.Threads)
	}
	return most
}

// AcquireSlot asks the chosen provider's semaphore for the slot, starting it when none runs. A re-ask sends nothing
// while the semaphore run that took the ask still runs and the ticket is this task run's (a reset run asks anew).
func (a *Activities) AcquireSlot(ctx context.Context, ask SlotAsk) (SlotTicket, error) {
	t := SlotTicket{RunID: ask.RunID}
	if k := ask.Ticket; k != nil {
		t.Provider = k.Provider
	} else {
		t.Provider = a.chooseProvider(ask)
	}
	if ask.Plan = a.planOf(t.Provider); ask.Plan <= 0 {
		return t, nil
	}
	c, tq := activity.GetClient(ctx), activity.GetInfo(ctx).TaskQueue
	t.Semaphore = ThreadsWorkflowID(tq, t.Provider)
	if k := ask.Ticket; k != nil && k.RunID == ask.RunID {
		if desc, err := c.DescribeWorkflow(ctx, t.Semaphore, ""); err == nil && desc.Status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING &&
			desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() == k.Run {
			t.Run, t.Stuck = k.Run, desc.RawResponse.GetPendingWorkflowTask().GetAttempt() > 2
			return t, nil
		}
	}
	run, err := c.SignalWithStartWorkflow(ctx, t.Semaphore, AcquireSlotSignal, ask.SlotRequest, client.StartWorkflowOptions{
		ID: t.Semaphore, TaskQueue: ThreadsTaskQueue(tq), WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, ThreadsWorkflowType, SemaphoreState{Plan: ask.Plan})
	if err != nil {
		return SlotTicket{}, err
	}
	t.Run = run.GetRunID()
	return t, nil
}

// ReleaseSlot gives the slot back: a local activity, so that a task releasing as it completes needs no further
// workflow task. A semaphore that no longer runs has nothing to give back to.
func (a *Activities) ReleaseSlot(ctx context.Context, rel SlotRelease) error {
	err := activity.GetClient(ctx).SignalWorkflow(ctx, rel.Semaphore, "", ReleaseSlotSignal, rel)
	if notFound := (*serviceerror.NotFound)(nil); errors.As(err, &notFound) {
		return nil
	}
	return err
}

// chooseProvider is the candidate submitRouted tries first: it serves the method and its circuit is not open.
func (a *Activities) chooseProvider(ask SlotAsk) string {
	if a.Providers == nil {
		return ""
	}
	cands, _ := supported(a.Providers.Candidates(ask.Providers, ask.Exclude, ask.Avoid), SubmitRequest{Method: ask.Method, Params: ask.Params})
	for _, p := range cands {
		if !a.Providers.Breaker.IsOpen(p.Name) {
			return p.Name
		}
	}
	if len(cands) > 0 { // every circuit open: Submit waits for the first, so its plan is the one to hold
		return cands[0].Name
	}
	return ""
}

func (a *Activities) planOf(provider string) int {
	if a.Providers == nil {
		return a.ProviderThreads
	}
	if p, ok := a.Providers.Get(provider); ok && provider != "" { // "": no candidate serves the task, no plan to take
		return p.Threads
	}
	return 0
}

// CheckSlotHolders returns the holders whose workflow ID has no running run (a reset run keeps its slot); one it
// cannot describe is kept until the next check.
func (a *Activities) CheckSlotHolders(ctx context.Context, holders []SlotRequest) ([]SlotRequest, error) {
	var dead []SlotRequest
	for _, h := range holders {
		desc, err := activity.GetClient(ctx).DescribeWorkflow(ctx, h.WorkflowID, "")
		if notFound := (*serviceerror.NotFound)(nil); errors.As(err, &notFound) || (err == nil && desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING) {
			dead = append(dead, h)
		}
	}
	return dead, nil
}
