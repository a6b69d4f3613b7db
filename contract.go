// Package captchaflow is SolveCaptcha's contract and the Go way to start it: the names and JSON shapes that other
// services (in any language), the ingress and our black-box tests depend on, and Start/Solve for Go callers. It
// imports nothing else of captchaflow, so a caller links the contract and the Temporal client, never the workflow,
// the activities or the provider client. Changing any name or shape here is a breaking change for every caller.
//
//	run, err := captchaflow.Start(ctx, c, "order-42-login", captchaflow.Input{Method: "turnstile", Params: ...})
//	res, err := captchaflow.Solve(ctx, c, "order-42-login", in) // start (or join) and wait
package captchaflow

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

const (
	// WorkflowType is the registered name of the workflow.
	WorkflowType = "SolveCaptcha"
	// DefaultTaskQueue is the task queue the worker polls unless TASK_QUEUE says otherwise.
	DefaultTaskQueue = "captcha-solve"
	// CallbackSignal carries a provider callback (a Callback) into the workflow.
	CallbackSignal = "captcha-callback"
	// StatusQuery returns the workflow's Status.
	StatusQuery = "status"
	// ReportWorkflowType is the registered name of the workflow that reports a task's verdict to the provider (see
	// Report). It runs under the workflow ID ReportWorkflowID(taskID), on the same task queue.
	ReportWorkflowType = "ReportVerdict"
)

// MaxCodeBytes bounds a solved code anywhere it enters captchaflow (a callback on any route, a res.php answer): a
// real token is a few KiB, and a bigger one is refused rather than stored in workflow history.
const MaxCodeBytes = 16 << 10

// Search attributes the workflow upserts; both must be registered as Keyword on the namespace.
var (
	// TaskIDKey is the provider's task ID of the current submission, so a bare callback (id and code only) can be
	// routed to its workflow and an operator can find a task by the ID the provider shows.
	TaskIDKey = temporal.NewSearchAttributeKeyKeyword("CaptchaTaskId")
	// PhaseKey is the workflow's current Phase while it runs.
	PhaseKey = temporal.NewSearchAttributeKeyKeyword("CaptchaPhase")
	// SearchAttributeKeys are all of them, for registering and checking them on a namespace.
	SearchAttributeKeys = []temporal.SearchAttributeKeyKeyword{TaskIDKey, PhaseKey}
)

// Failure types: the temporal.ApplicationError types a failed SolveCaptcha carries, for callers to branch on.
const (
	FailureInvalidInput     = "InvalidInput"     // the input names the field; nothing was submitted
	FailureUnsolvable       = "Unsolvable"       // every submission came back unsolvable
	FailureDeadlineExceeded = "DeadlineExceeded" // no result within deadline_seconds
	FailureDeliveryFailed   = "DeliveryFailed"   // the result could not be delivered to notify_url in time; details hold it
	// FailureProviderConfig: the provider refused the request for a reason retrying cannot fix (key, parameters).
	FailureProviderConfig = "ProviderConfig"
	// FailureProviderUnknown: an answer captchaflow does not know; not retried, the provider's code is in the message.
	FailureProviderUnknown = "ProviderUnknown"
)

// Failure types of ReportVerdict (and of Report, which returns them as *temporal.ApplicationError).
const (
	// FailureVerdictConflict: the task was already reported with the other verdict; a verdict is never changed.
	// Its details hold the ReportResult of the verdict that stands.
	FailureVerdictConflict = "VerdictConflict"
	// FailureReportWindowClosed: the provider's report window (ReportWindow after the submission) has passed, or
	// the provider no longer knows the task; nothing was recorded.
	FailureReportWindowClosed = "ReportWindowClosed"
	// FailureTaskNotSolved: there is no solved task under that ID (unknown, still running, failed without a result).
	FailureTaskNotSolved = "TaskNotSolved"
	// FailureReportRefused: the provider answered that it did not record the report (ERROR_REPORT_NOT_RECORDED:
	// too many complaints on the account); repeating it will not help.
	FailureReportRefused = "ReportRefused"
)

// Phase is where a task is in its life.
type Phase string

const (
	PhaseSubmitting       Phase = "submitting"
	PhaseAwaitingCallback Phase = "awaiting_callback"
	PhasePolling          Phase = "polling"
	PhaseDelivering       Phase = "delivering"
	PhaseDone             Phase = "done"
	PhaseFailed           Phase = "failed"
)

// Via tells how the result reached us.
type Via string

const (
	ViaCallback Via = "callback"
	ViaPoll     Via = "poll"
)

// Callback is the payload of CallbackSignal.
type Callback struct {
	// ProviderTaskID is the provider's `id`; a callback for another submission is ignored.
	ProviderTaskID string `json:"provider_task_id"`
	// Code is the provider's `code`, the solved CAPTCHA.
	Code string `json:"code"`
	// Authenticated is true only when the sender proved it knows the callback secret (the tokened route). An
	// unauthenticated callback is a hint: the workflow confirms the code with res.php before accepting it.
	Authenticated bool `json:"authenticated"`
}

// Result is what the workflow returns once the code is in (and delivered, if notify_url was set).
type Result struct {
	ProviderTaskID string    `json:"provider_task_id"`
	Code           string    `json:"code"`
	Via            Via       `json:"via"`
	SubmittedAt    time.Time `json:"submitted_at"`
	ReceivedAt     time.Time `json:"received_at"`
	Submits        int       `json:"submits"`
}

// Status is the answer to StatusQuery.
type Status struct {
	Phase          Phase     `json:"phase"`
	ProviderTaskID string    `json:"provider_task_id,omitempty"`
	Submits        int       `json:"submits"`
	SubmittedAt    time.Time `json:"submitted_at,omitzero"`
}
