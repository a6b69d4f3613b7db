// Package captchaflow is SolveCaptcha's contract (docs/contract.md) and the Go way to start it. It imports nothing
// else of captchaflow, so a caller links the contract and the Temporal client only; every name here is public API.
//
//	run, err := captchaflow.Start(ctx, c, "order-42-login", captchaflow.Input{Method: "turnstile", Params: ...})
//	res, err := captchaflow.Solve(ctx, c, "order-42-login", in) // start (or join) and wait
package captchaflow

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

const (
	WorkflowType        = "SolveCaptcha"
	DefaultTaskQueue    = "captcha-solve"
	CallbackSignal      = "captcha-callback"           // a Callback
	UntokenedUpdate     = "captcha-untokened-callback" // an Update: the validator refuses a hint without an event
	StatusQuery         = "status"                     // a Status
	ReportWorkflowType  = "ReportVerdict"              // under ReportWorkflowID(taskID), on the task's queue
	BalanceWorkflowType = "CheckBalance"               // reads the provider's balance into a gauge
	BalanceScheduleID   = "captchaflow-balance"        // the Schedule that runs BalanceWorkflowType
	MaxCodeBytes        = 16 << 10                     // bounds a solved code anywhere it enters (a token is a few KiB)
)

// Search attributes the workflow upserts (Keyword); CaptchaProvider only on a worker with PROVIDERS_FILE.
var (
	TaskIDKey           = temporal.NewSearchAttributeKeyKeyword("CaptchaTaskId") // routes a bare callback
	PhaseKey            = temporal.NewSearchAttributeKeyKeyword("CaptchaPhase")
	ProviderKey         = temporal.NewSearchAttributeKeyKeyword("CaptchaProvider")
	SearchAttributeKeys = []temporal.SearchAttributeKeyKeyword{TaskIDKey, PhaseKey, ProviderKey}
)

// Failure types: the temporal.ApplicationError types a failed SolveCaptcha carries, for callers to branch on.
const (
	FailureInvalidInput     = "InvalidInput"     // the input names the field; nothing was submitted
	FailureUnsolvable       = "Unsolvable"       // every submission came back unsolvable
	FailureDeadlineExceeded = "DeadlineExceeded" // no result within deadline_seconds
	FailureDeliveryFailed   = "DeliveryFailed"   // the result could not be delivered to notify_url in time; details hold it
	FailureProviderConfig   = "ProviderConfig"   // refused for a reason retrying cannot fix (key, parameters)
	FailureProviderUnknown  = "ProviderUnknown"  // an answer captchaflow does not know; its code is in the message
	FailureTokenExpired     = "TokenExpired"     // undelivered past the token's life and max_refreshes; details hold the Result
	FailureProxyRejected    = "ProxyRejected"    // the provider could not use params.proxy (or params.userAgent): the word and host named
)

// Failure types of ReportVerdict (docs/contract.md).
const (
	FailureVerdictConflict    = "VerdictConflict"    // reported with the other verdict; details hold the ReportResult
	FailureReportWindowClosed = "ReportWindowClosed" // past ReportWindow, or the provider forgot the task
	FailureTaskNotSolved      = "TaskNotSolved"      // no solved task under that ID
	FailureReportRefused      = "ReportRefused"      // ERROR_REPORT_NOT_RECORDED: too many complaints on the account
)

type Phase string // where a task is in its life

const (
	PhaseQueued           Phase = "queued" // waiting for a PROVIDER_THREADS slot
	PhaseSubmitting       Phase = "submitting"
	PhaseAwaitingCallback Phase = "awaiting_callback"
	PhasePolling          Phase = "polling"
	PhaseAwaitingBalance  Phase = "awaiting_balance" // ERROR_ZERO_BALANCE: submits again every ~60 s
	PhaseDelivering       Phase = "delivering"
	PhaseDone             Phase = "done"
	PhaseFailed           Phase = "failed"
)

type Via string // how the result reached us

const (
	ViaCallback Via = "callback"
	ViaPoll     Via = "poll"
	ViaSubmit   Via = "submit" // the submission's answer held the code (CapSolver's image tasks)
)

// Callback is CallbackSignal's payload; RunID, Submission and Provider name the pingback URL (signed by its token).
type Callback struct {
	ProviderTaskID string    `json:"provider_task_id"`
	Code           string    `json:"code"`
	Authenticated  bool      `json:"authenticated"` // the sender knows the callback secret; otherwise res.php confirms the code
	RunID          string    `json:"run_id,omitempty"`
	Submission     int       `json:"submission,omitempty"`
	Provider       string    `json:"provider,omitempty"`
	ReceivedAt     time.Time `json:"received_at,omitzero"` // a token's life counts from here
}

