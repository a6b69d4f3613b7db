package captchaflow

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/workflow"
)

// The Nexus service other teams' workflows call through an endpoint, with no access to captchaflow's namespace.
const (
	NexusServiceName        = "captchaflow"
	NexusEndpoint           = "captchaflow"     // the endpoint's name where captchaflow's stacks create it
	OperationSolve          = "solve"           // asynchronous: SolveRequest → Result, backed by SolveCaptcha
	OperationReport         = "report"          // synchronous: ReportRequest → ReportResult, backed by SendReport
	NexusCallerWorkflowType = "SolveViaNexus"   // SolveViaNexus: the caller's side, as make run and starter --via nexus host it
	NexusMemo               = "nexus_operation" // in the memo of a task a solve operation started, so it counts its end
	// Metrics by outcome: started, completed (at once, or the task's end), cancelled, or captchaflow's failure type.
	MetricNexusOperations     = "captchaflow_nexus_operations_total"      // handled: by nexus_operation
	MetricNexusSolvesFinished = "captchaflow_nexus_solves_finished_total" // the ends of the tasks solve operations started
)

// SolveRequest is the solve operation's input: the caller's task ID (the workflow ID) and the task's Input.
type SolveRequest struct {
	TaskID string `json:"task_id"`
	Input  Input  `json:"input"`
}

// ReportRequest is the report operation's input.
type ReportRequest struct {
	TaskID  string  `json:"task_id"`
	Verdict Verdict `json:"verdict"`
}

// NexusService is the handler a worker registers (worker.RegisterNexusService); tasks start on that worker's queue.
// Given callers, it serves only workflows of those namespaces: the server lets any namespace call an endpoint.
func NexusService(callers ...string) *nexus.Service {
	svc := nexus.NewService(NexusServiceName)
	svc.MustRegister(solveOperation{temporalnexus.MustNewWorkflowRunOperationWithOptions(
		temporalnexus.WorkflowRunOperationOptions[SolveRequest, Result]{Name: OperationSolve, Handler: startSolve}), callers},
		nexus.NewSyncOperation(OperationReport, func(ctx context.Context, req ReportRequest, opts nexus.StartOperationOptions) (ReportResult, error) {
			if err := callerRefused(callers, opts.Links); err != nil {
				countOperation(ctx, nil, "refused")
				return ReportResult{}, err
			}
			return report(ctx, req, opts)
		}))
	return svc
}

// callerRefused fails an operation whose caller (in the link the server adds) is in no namespace of callers (none: all).
func callerRefused(callers []string, links []nexus.Link) error {
	if len(callers) == 0 {
		return nil
	}
	for _, l := range links {
		if we, err := temporalnexus.ConvertNexusLinkToLinkWorkflowEvent(l); err == nil {
			if slices.ContainsFunc(callers, func(c string) bool { return strings.TrimSpace(c) == we.GetNamespace() }) { // "shop, b"
				return nil
			}
			break // the first workflow link is the caller's
		}
	}
	return nexus.NewHandlerErrorf(nexus.HandlerErrorTypeUnauthorized, "this namespace may not call %s", NexusServiceName)
}

// startSolve starts or joins the task as Start does; the SDK attaches this caller's callback to a running task.
func startSolve(ctx context.Context, req SolveRequest, opts nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[Result], error) {
	o, err := taskStartOptions(req.TaskID, req.Input, []StartOptions{{TaskQueue: temporalnexus.GetOperationInfo(ctx).TaskQueue}})
	if err != nil { // non-retryable: the caller's operation fails at once, typed
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), FailureInvalidInput, nil)
	}
	o.Memo = map[string]any{NexusMemo: OperationSolve}
	return temporalnexus.ExecuteUntypedWorkflow[Result](ctx, opts, o, WorkflowType, req.Input)
}

// solveOperation answers a solved task's Result at once: a completed run cannot be joined, nor solved (paid) again.
type solveOperation struct {
	nexus.Operation[SolveRequest, Result]
	callers []string
}

// Start is the SDK's, but under a solved task's ID, where that start is refused, it answers the task's Result.
func (o solveOperation) Start(ctx context.Context, req SolveRequest, opts nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[Result], error) {
	if err := callerRefused(o.callers, opts.Links); err != nil {
		countOperation(ctx, nil, "refused") // a namespace not listed tried: the dashboard shows it
		return nil, err
	}
	r, err := o.Operation.Start(ctx, req, opts)
	if !errors.As(err, new(*serviceerror.WorkflowExecutionAlreadyStarted)) {
		countOperation(ctx, err, "started")
		return r, err
	}
	var res Result
	if err := temporalnexus.GetClient(ctx).GetWorkflow(ctx, req.TaskID, "").Get(ctx, &res); err != nil {
		return nil, err
	}
	countOperation(ctx, nil, "completed")
	return &nexus.HandlerStartOperationResultSync[Result]{Value: res}, nil
}

// countOperation counts an operation by outcome, a typed failure by its type; other errors the server retries.
func countOperation(ctx context.Context, err error, outcome string) {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		outcome = appErr.Type()
	} else if err != nil {
		return // retried: the SDK's temporal_nexus_task_execution_failed counts it
	}
	temporalnexus.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricNexusOperations).Inc(1)
}

// report sends the verdict as SendReport does; its failures are final, typed for the caller.
func report(ctx context.Context, req ReportRequest, _ nexus.StartOperationOptions) (_ ReportResult, err error) {
	defer func() { countOperation(ctx, err, "completed") }()
	if _, err := ReportWorkflowID(req.TaskID); cmp.Or(err, req.Verdict.Validate()) != nil {
		return ReportResult{}, temporal.NewNonRetryableApplicationError(cmp.Or(err, req.Verdict.Validate()).Error(), FailureInvalidInput, nil)
	}
	res, err := SendReport(ctx, temporalnexus.GetClient(ctx), req.TaskID, req.Verdict,
		StartOptions{TaskQueue: temporalnexus.GetOperationInfo(ctx).TaskQueue})
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok { // the report's typed failure is final: a retried request would fail the same way
		return res, temporal.NewNonRetryableApplicationError(appErr.Message(), appErr.Type(), appErr)
	}
	return res, err // the server's errors the SDK maps (retryable or not)
}

// NexusCall is SolveViaNexus's input: the endpoint (default NexusEndpoint) and the task.
type NexusCall struct {
	Endpoint string `json:"endpoint,omitempty"`
	SolveRequest
}

// SolveViaNexus is a caller's workflow: it solves one task through the endpoint; cancelling it cancels the task.
func SolveViaNexus(ctx workflow.Context, call NexusCall) (Result, error) {
	c := workflow.NewNexusClient(cmp.Or(call.Endpoint, NexusEndpoint), NexusServiceName)
	var res Result
	err := c.ExecuteOperation(ctx, OperationSolve, call.SolveRequest, workflow.NexusOperationOptions{}).Get(ctx, &res)
	return res, err
}
