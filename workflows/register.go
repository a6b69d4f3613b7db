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
	r.RegisterWorkflowWithOptions(SolveCaptcha, workflow.RegisterOptions{Name: captchaflow.WorkflowType})
	registerReport(r)  // ReportVerdict
	registerBalance(r) // CheckBalance
}

// Register registers everything a SolveCaptcha worker runs: the workflow and the activities it calls, as one
// struct so they share the provider client and secrets. Every worker (the worker process, tests, the benchmark)
// registers through here, so none of them can drift from the others.
func Register(r worker.Registry, acts *activities.Activities) {
	RegisterWorkflow(r)
	r.RegisterActivity(acts)
}