// UntokenedHintsPerSubmission bounds the hints one provider task ID accepts: what forged callbacks can add to history.
const UntokenedHintsPerSubmission = 4

// UntokenedHint is UntokenedUpdate's payload: no code (nothing authenticates the sender), so the workflow asks
// res.php. A rejection (no wait or poll for that ID, or no hints left) is final: neither ever reopens.
type UntokenedHint struct {
	ProviderTaskID string `json:"provider_task_id"`
}

// Result is what the workflow returns once the code is in (and delivered, if notify_url was set).
type Result struct {
	ProviderTaskID string `json:"provider_task_id"`
	Provider       string `json:"provider,omitempty"` // its PROVIDERS_FILE name
	Code           string `json:"code"`               // a cookie kind's (datadome, cf_clearance, amazon_waf): the cookie's value
	// UserAgent and Cookies (a Cookie header, "a=1; b=2") come with the code where the provider answers them: use all three.
	UserAgent   string    `json:"user_agent,omitempty"`
	Cookies     string    `json:"cookies,omitempty"`
	Via         Via       `json:"via"`
	SubmittedAt time.Time `json:"submitted_at"`
	ReceivedAt  time.Time `json:"received_at"`
	Submits     int       `json:"submits"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"` // zero: the code does not expire
	Refreshes   int       `json:"refreshes,omitempty"` // solves made again after a token expired undelivered
	CostUSD     float64   `json:"cost_usd,omitempty"`  // the sum over its submissions, at PROVIDERS_FILE prices
}

type Status struct { // the answer to StatusQuery
	Phase           Phase              `json:"phase"`
	ProviderTaskID  string             `json:"provider_task_id,omitempty"`
	Provider        string             `json:"provider,omitempty"`
	Submits         int                `json:"submits"`
	SubmittedAt     time.Time          `json:"submitted_at,omitzero"`
	ReceivedAt      time.Time          `json:"received_at,omitzero"`
	ExpiresAt       time.Time          `json:"expires_at,omitzero"`
	TokenAgeSeconds float64            `json:"token_age_seconds,omitempty"` // by the answering worker's clock
	Refreshes       int                `json:"refreshes,omitempty"`
	Waiting         string             `json:"waiting,omitempty"` // why submissions pause (WaitingZeroBalance)
	WaitingSince    time.Time          `json:"waiting_since,omitzero"`
	Submissions     []SubmissionStatus `json:"submissions,omitempty"` // this run's, oldest first
}

type SubmissionStatus struct { // one in.php request of a run
	N              int     `json:"n"`
	ProviderTaskID string  `json:"provider_task_id,omitempty"`
	Provider       string  `json:"provider,omitempty"`
	State          string  `json:"state"` // docs/contract.md lists the states
	CostUSD        float64 `json:"cost_usd,omitempty"`
	Route          *Route  `json:"route,omitempty"` // why it went to Provider (routing: scored)
}

// Route is why scored routing sent a submission where it did: the reason and the candidates, best first.
type Route struct {
	Reason     string           `json:"reason"`
	Candidates []RouteCandidate `json:"candidates"`
}

// Route reasons: the cheapest expected good code that fits the time left, the fastest (none fits), exploring, a recovered
// provider's probe, or the PROVIDER_THREADS slot's provider, ranked when the slot was taken (candidates as Submit ranks).
const RouteCheapest, RouteFastest, RouteExplore, RouteProbe, RouteSlot = "cheapest_that_fits", "fastest_none_fits", "explore",
	"probe", "slot"

type RouteCandidate struct {
	Provider   string  `json:"provider"`
	CostUSD    float64 `json:"expected_cost_usd"` // of a good code: price over the good share (refunds counted)
	P90Seconds float64 `json:"p90_seconds"`       // measured 90th-percentile solve time
	GoodShare  float64 `json:"good_share"`        // neither unsolvable nor reported bad
	Fits       bool    `json:"fits"`              // p90 within the time left and good share at least 0.5
}

// WaitingZeroBalance is Status.Waiting while in.php answers ERROR_ZERO_BALANCE.
const WaitingZeroBalance = "provider balance is zero (in.php answered ERROR_ZERO_BALANCE; on CaptchaAI: no free thread)"

// TokenLifetimes: how long a method's token is usable from receipt (vendors' docs; 2 min unless said; unlisted: no expiry).
var TokenLifetimes = map[string]time.Duration{
	"userrecaptcha": 120 * time.Second, // reCAPTCHA v2, v2 invisible, v3, Enterprise
	"hcaptcha":      120 * time.Second,
	"turnstile":     300 * time.Second,
	"funcaptcha":    120 * time.Second,
	"geetest":       120 * time.Second,
	"geetest_v4":    120 * time.Second,
}
