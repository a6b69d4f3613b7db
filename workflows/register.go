package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// RegisterWorkflow registers SolveCaptcha under its contract name. A replayer takes only this; a worker takes
// Register.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	registerWorkflows(r, Settings{})
	r.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType}) // for the replayer
}

// registerWorkflows registers every workflow, SolveCaptcha bound to the worker's settings.
func registerWorkflows(r worker.WorkflowRegistry, settings Settings) {
	solve := func(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
		return solveCaptcha(ctx, in, settings)
	}
	r.RegisterWorkflowWithOptions(solve, workflow.RegisterOptions{Name: captchaflow.WorkflowType})
	r.RegisterWorkflowWithOptions(ReportVerdict, workflow.RegisterOptions{Name: captchaflow.ReportWorkflowType})
	r.RegisterWorkflowWithOptions(CheckBalance, workflow.RegisterOptions{Name: captchaflow.BalanceWorkflowType})
}

// Register registers everything a SolveCaptcha worker runs: the workflows bound to the worker's settings, and the
// activities as one struct so they share the provider client and secrets. Every worker (the worker process,
// tests, the benchmark) registers through here, so none of them can drift from the others.
func Register(r worker.Registry, acts *activities.Activities, settings Settings) {
	registerWorkflows(r, settings)
	r.RegisterActivity(acts)
}

// CheckBalance reads the provider account's balance once (FetchBalance records it as a gauge on its worker); the
// Schedule captchaflow.BalanceScheduleID starts it.
func CheckBalance(ctx workflow.Context) (activities.BalanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    ProviderStartToClose,
		ScheduleToCloseTimeout: BalanceCheckTimeout,
		HeartbeatTimeout:       heartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, NonRetryableErrorTypes: activities.NonRetryableProviderErrors},
	})
	var res activities.BalanceResult
	err := workflow.ExecuteActivity(ctx, activities.FetchBalanceName).Get(ctx, &res)
	return res, err
}

// BalanceCheckTimeout bounds one CheckBalance run: less than the schedule's minute, so runs never overlap.
const BalanceCheckTimeout = 50 * time.Second
