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
	registerWorkflows(r, 0)
}

// registerWorkflows registers every workflow, SolveCaptcha bound to the worker's PROVIDER_THREADS (0: unset).
func registerWorkflows(r worker.WorkflowRegistry, threads int) {
	solve := SolveCaptcha
	if threads > 0 {
		solve = func(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
			return solveCaptcha(ctx, in, threads)
		}
	}
	r.RegisterWorkflowWithOptions(solve, workflow.RegisterOptions{Name: captchaflow.WorkflowType})
	registerReport(r)  // ReportVerdict
	registerThreads(r) // ProviderThreads
	registerBalance(r) // CheckBalance
}

// Register registers everything a SolveCaptcha worker runs: the workflow and the activities it calls, as one
// struct so they share the provider client and secrets; acts.ProviderThreads (PROVIDER_THREADS) reaches
// SolveCaptcha here. Every worker (the worker process, tests, the benchmark)
// registers through here, so none of them can drift from the others.
func Register(r worker.Registry, acts *activities.Activities) {
	registerWorkflows(r, acts.ProviderThreads)
	r.RegisterActivity(acts)
}
