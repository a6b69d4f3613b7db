package captchaflow

import (
	"context"
	"fmt"
	"net/url"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// StartOptions adjust Start; the zero value is right for most callers.
type StartOptions struct {
	TaskQueue string // default DefaultTaskQueue
}

// Start starts SolveCaptcha under the caller's task ID, or returns the run there (a failed task starts again, a completed
// one not); a bad input starts nothing. With the SDK's tracing interceptor on c, the task's trace is ctx's.
// Dial c with codec.Configure's options (CAPTCHAFLOW_KEYS_FILE), or the input is written to history in plaintext.
func Start(ctx context.Context, c client.Client, taskID string, in Input, opts ...StartOptions) (client.WorkflowRun, error) {
	o, err := taskStartOptions(taskID, in, opts)
	if err != nil {
		return nil, err
	}
	return c.ExecuteWorkflow(ctx, o, WorkflowType, in)
}

// taskStartOptions checks the task ID and input and returns the options every start of a task uses (Start, Nexus).
func taskStartOptions(taskID string, in Input, opts []StartOptions) (client.StartWorkflowOptions, error) {
	if err := ValidateWorkflowID(taskID); err != nil {
		return client.StartWorkflowOptions{}, err
	}
	if err := in.WithDefaults().Validate(); err != nil {
		return client.StartWorkflowOptions{}, fmt.Errorf("invalid input: %w", err)
	}
	summary := in.Method // the Web UI's line: the method and the page's host, nothing secret
	if u, err := url.Parse(in.Params["pageurl"]); err == nil && u.Host != "" {
		summary += " · " + u.Host
	}
	o := startOptions(taskID, summary, opts)
	o.TypedSearchAttributes = temporal.NewSearchAttributes(PhaseKey.ValueSet(string(PhaseSubmitting)))
	return o, nil
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
