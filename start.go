package captchaflow

import (
	"context"
	"fmt"
	"net/url"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// StartOptions adjust Start; the zero value is right for most callers.
type StartOptions struct {
	// TaskQueue defaults to DefaultTaskQueue.
	TaskQueue string
}

// Start starts the SolveCaptcha workflow for the caller's task ID, or returns the one already running under that
// ID: a repeated start never creates a second provider task. Once the task has completed its ID cannot be started
// again (a solved task is never paid for twice); after a failure it can. The input is checked here first, so a
// bad one is refused before anything is started.
func Start(ctx context.Context, c client.Client, taskID string, in Input, opts ...StartOptions) (client.WorkflowRun, error) {
	if err := ValidateWorkflowID(taskID); err != nil {
		return nil, err
	}
	if err := in.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("invalid input: %w", err)
	}
	o := StartOptions{}
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.TaskQueue == "" {
		o.TaskQueue = DefaultTaskQueue
	}
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       taskID,
		TaskQueue:                o.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			PhaseKey.ValueSet(string(PhaseSubmitting))),
		StaticSummary: Summary(in),
	}, WorkflowType, in)
}

// Solve starts (or joins) the task and waits for its result.
func Solve(ctx context.Context, c client.Client, taskID string, in Input, opts ...StartOptions) (Result, error) {
	run, err := Start(ctx, c, taskID, in, opts...)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = run.Get(ctx, &res)
	return res, err
}

// Summary is the one-line description the Web UI lists: the method and the host of the page, nothing secret.
func Summary(in Input) string {
	s := in.Method
	if u, err := url.Parse(in.Params["pageurl"]); err == nil && u.Host != "" {
		s += " · " + u.Host
	}
	return s
}
