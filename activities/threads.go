package activities

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
)

// Provider thread admission (samples-go `mutex`): AcquireSlot signals-with-start the semaphore, ReleaseSlot signals.
const (
	ThreadsWorkflowType  = "ProviderThreads"
	AcquireSlotSignal    = "acquire"
	ReleaseSlotSignal    = "release"
	SlotGrantedSignal    = "slot-granted"
	SlotsQuery           = "slots"
	AcquireSlotName      = "AcquireSlot"
	ReleaseSlotName      = "ReleaseSlot"
	FailureProviderMoved = "ProviderMoved"  // Submit would go elsewhere than the slot's provider: take a slot there
	SlotReaskInterval    = 30 * time.Second // a task's wait for a grant before it asks again; spaces the holder checks
)

// ThreadsTaskQueue is where a task queue's semaphores run, so their workflow tasks do not wait behind the tasks'.
func ThreadsTaskQueue(taskQueue string) string { return taskQueue + "/threads" }

// ThreadsWorkflowID is the semaphore of a provider ("" without PROVIDERS_FILE); task IDs cannot hold a '/'.
func ThreadsWorkflowID(taskQueue, provider string) string {
	return strings.TrimSuffix("captchaflow/threads/"+taskQueue+"/"+provider, "/")
}

// SlotRequest is an ask (with the worker's plan), a grant or a release (Ungranted: never granted, so not over plan).
type SlotRequest struct {
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id"`
	Seq        int    `json:"seq"`
	Plan       int    `json:"plan,omitempty"`
	Semaphore  string `json:"semaphore,omitempty"`
	Ungranted  bool   `json:"ungranted,omitempty"`
}

// SlotAsk is AcquireSlot's input: the request, what chooses the provider as Submit would, and the previous answer.
type SlotAsk struct {
	SlotRequest
	Method    string            `json:"method"`
	Params    map[string]string `json:"params"`
	Providers []string          `json:"providers,omitempty"`
	Exclude   []string          `json:"exclude,omitempty"`
	Avoid     []string          `json:"avoid,omitempty"`
	Ticket    *SlotTicket       `json:"ticket,omitempty"`
	RouteOnly bool              `json:"route_only,omitempty"` // pick the provider, take no slot
}

// SlotTicket is AcquireSlot's answer (Semaphore "": no plan); Submit is pinned to Provider.
type SlotTicket struct {
	Semaphore string `json:"semaphore,omitempty"`
	Run       string `json:"run,omitempty"` // the semaphore run that took the ask
	Provider  string `json:"provider,omitempty"`
	RunID     string `json:"run_id"`           // the task run that asked (a run reset from it replays its grants)
	Stuck     bool   `json:"stuck,omitempty"`  // the semaphore's workflow task keeps failing
	Queue     string `json:"queue,omitempty"`  // Provider's submit queue ("": the task's own, where Submit says why none serves)
	Reason    string `json:"reason,omitempty"` // why the ranking chose Provider (captchaflow.Route*): a probe's travels with it
}

// SemaphoreState is what ProviderThreads carries across continue-as-new, and its SlotsQuery's answer.
type SemaphoreState struct {
	Plan    int           `json:"plan"`
	Holders []SlotRequest `json:"holders,omitempty"`
	Queue   []SlotRequest `json:"queue,omitempty"`
}

// PlannedThreads is the largest plan of a's providers (0: none). Not a method: those are registered as activities.
func PlannedThreads(a *Activities) (most int) {
	if a.Providers == nil {
		return a.ProviderThreads
	}
	for _, p := range a.Providers.All() {
		most = max(most, p.Threads)
	}
	return most
}

