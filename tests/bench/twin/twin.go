// Package twin is the benchmark's bare limit: a workflow with the shape of SolveCaptcha's callback path and none
// of its I/O. It runs on its own task queue against the same Temporal server as captchaflow, in the same benchmark
// run, so that captchaflow's figures can be given as ratios to it rather than as absolute times that drift with
// the load of a shared machine.
//
// The shape, step for step as workflows.SolveCaptcha does it when the callback arrives in time:
//
//  1. one activity (Submit) that returns at once; while it runs it sends the workflow its signal, as the provider
//     sends its pingback while (or right after) in.php answers;
//  2. if the signal already overtook the activity's result, no timer is started at all;
//  3. otherwise the callback timer is started and the workflow waits for the signal or the timer;
//  4. on the signal it completes at once, leaving the timer pending (SolveCaptcha cancels it only when more work
//     follows, i.e. a delivery to notify_url, which the throughput runs do not use).
//
// What it leaves out is what captchaflow adds on top: the provider's HTTP round trips, the ingress hop, the
// search attributes set at start and upserted when waiting, payload size.
package twin

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const (
	// WorkflowType and ActivityType are the registered names.
	WorkflowType = "BenchTwin"
	ActivityType = "BenchTwinSubmit"
	// Signal is the twin's callback signal.
	Signal = "twin-callback"
	// signalTimeout bounds one SignalWorkflow call, like the ingress's INGRESS_SIGNAL_TIMEOUT.
	signalTimeout = 5 * time.Second
)

// Input is the twin's input.
type Input struct {
	// CallbackTimeoutSeconds is the timer's duration; use SolveCaptcha's.
	CallbackTimeoutSeconds int `json:"callback_timeout_seconds"`
	// SignalDelayMS delays the signal after the activity started, as a provider's solve time delays its pingback
	// (0: at once, like the simulator's instant solves).
	SignalDelayMS int `json:"signal_delay_ms,omitempty"`
}

// Result tells how the twin finished.
type Result struct {
	Code string `json:"code"`
	// Overtook is true when the signal was in before the activity's result, so no timer was started.
	Overtook bool `json:"overtook"`
}

// Workflow is the twin. It fails when the timer fires first: in the benchmark that means a lost signal.
func Workflow(ctx workflow.Context, in Input) (Result, error) {
	signals := workflow.GetSignalChannel(ctx, Signal)
	actCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 45 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2},
	})
	var taskID string
	if err := workflow.ExecuteActivity(actCtx, ActivityType, in.SignalDelayMS).Get(ctx, &taskID); err != nil {
		return Result{}, err
	}
	var code string
	if signals.ReceiveAsync(&code) {
		return Result{Code: code, Overtook: true}, nil
	}
	// SolveCaptcha starts its timer under a cancellable context; no history event depends on that.
	timerCtx, _ := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(timerCtx, time.Duration(in.CallbackTimeoutSeconds)*time.Second)
	timedOut := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &code) })
	sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
	sel.Select(ctx)
	if timedOut {
		return Result{}, temporal.NewNonRetryableApplicationError("no signal before the timer fired", "SignalLost", nil)
	}
	return Result{Code: code}, nil
}

// Activities is the twin's activity; it needs a client to signal with (its own connection, as the ingress has).
type Activities struct {
	Signaller client.Client

	mu   sync.Mutex
	sent map[string]time.Time
	errs int
}

// Submit returns at once after starting the signal to its workflow in the background, delayMS later.
func (a *Activities) Submit(ctx context.Context, delayMS int) (string, error) {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	go a.signal(id, time.Duration(delayMS)*time.Millisecond)
	return "twin-task", nil
}

func (a *Activities) signal(workflowID string, delay time.Duration) {
	if delay > 0 {
		time.Sleep(delay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	at := time.Now()
	err := a.Signaller.SignalWorkflow(ctx, workflowID, "", Signal, "twin-code")
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs++
		return
	}
	if a.sent == nil {
		a.sent = map[string]time.Time{}
	}
	if _, dup := a.sent[workflowID]; !dup { // a retried activity signals again; the first one counts
		a.sent[workflowID] = at
	}
}

// SignalSentAt is when the signal to workflowID was sent (the counterpart of the provider's pingback time).
func (a *Activities) SignalSentAt(workflowID string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.sent[workflowID]
	return t, ok
}

// SignalErrors counts SignalWorkflow calls that failed.
func (a *Activities) SignalErrors() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.errs
}

// Forget drops the recorded signal times (between runs, to bound memory).
func (a *Activities) Forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = nil
}

// NewWorker registers the twin on taskQueue. opts should be the options captchaflow's worker runs with, so that
// only the workflow differs.
func NewWorker(c client.Client, taskQueue string, acts *Activities, opts worker.Options) (worker.Worker, error) {
	if acts == nil || acts.Signaller == nil {
		return nil, errors.New("twin: Activities need a Signaller client")
	}
	w := worker.New(c, taskQueue, opts)
	w.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowType})
	w.RegisterActivityWithOptions(acts.Submit, activity.RegisterOptions{Name: ActivityType})
	return w, nil
}
