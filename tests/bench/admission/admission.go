// Package admission measures the provider-threads semaphore alone: a probe workflow takes slots the way SolveCaptcha
// does (the task side of the slot protocol: AcquireSlot, the grant, re-asks every SlotReaskInterval, re-assertions
// while holding, the release) with no provider behind it, so that admissions per second, the history each costs and
// recovery from a replaced semaphore can be read without the rest of a task. Three designs of the ask are offered
// for comparison: the product's batched acquire update, one update per request, and the acquire signal.
package admission

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/workflows"
)

// ProbeWorkflowType is the probe's registered name.
const ProbeWorkflowType = "BenchAdmissionProbe"

// Design names how a probe asks.
type Design string

const (
	// Batched is the product: activities.AcquireSlot, every ask of the moment on a worker in one update.
	Batched Design = "batched-update"
	// BatchedLocal is the same activity run as a local activity by the requester (one marker, no activity task).
	BatchedLocal Design = "batched-update-local"
	// Single sends one acquire update per request.
	Single Design = "update-per-request"
	// Signal sends the acquire signal and always waits for a grant signal.
	Signal Design = "signal"
)

// Designs are the designs the benchmark compares, the recommended one first: the product's batched update, asked
// from a local activity.
var Designs = []Design{BatchedLocal, Batched, Single, Signal}

// ProbeInput is a probe's work: Admissions slots, one after the other, each held Hold.
type ProbeInput struct {
	Admissions int           `json:"admissions"`
	Hold       time.Duration `json:"hold"`
	Design     Design        `json:"design"`
	// SlotQueue is the task queue whose semaphore to use (its workers run AcquireSlot); empty: the probe's own.
	SlotQueue string `json:"slot_queue,omitempty"`
}

// Hold is one slot as the probe had it.
type Hold struct {
	// GrantedInAnswer: AcquireSlot's answer held the slot (no grant signal).
	GrantedInAnswer bool      `json:"granted_in_answer,omitempty"`
	Asked           time.Time `json:"asked"`
	Granted         time.Time `json:"granted"`
	Released        time.Time `json:"released"`
	Epoch           string    `json:"epoch"`
}

// ProbeResult is what a probe saw.
type ProbeResult struct {
	Holds []Hold `json:"holds"`
	// Reasks counts asks repeated after SlotReaskInterval without a grant; Reregistered those answered by another
	// semaphore instance than the one before (a replacement).
	Reasks       int `json:"reasks"`
	Reregistered int `json:"reregistered"`
	// Stray counts grants that answered no request of this probe's (released back).
	Stray int `json:"stray"`
}

// Register puts on w what the probes need: the product's workflows and activities (the semaphore, AcquireSlot,
// CheckSlotHolders; acts.ProviderThreads is the plan of a semaphore they start), the probe and the other designs'
// asks.
func Register(w worker.Worker, acts *activities.Activities, c client.Client) {
	workflows.Register(w, acts, workflows.Settings{ProviderThreads: acts.ProviderThreads})
	w.RegisterWorkflowWithOptions(Probe, workflow.RegisterOptions{Name: ProbeWorkflowType})
	a := &asks{c: c}
	w.RegisterActivityWithOptions(a.AcquireSingle, activity.RegisterOptions{Name: string(Single)})
	w.RegisterActivityWithOptions(a.AcquireBySignal, activity.RegisterOptions{Name: string(Signal)})
}

// asks are the compared designs' AcquireSlot.
type asks struct{ c client.Client }

// AcquireSingle asks with an update of its own (the semaphore is started beforehand).
func (a *asks) AcquireSingle(ctx context.Context, req activities.SlotRequest) (activities.SlotTicket, error) {
	req.Ticket = nil
	h, err := a.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: activities.ThreadsWorkflowID(activity.GetInfo(ctx).TaskQueue), UpdateName: activities.AcquireSlotsUpdate,
		Args: []any{[]activities.SlotRequest{req}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return activities.SlotTicket{}, err
	}
	var tickets []activities.SlotTicket
	if err := h.Get(ctx, &tickets); err != nil {
		return activities.SlotTicket{}, err
	}
	return tickets[0], nil
}

// AcquireBySignal queues the request by signal; the grant always comes by signal (the semaphore is started
// beforehand).
func (a *asks) AcquireBySignal(ctx context.Context, req activities.SlotRequest) (activities.SlotTicket, error) {
	req.Ticket = nil
	id := activities.ThreadsWorkflowID(activity.GetInfo(ctx).TaskQueue)
	if err := a.c.SignalWorkflow(ctx, id, "", activities.AcquireSlotSignal, req); err != nil {
		return activities.SlotTicket{}, err
	}
	return activities.SlotTicket{Semaphore: id}, nil
}

// Probe takes in.Admissions slots one after the other.
func Probe(ctx workflow.Context, in ProbeInput) (ProbeResult, error) {
	p := &probe{in: in, grants: workflow.GetSignalChannel(ctx, activities.SlotGrantedSignal)}
	info := workflow.GetInfo(ctx)
	p.self = activities.SlotRequest{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 5 * time.Second}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.SlotQueue,
		StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: retry})
	for seq := 1; seq <= in.Admissions; seq++ {
		if err := p.admit(ctx, seq); err != nil {
			return p.res, err
		}
	}
	return p.res, nil
}
