package workflows

// Change IDs for workflow.GetVersion. Until 1.0 nothing runs in production, so a change needs no patch.
const (
	// changeProviderThreads is no patch: its marker records whether the task takes PROVIDER_THREADS slots (the
	// worker's setting when the task first asked), so replay on a worker with another setting agrees.
	changeProviderThreads = "provider-threads-admission"
)
