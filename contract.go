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
	// UntokenedUpdate carries an untokened callback into the workflow as an UntokenedHint: an Update, not a signal,
	// so that the workflow's validator can refuse it without a history event. The ingress sends it; a workflow that
	// does not know it (an older worker) gets the CallbackSignal instead.
	UntokenedUpdate = "captcha-untokened-callback"
	// StatusQuery returns the workflow's Status.
	StatusQuery = "status"
	// ReportWorkflowType is the registered name of the workflow that reports a task's verdict to the provider (see
	// Report). It runs under the workflow ID ReportWorkflowID(taskID), on the same task queue.
	ReportWorkflowType = "ReportVerdict"
	// BalanceWorkflowType is the registered name of the workflow that reads the provider account's balance
	// (res.php?action=getbalance) and records it as a gauge on the worker that ran it. The worker runs it from the
	// Schedule BalanceScheduleID, at most once per PROVIDER_BALANCE_INTERVAL (default a minute) per namespace.
	BalanceWorkflowType = "CheckBalance"
	// BalanceScheduleID is the Temporal Schedule each worker creates (or updates) at start to run
	// BalanceWorkflowType; one per namespace, overlap policy skip.
	BalanceScheduleID = "captchaflow-balance"
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
	// ProviderKey is the provider (its PROVIDERS_FILE name) of the current submission; set only on a worker with
	// PROVIDERS_FILE, which alone requires it on the namespace.
	ProviderKey = temporal.NewSearchAttributeKeyKeyword("CaptchaProvider")
	// SearchAttributeKeys are all of them, for registering them on a namespace.
	SearchAttributeKeys = []temporal.SearchAttributeKeyKeyword{TaskIDKey, PhaseKey, ProviderKey}
	// BaseSearchAttributeKeys are the ones every worker needs; RoutingSearchAttributeKeys those a worker with
	// PROVIDERS_FILE needs besides.
	BaseSearchAttributeKeys    = []temporal.SearchAttributeKeyKeyword{TaskIDKey, PhaseKey}
	RoutingSearchAttributeKeys = []temporal.SearchAttributeKeyKeyword{ProviderKey}
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
	// FailureTokenExpired: delivery to notify_url kept failing until the token expired, and max_refreshes fresh
	// solves did not get a token through either; nothing expired was delivered. Its details hold the last Result.
	FailureTokenExpired = "TokenExpired"
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
	// PhaseQueued: waiting for one of the PROVIDER_THREADS slots before submitting (only when it is set).
	PhaseQueued           Phase = "queued"
	PhaseSubmitting       Phase = "submitting"
	PhaseAwaitingCallback Phase = "awaiting_callback"
	PhasePolling          Phase = "polling"
	// PhaseAwaitingBalance: in.php answered ERROR_ZERO_BALANCE; the task submits again every ~60 s until it is
	// accepted (Status.Waiting says why; on CaptchaAI the same code means no free thread). The deadline keeps counting.
	PhaseAwaitingBalance Phase = "awaiting_balance"
	PhaseDelivering      Phase = "delivering"
	PhaseDone            Phase = "done"
	PhaseFailed          Phase = "failed"
)

// Via tells how the result reached us.
type Via string

const (
	ViaCallback Via = "callback"
	ViaPoll     Via = "poll"
	// ViaSubmit: the provider answered the submission itself with the code (CapSolver's image tasks).
	ViaSubmit Via = "submit"
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
	// RunID and Submission name the run and the submission (1, 2, …) whose pingback URL the callback came to; the
	// URL's token signs them, so a callback of an earlier run or submission is known for one without comparing
	// provider IDs. Both are empty for a pingback URL that names only the workflow.
	RunID      string `json:"run_id,omitempty"`
	Submission int    `json:"submission,omitempty"`
	// Provider is the provider the pingback URL was handed to (signed too): a routed submission's candidates each
	// get their own URL, so a callback from one that did not take the submission is that provider's, for its task.
	// Empty for a URL that names none.
	Provider string `json:"provider,omitempty"`
	// ReceivedAt is when the ingress took the callback: a token's life counts from there, not from when the
	// workflow got round to it (a lost submission's answer may wait while a later Submit is retried).
	ReceivedAt time.Time `json:"received_at,omitzero"`
}

// UntokenedHintsPerSubmission is how many UntokenedHints one submission (one provider task ID) accepts in its whole
// life; the validator rejects the rest. It bounds what forged untokened callbacks can add to a task's history.
const UntokenedHintsPerSubmission = 4

