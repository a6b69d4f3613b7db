package workflows

import "go.temporal.io/sdk/workflow"

// Change IDs for workflow.GetVersion, one per behaviour change that adds, drops or reorders commands. Each is asked
// only where its behaviour differs, so a task that never meets the odd case records no marker; a task that met it
// before the deploy (replaying without the marker) keeps the old behaviour to its end.
const (
	// changeRefuseInvalidWorkflowID: a workflow ID the ingress would refuse fails the task up front.
	changeRefuseInvalidWorkflowID = "refuse-invalid-workflow-id"
	// changeStatusWordCallback: an authenticated callback whose code is a provider status word is not a result:
	// unsolvable means resubmit, anything else is confirmed with res.php.
	changeStatusWordCallback = "status-word-callback-not-a-result"
	// changeCountSubmitRefusals: an in.php request refused as unsolvable counts against max_submits and the next
	// one waits a growing backoff (before: no count, no wait, and a panic on the first submission).
	changeCountSubmitRefusals = "count-and-back-off-submit-refusals"
	// changeAwaitLostSubmission: a Submit whose outcome is unknown (in.php's answer lost after the request was
	// written, or the attempt timed out with its worker) is not retried at once: the task waits for an
	// authenticated callback from the submission whose ID it never learned, and submits again only without one
	// (see awaitLost and lostWaitVersion). Asked only when such a failure reaches the workflow.
	changeAwaitLostSubmission = "await-callback-of-lost-submission"
	// changeBoundConfirmations: at most maxConfirmsPerSubmission res.php confirmations per submission.
	changeBoundConfirmations = "bound-confirmations-per-submission"
	// changeIgnoreOversizedCallback: a callback whose code is over captchaflow.MaxCodeBytes is ignored.
	changeIgnoreOversizedCallback = "ignore-oversized-callback"
	// changeTokenExpiry: the delivery of a token that expires is bounded by its expires_at (schedule-to-close and
	// a denser retry schedule); still failing at expiry, the task solves again (max_refreshes) or fails
	// TokenExpired. Asked once a token with an expiry is to be delivered.
	changeTokenExpiry = "bound-delivery-by-token-expiry"
	// changePauseOnZeroBalance: in.php's ERROR_ZERO_BALANCE reaches the workflow (the Submit retry policy no longer
	// retries it), which waits the paced minute in PhaseAwaitingBalance, saying why, and submits again (not counted
	// against max_submits) until the balance is back or the deadline runs out. Asked only when such a failure
	// reaches the workflow: a history recorded before it holds none (the server retried them).
	changePauseOnZeroBalance = "pause-submissions-on-zero-balance"
	// changeProviderThreads: each submission queues for a PROVIDER_THREADS slot (AcquireSlot, then the semaphore's
	// grant) and releases it when it resolves. Asked only by a worker with PROVIDER_THREADS set, or on replay (see
	// slotsVersion).
	changeProviderThreads = "provider-threads-admission"
	// changeTakeLateLostAnswer: the answer of a submission whose in.php answer was lost is taken when it comes after
	// the wait for it ended (while the task queues, backs off, pauses or waits for a later submission). Asked only
	// when such an answer arrives.
	changeTakeLateLostAnswer = "take-late-lost-answer"
	// changeResearchBalancePause: a zero-balance pause that follows another searchable phase (a lost answer's wait
	// between two zero-balance answers) upserts CaptchaPhase again, so search says what the status says. Asked only
	// then.
	changeResearchBalancePause = "research-balance-pause"
	// changeNamedPingbackURLs: pingback URLs name the run and the submission, so an authenticated callback whose URL
	// names neither comes from an earlier run. Asked only when such a callback arrives before any Submit result told
	// the task how its URLs look (every in.php answer so far lost).
	changeNamedPingbackURLs = "named-pingback-urls"
)

// changed tells whether this task runs with changeID's new behaviour.
func changed(ctx workflow.Context, changeID string) bool {
	return workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, 1) == 1
}
