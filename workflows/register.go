package workflows

import (
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// RegisterWorkflow registers the workflows under their contract names: a replayer takes this, a worker Register.
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
	r.RegisterWorkflowWithOptions(PaceKeeper, workflow.RegisterOptions{Name: activities.PaceWorkflowType})
}

// Register registers everything a SolveCaptcha worker runs; every worker registers here, so none can drift.
func Register(r worker.Registry, acts *activities.Activities, settings Settings) {
	registerWorkflows(r, settings)
	r.RegisterActivity(acts)
}

// BalanceCheckTimeout bounds one CheckBalance run: less than the schedule's minute, so runs never overlap.
const BalanceCheckTimeout = 50 * time.Second

// CheckBalance reads the balance once (FetchBalance records it as a gauge), started by captchaflow.BalanceScheduleID.
func CheckBalance(ctx workflow.Context) (activities.BalanceResult, error) {
	opts := withRetry(ctx, ProviderStartToClose, BalanceCheckTimeout,
		backoff(2*time.Second, 10*time.Second, activities.NonRetryableProviderErrors...))
	var res activities.BalanceResult
	err := workflow.ExecuteActivity(opts, acts.FetchBalance).Get(ctx, &res)
	return res, err
}
