package sim

import "time"

// Stats is the GET /_sim/stats document.
type Stats struct {
	Submissions SubmissionStats `json:"submissions"`
	// ResCalls counts res.php calls by action: get, getbalance, reportgood,
	// reportbad, other.
	ResCalls  map[string]int64 `json:"res_calls"`
	Pingbacks PingbackStats    `json:"pingbacks"`
	// Reports counts res.php reportgood / reportbad requests on known tasks by how they were answered.
	Reports ReportStats `json:"reports"`
	// Threads is the thread cap (SIM_THREADS, PUT /_sim/threads), the tasks being solved and the no-slot answers.
	Threads ThreadStats `json:"threads"`
	// Limits is the account limits (SIM_SUBMIT_*, SIM_RESULT_RATE, PUT /_sim/limits) and what they counted.
	Limits LimitStats `json:"limits"`
	// Tasks counts known tasks by TaskStatus.
	Tasks map[TaskStatus]int64 `json:"tasks"`
}

// SubmissionStats counts in.php calls.
type SubmissionStats struct {
	Accepted int64 `json:"accepted"`
	Rejected int64 `json:"rejected"`
	// RejectedByCode splits Rejected by the error code answered.
	RejectedByCode map[string]int64 `json:"rejected_by_code"`
	// AnswersLost counts accepted submissions whose in.php answer was dropped (submit_lost), AnswersStalled those
	// whose answer was held (submit_stall_ms); each such task exists and counts in Accepted.
	AnswersLost    int64 `json:"answers_lost"`
	AnswersStalled int64 `json:"answers_stalled"`
	// AnswersGatewayError counts accepted submissions answered with a gateway's 5xx instead of their task id
	// (submit_gateway_error); each such task exists and counts in Accepted.
	AnswersGatewayError int64 `json:"answers_gateway_error"`
}

// PingbackStats counts pingback deliveries. Sent counts HTTP requests actually
// made (first, duplicate and late sends); Succeeded+Failed == Sent. Dropped
// and Hung are deliveries that never made a complete request.
type PingbackStats struct {
	Sent       int64 `json:"sent"`
	Succeeded  int64 `json:"succeeded"`
	Failed     int64 `json:"failed"`
	Dropped    int64 `json:"dropped"`
	Duplicated int64 `json:"duplicated"`
	Late       int64 `json:"late"`
	Hung       int64 `json:"hung"`
}

// TaskStatus is a task's provider-side state.
type TaskStatus string

const (
	StatusSolving    TaskStatus = "solving"
	StatusSolved     TaskStatus = "solved"
	StatusUnsolvable TaskStatus = "unsolvable"
	// StatusExpired: finished longer ago than the retention window; res.php
	// answers ERROR_WRONG_CAPTCHA_ID.
	StatusExpired TaskStatus = "expired"
)

// TaskList is the GET /_sim/tasks document, ordered by task id.
type TaskList struct {
	Tasks []Task `json:"tasks"`
}

// Task is one accepted submission as the provider saw it.
type Task struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	// TaskType is the createTask task type the task was created with ("" on in.php); Method is then the in.php
	// method of its kind.
	TaskType string     `json:"task_type,omitempty"`
	Status   TaskStatus `json:"status"`
	// PingbackURL has its query values redacted (they may carry a callback
	// token); PingbackPath is the bare path, e.g. /callback/<workflow_id>.
	PingbackURL  string `json:"pingback_url,omitempty"`
	PingbackPath string `json:"pingback_path,omitempty"`
	// Faults applied to this task (from sim_fault, rules or per-run rates).
	Faults      []string   `json:"faults,omitempty"`
	SubmittedAt time.Time  `json:"submitted_at"`
	SolveTimeMS int64      `json:"solve_time_ms"`
	SolvedAt    *time.Time `json:"solved_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	// Code is the solution (empty for unsolvable tasks); equals AnswerFor(ID, Method) on in.php, CodeFor(ID) on createTask.
	Code        string            `json:"code,omitempty"`
	Pingbacks   []PingbackAttempt `json:"pingbacks"`
	ResGetCount int64             `json:"res_get_count"`
	// ReportsGood and ReportsBad count the reports recorded (at most one in all: a task's first report is
	// recorded, any later one is answered ERROR_DUPLICATE_REPORT); Reports lists the report requests (the first 16).
	ReportsGood int64          `json:"reports_good"`
	ReportsBad  int64          `json:"reports_bad"`
	Reports     []ReportRecord `json:"reports,omitempty"`
	// Proxy and UserAgent are what the task came with (in.php's proxy/proxytype/userAgent, or the task's fields).
	Proxy     *ProxyGot `json:"proxy,omitempty"`
	UserAgent string    `json:"user_agent,omitempty"`
}

// PingbackKind says why a delivery was made.
type PingbackKind string

const (
	PingbackFirst     PingbackKind = "first"
	PingbackDuplicate PingbackKind = "duplicate"
	PingbackLate      PingbackKind = "late"
	PingbackHang      PingbackKind = "hang"
)

// PingbackOutcome is how a delivery ended.
type PingbackOutcome string

const (
	OutcomeSucceeded PingbackOutcome = "succeeded"
	OutcomeFailed    PingbackOutcome = "failed"
	OutcomeDropped   PingbackOutcome = "dropped"
	OutcomeHung      PingbackOutcome = "hung"
)

// PingbackAttempt is one pingback delivery (or deliberate non-delivery).
type PingbackAttempt struct {
	Kind       PingbackKind    `json:"kind"`
	Outcome    PingbackOutcome `json:"outcome"`
	At         time.Time       `json:"at"`
	DurationMS int64           `json:"duration_ms"`
	HTTPStatus int             `json:"http_status,omitempty"`
	// Error describes a failure without the URL (which may hold a token).
	Error string `json:"error,omitempty"`
	// TargetClosed is set for hung deliveries the receiver gave up on
	// (its read timeout fired) before the simulator's HangFor bound.
	TargetClosed bool `json:"target_closed,omitempty"`
}