// UntokenedHint is the payload of UntokenedUpdate: a hint that the provider says the task is solved. It carries no
// code — nothing authenticates the sender, so the workflow never uses one — and the workflow confirms with res.php.
// Its validator rejects it, leaving no history event, unless the task is waiting for a callback or polling for the
// submission ProviderTaskID names and that submission has not spent its UntokenedHintsPerSubmission. Both
// conditions only ever close for a provider task ID, so the ingress takes a rejection as final for that ID.
type UntokenedHint struct {
	ProviderTaskID string `json:"provider_task_id"`
}

// Result is what the workflow returns once the code is in (and delivered, if notify_url was set).
type Result struct {
	ProviderTaskID string `json:"provider_task_id"`
	// Provider is the PROVIDERS_FILE name of the provider that solved it; absent on a worker without the file.
	Provider    string    `json:"provider,omitempty"`
	Code        string    `json:"code"`
	Via         Via       `json:"via"`
	SubmittedAt time.Time `json:"submitted_at"`
	ReceivedAt  time.Time `json:"received_at"`
	Submits     int       `json:"submits"`
	// ExpiresAt is when the token stops being usable: ReceivedAt + the method's lifetime (TokenLifetimes) or
	// token_ttl_seconds. Absent (zero) for a code that does not expire (image and text methods).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Refreshes counts the solves made again because the token expired before notify_url took it.
	Refreshes int `json:"refreshes,omitempty"`
}

// Status is the answer to StatusQuery.
type Status struct {
	Phase          Phase  `json:"phase"`
	ProviderTaskID string `json:"provider_task_id,omitempty"`
	// Provider is the current submission's provider (PROVIDERS_FILE name; absent without the file).
	Provider    string    `json:"provider,omitempty"`
	Submits     int       `json:"submits"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	// ReceivedAt is when the current token arrived (unset before the first one).
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// ExpiresAt is when the current token expires (unset when it does not).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// TokenAgeSeconds is the current token's age when the query was answered (by the answering worker's clock).
	TokenAgeSeconds float64 `json:"token_age_seconds,omitempty"`
	// Refreshes counts the solves made again because a token expired before notify_url took it.
	Refreshes int `json:"refreshes,omitempty"`
	// Waiting says why submissions are paused (WaitingZeroBalance), empty when they are not; WaitingSince is when
	// the pause began. Both clear when a submission is accepted.
	Waiting      string    `json:"waiting,omitempty"`
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	// Submissions are this run's in.php requests, oldest first: what became of each.
	Submissions []SubmissionStatus `json:"submissions,omitempty"`
}

// SubmissionStatus is one in.php request of a run, as the status query shows it.
type SubmissionStatus struct {
	N              int    `json:"n"`
	ProviderTaskID string `json:"provider_task_id,omitempty"`
	Provider       string `json:"provider,omitempty"`
	// State is one of submitting, answer_lost, waiting, solved, unsolvable, refused, superseded (closed by another
	// answer or a refresh), abandoned (given up at a provider unreachable past PROVIDER_GIVE_UP).
	State string `json:"state"`
}

// WaitingZeroBalance is Status.Waiting while in.php answers ERROR_ZERO_BALANCE.
const WaitingZeroBalance = "provider balance is zero (in.php answered ERROR_ZERO_BALANCE; on CaptchaAI: no free thread)"

// TokenLifetimes is how long a solved token of each method stays usable on the target site, counted from when
// captchaflow receives it (a lower bound on its age: the provider solved it a little earlier). A method not listed
// (image and text methods: base64, post, textcaptcha, …; any method captchaflow does not know) yields a code
// that does not expire; token_ttl_seconds overrides the table for one task, either way. Sources: Google's
// reCAPTCHA docs ("valid for two minutes, and can only be verified once"), Cloudflare's Turnstile docs (300 s,
// single use); hCaptcha's tokens are short-lived and single use like reCAPTCHA's (taken as two minutes); FunCaptcha
// (Arkose) and GeeTest publish no firm figure and take the same conservative two minutes.
var TokenLifetimes = map[string]time.Duration{
	"userrecaptcha": 120 * time.Second, // reCAPTCHA v2, v2 invisible, v3, Enterprise
	"hcaptcha":      120 * time.Second,
	"turnstile":     300 * time.Second,
	"funcaptcha":    120 * time.Second,
	"geetest":       120 * time.Second,
	"geetest_v4":    120 * time.Second,
}

// TokenLifetime is method's entry in TokenLifetimes, zero when its code does not expire.
func TokenLifetime(method string) time.Duration { return TokenLifetimes[method] }
