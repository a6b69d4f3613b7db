package workflows

// Change IDs for workflow.GetVersion. Until 1.0 nothing runs in production, so a change needs none; the one left
// goes with the admission's redesign.
const (
	// changeProviderThreads: each submission queues for a PROVIDER_THREADS slot (AcquireSlot, then the semaphore's
	// grant) and releases it when it resolves. Asked only by a worker with PROVIDER_THREADS set, or on replay (see
	// slotsVersion).
	changeProviderThreads = "provider-threads-admission"
)
