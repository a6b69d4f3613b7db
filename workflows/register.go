package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// RegisterWorkflow registers SolveCaptcha under its contract name. A replayer takes only this; a worker takes
// Register.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	registerWorkflows(r, Settings{})
}

// registerWorkflows registers every workflow, SolveCaptcha bound to the worker's settings.
func registerWorkflows(r worker.WorkflowRegistry, settings Settings) {
	solve := func(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
		return solveCaptcha(ctx, in, settings)
	}
	r.RegisterWorkflowWithOptions(solve, workflow.RegisterOptions{Name: captchaflow.WorkflowType})
	registerReport(r)  // ReportVerdict
	registerThreads(r) // ProviderThreads
	registerBalance(r) // CheckBalance
}

// Register registers everything a SolveCaptcha worker runs: the workflows bound to the worker's settings, and the
// activities as one struct so they share the provider client and secrets. Every worker (the worker process,
// tests, the benchmark) registers through here, so none of them can drift from the others.
func Register(r worker.Registry, acts *activities.Activities, settings Settings) {
	registerWorkflows(r, settings)
	r.RegisterActivity(acts)
}
