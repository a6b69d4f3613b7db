package workflows

// Change IDs for workflow.GetVersion: from v1.0.0 on, a change that alters the commands of a running task needs one,
// removed once no build that needs it can still have tasks running (docs/operations.md).
const (
	// changeProviderThreads is no patch and never retires: its marker records whether the task takes slots (the
	// worker's plan when the task first asked), so replay on a worker with another plan agrees.
	changeProviderThreads = "provider-threads-admission"
)
