package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"
)

// Provider thread admission, in the shape of samples-go `mutex`: one ProviderThreads workflow per task queue and
// provider counts the slots; a task asks with AcquireSlot (signal-with-start, from a local activity), is granted
// by the SlotGrantedSignal and gives the slot back with the ReleaseSlotSignal.
const (
	ThreadsWorkflowType = "ProviderThreads"
	AcquireSlotSignal   = "acquire"
	ReleaseSlotSignal   = "release"
	SlotGrantedSignal   = "slot-granted"
	SlotsQuery          = "slots"
	AcquireSlotName     = "AcquireSlot"
	ReleaseSlotName     = "ReleaseSlot"
)

// SlotReaskInterval bounds a task's wait for a grant before it asks again (a lost or replaced semaphore), and
// spaces a holder's re-assertions and the semaphore's checks for holders that ended.
const SlotReaskInterval = 30 * time.Second

// ThreadsTaskQueue is where a task queue's semaphores run: their workflow tasks, on the path of every slot
// handed on, do not wait behind the tasks'.
func ThreadsTaskQueue(taskQueue string) string { return taskQueue + "/threads" }

// ThreadsWorkflowID is the semaphore of a task queue's provider ("" for the one provider without PROVIDERS_FILE).
// The '/' is refused in task IDs (captchaflow.ValidateWorkflowID), so no task can take it.
func ThreadsWorkflowID(taskQueue, provider string) string {
	if provider == "" {
		return "captchaflow/threads/" + taskQueue
	}
	return "captchaflow/threads/" + taskQueue + "/" + provider
}

// SlotRequest names submission Seq of the task run WorkflowID/RunID: an ask, a release, a holder.
type SlotRequest struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
	// Plan is the provider's threads as the asking worker knows them: the latest ask sets the semaphore's plan.
	Plan int `json:"plan,omitempty"`
	// Held re-asserts a granted slot: a replaced semaphore counts it, even above the plan.
	Held bool `json:"held,omitempty"`
}

// SlotAsk is AcquireSlot's input: the request and what chooses the provider (as Submit will).
type SlotAsk struct {
	SlotRequest
	Method    string            `json:"method"`
	Params    map[string]string `json:"params"`
	Providers []string          `json:"providers,omitempty"`
	Exclude   []string          `json:"exclude,omitempty"`
	Avoid     []string          `json:"avoid,omitempty"`
	// Ticket is the previous answer when re-asking: the same semaphore, nothing sent while its run is current
	// and the ticket is this task run's.
	Ticket *SlotTicket `json:"ticket,omitempty"`
}

// SlotTicket is AcquireSlot's answer. Semaphore is empty when the provider has no plan: no slot to wait for.
type SlotTicket struct {
	Semaphore string `json:"semaphore,omitempty"`
	Run       string `json:"run,omitempty"` // the semaphore run that took the ask
	Provider  string `json:"provider,omitempty"`
	RunID     string `json:"run_id"` // the task run that asked: a run reset from it replays its grants
	// Stuck: the semaphore's workflow task keeps failing, so no grant will come; the task submits without one.
	Stuck bool `json:"stuck,omitempty"`
}

// SlotRelease is ReleaseSlot's input: the request whose slot Semaphore gets back.
type SlotRelease struct {
	SlotRequest
	Semaphore string `json:"semaphore"`
}

// SlotGrant tells run RunID that its submission Seq holds a slot of Semaphore.
type SlotGrant struct {
	Seq       int    `json:"seq"`
	RunID     string `json:"run_id"`
	Semaphore string `json:"semaphore"`
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

// PlannedThreads is 0 when no provider of a's worker has a plan, else the largest (the workflow's setting). Not a
// method: every method of Activities is registered as an activity.
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

// AcquireSlot chooses the provider Submit will use (the first usable candidate) and asks its semaphore for the
// slot, starting it when none runs. A re-ask whose semaphore run still runs sends nothing.
func (a *Activities) AcquireSlot(ctx context.Context, ask SlotAsk) (SlotTicket, error) {
	t := SlotTicket{RunID: ask.RunID}
	if ask.Ticket != nil {
		t.Provider = ask.Ticket.Provider
	} else {
		t.Provider = a.chooseProvider(ask)
	}
	if ask.Plan = a.planOf(t.Provider); ask.Plan <= 0 {
		return t, nil
	}
	c, tq := activity.GetClient(ctx), activity.GetInfo(ctx).TaskQueue
	t.Semaphore = ThreadsWorkflowID(tq, t.Provider)
	if k := ask.Ticket; k != nil && k.RunID == ask.RunID { // a reset run asks as itself
		if current, stuck := runs(ctx, c, t.Semaphore, k.Run); current {
			t.Run, t.Stuck = k.Run, stuck
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

// ReleaseSlot gives the slot back. A local activity, so that a task releasing as it completes costs no further
// workflow task; a semaphore that no longer runs has nothing to give back to.
func (a *Activities) ReleaseSlot(ctx context.Context, rel SlotRelease) error {
	err := activity.GetClient(ctx).SignalWorkflow(ctx, rel.Semaphore, "", ReleaseSlotSignal, rel.SlotRequest)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	return err
}

// chooseProvider is the first candidate that serves the method with its circuit not open ("" without
// PROVIDERS_FILE): the one submitRouted will try first.
func (a *Activities) chooseProvider(ask SlotAsk) string {
	if a.Providers == nil {
		return ""
	}
	cands, _ := supported(a.Providers.Candidates(ask.Providers, ask.Exclude, ask.Avoid),
		SubmitRequest{Method: ask.Method, Params: ask.Params})
	for _, p := range cands {
		if !a.Providers.Breaker.IsOpen(p.Name) {
			return p.Name
		}
	}
	return ""
}

func (a *Activities) planOf(provider string) int {
	if a.Providers == nil {
		return a.ProviderThreads
	}
	if p, ok := a.Providers.Get(provider); ok {
		return p.Threads
	}
	return 0
}

// runs tells whether run is the running run of workflow id, and whether its workflow task has failed twice or more.
func runs(ctx context.Context, c client.Client, id, run string) (current, stuck bool) {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil || desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() != run {
		return false, false
	}
	return true, desc.RawResponse.GetPendingWorkflowTask().GetAttempt() > 2
}

// CheckSlotHolders returns the holders whose task has no running run: a run reset from a holder runs under its
// workflow ID and keeps the slot. A holder it cannot describe is kept (the next check asks again).
func (a *Activities) CheckSlotHolders(ctx context.Context, holders []SlotRequest) ([]SlotRequest, error) {
	c := activity.GetClient(ctx)
	dead := make([]bool, len(holders))
	var g errgroup.Group
	g.SetLimit(8)
	for i, h := range holders {
		g.Go(func() error {
			desc, err := c.DescribeWorkflow(ctx, h.WorkflowID, "")
			var notFound *serviceerror.NotFound
			dead[i] = errors.As(err, &notFound) || (err == nil && desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING)
			return nil
		})
	}
	_ = g.Wait()
	var out []SlotRequest
	for i, h := range holders {
		if dead[i] {
			out = append(out, h)
		}
	}
	return out, nil
}