// AcquireSlot asks (starting the semaphore); a re-ask sends nothing while the run that took it runs and the ticket is ours.
func (a *Activities) AcquireSlot(ctx context.Context, ask SlotAsk) (SlotTicket, error) {
	t, k := SlotTicket{RunID: ask.RunID}, ask.Ticket
	c, tq := activity.GetClient(ctx), activity.GetInfo(ctx).TaskQueue
	if t.Provider, t.Reason, ask.Plan = a.slotOf(ask, timeLeft(ctx)); t.Provider != "" || a.Providers == nil {
		t.Queue = a.Pace.Queue(t.Provider, SubmitQueue)
	}
	if ask.Plan <= 0 || ask.RouteOnly {
		return t, nil
	}
	t.Semaphore = ThreadsWorkflowID(tq, t.Provider)
	if k != nil && k.RunID == ask.RunID {
		if desc, err := c.DescribeWorkflow(ctx, t.Semaphore, ""); err == nil && desc.Status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING &&
			desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() == k.Run {
			t.Run, t.Stuck = k.Run, desc.RawResponse.GetPendingWorkflowTask().GetAttempt() > 2
			return t, nil
		}
	}
	run, err := c.SignalWithStartWorkflow(ctx, t.Semaphore, AcquireSlotSignal, ask.SlotRequest, client.StartWorkflowOptions{
		ID: t.Semaphore, TaskQueue: ThreadsTaskQueue(tq), WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, ThreadsWorkflowType, SemaphoreState{Plan: ask.Plan})
	if err == nil {
		t.Run = run.GetRunID()
	}
	return t, err
}

// ReleaseSlot gives the slot back (a semaphore that no longer runs has nothing to give back to).
func (a *Activities) ReleaseSlot(ctx context.Context, rel SlotRequest) error {
	if err := activity.GetClient(ctx).SignalWorkflow(ctx, rel.Semaphore, "", ReleaseSlotSignal, rel); !errors.As(err, new(*serviceerror.NotFound)) {
		return err
	}
	return nil
}

// slotOf is the pinned provider, why the ranking chose it and its plan: the ticket's, or the first candidate not open.
func (a *Activities) slotOf(ask SlotAsk, left time.Duration) (provider, reason string, plan int) {
	if a.Providers == nil {
		return "", "", a.ProviderThreads
	}
	if ask.Ticket != nil {
		provider, reason = ask.Ticket.Provider, ask.Ticket.Reason
	} else if cands, route, _ := a.ranked(SubmitRequest{Method: ask.Method, Params: ask.Params, Providers: ask.Providers, Exclude: ask.Exclude,
		Avoid: ask.Avoid, RunID: ask.RunID, Submission: ask.Seq}, left, ask.WorkflowID); len(cands) > 0 {
		i := max(0, slices.IndexFunc(cands, func(p *providers.Provider) bool { return !a.Providers.Breaker.IsOpen(p.Name) }))
		if provider = cands[i].Name; route != nil && i == 0 {
			reason = route.Reason
		}
	}
	if p, ok := a.Providers.Get(provider); ok && provider != "" {
		return provider, reason, p.Threads
	}
	return provider, reason, 0
}

// movedFrom fails a pinned Submit whose provider is no candidate any more, or is open while another is not.
func movedFrom(pin string, cands []*providers.Provider, b *providers.Breaker) error {
	i := slices.IndexFunc(cands, func(p *providers.Provider) bool { return p.Name == pin })
	if i >= 0 && (!b.IsOpen(pin) || !slices.ContainsFunc(cands, func(p *providers.Provider) bool { return !b.IsOpen(p.Name) })) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError("the slot's provider "+pin+" is skipped: admitting elsewhere", FailureProviderMoved, nil)
}

// CheckSlotHolders returns the holders whose workflow runs no run or whose solve ended (one not described is kept).
func (a *Activities) CheckSlotHolders(ctx context.Context, holders []SlotRequest) (dead []SlotRequest, _ error) {
	for _, h := range holders {
		desc, err := activity.GetClient(ctx).DescribeWorkflow(ctx, h.WorkflowID, "")
		if errors.As(err, new(*serviceerror.NotFound)) || err == nil && SolveEnded(desc) {
			dead = append(dead, h)
		}
	}
	return dead, nil
}

// SolveEnded tells whether a described task's solve ended: it does not run, or it is delivering with no workflow task
// under way (a refresh asks in the workflow task that upserts queued: delivering shows until it completes).
func SolveEnded(desc *client.WorkflowExecutionDescription) bool {
	phase, _ := desc.TypedSearchAttributes.GetKeyword(captchaflow.PhaseKey)
	return desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		phase == string(captchaflow.PhaseDelivering) && desc.RawResponse.GetPendingWorkflowTask() == nil
}
