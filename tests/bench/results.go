package main

import "time"

// Results is bench/out/results.json.
type Results struct {
	StartedAt       time.Time         `json:"started_at"`
	DurationSeconds float64           `json:"duration_seconds"`
	Server          string            `json:"server"`
	Label           string            `json:"label"`
	TemporalDB      string            `json:"temporal_db,omitempty"`
	GitCommit       string            `json:"git_commit"`
	GoVersion       string            `json:"go_version"`
	CPUs            int               `json:"cpus"`
	LoadAvgStart    string            `json:"load_avg_start"`
	LoadAvgEnd      string            `json:"load_avg_end"`
	N               int               `json:"n"`
	Rounds          int               `json:"rounds"`
	Warmup          int               `json:"warmup"`
	DynamicConfig   map[string]string `json:"dynamic_config,omitempty"`
	WorkerEnv       map[string]string `json:"worker_env,omitempty"`
	// GRPCCompression is what captchaflow's processes send Temporal (the twin: the SDK's gzip).
	GRPCCompression string   `json:"grpc_compression"`
	Phases          []string `json:"phases"`
	StackStartSecs  float64  `json:"stack_start_seconds"`

	Throughput []ThroughputResult `json:"throughput,omitempty"`
	Codec      []SelfResult       `json:"codec,omitempty"`
	Pacing     []SelfResult       `json:"pacing,omitempty"`
	PollPath   []PollPathResult   `json:"poll_path,omitempty"`
	Recovery   *RecoveryResult    `json:"recovery,omitempty"`
	Waiting    *WaitingResult     `json:"waiting,omitempty"`
	Threads    *ThreadsResult     `json:"threads,omitempty"`
	Billing    *BillingResult     `json:"billing,omitempty"`
	Admission  *AdmissionResult   `json:"admission,omitempty"`
	Fleet      *FleetResult       `json:"fleet,omitempty"`
	Nexus      *NexusResult       `json:"nexus,omitempty"`
	Targets    []Target           `json:"targets"`
	Notes      []string           `json:"notes,omitempty"`

	// Baseline is this build against BaselineCommit's worker (-baseline), interleaved: this build is the variant.
	Baseline       []SelfResult `json:"baseline,omitempty"`
	BaselineCommit string       `json:"baseline_commit,omitempty"`
}

// ThroughputResult compares captchaflow with the bare twin at one concurrency.
type ThroughputResult struct {
	// Scenario is "instant" (solved at once, the callback usually in before the submit's result is processed),
	// "paced" (the same, on a worker whose account is paced above the offered load) or "parked" (the callback
	// comes after a delay, to a workflow waiting on its timer).
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	Concurrency int    `json:"concurrency"`
	// Pace is the account's rate (CAPTCHAAI_SUBMITS_PER_SECOND, _RESULTS_) the serving worker ran with; 0 or
	// absent: the default configuration, not paced.
	Pace float64    `json:"paced_per_second,omitempty"`
	Ours SideResult `json:"ours"`
	Twin SideResult `json:"twin"`
	// ThroughputRatio is ours / twin tasks per second.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// CallbackP99Ratio is ours callback→result p99 / twin signal→result p99.
	CallbackP99Ratio float64 `json:"callback_p99_ratio"`
	StartP99Ratio    float64 `json:"start_p99_ratio"`
}

// SideResult is one side (ours or the twin) of a throughput comparison.
type SideResult struct {
	Tasks       int     `json:"tasks"`
	Failed      int     `json:"failed"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	TasksPerSec float64 `json:"tasks_per_second"`
	// StartToResult is from just before the start request to the result in the caller's hands.
	StartToResult Dist `json:"start_to_result"`
	// CallbackToResult: for captchaflow from the provider sending the pingback (simulator clock) to the result;
	// for the twin from its activity sending the signal to the result.
	CallbackToResult Dist `json:"callback_to_result"`
	// Missing counts tasks without a callback time (no pingback/signal recorded).
	Missing       int          `json:"missing_callback_times,omitempty"`
	HistoryEvents HistoryStats `json:"history_events"`
	// Slowest are the tasks with the longest callback → result, with their history timelines.
	Slowest      []SlowTask `json:"slowest_callback_to_result,omitempty"`
	SlowestStart []SlowTask `json:"slowest_start_to_result,omitempty"`
	// CPUms is the CPU time per task of each process while this side ran (ms): temporal (dev server only),
	// worker, ingress, simulator, and bench (the driver; for the twin also its worker and signaller).
	CPUms map[string]float64 `json:"cpu_ms_per_task"`
	// HistoryRequests is the history service's requests per task by operation while this side ran (dev server).
	HistoryRequests map[string]float64 `json:"history_requests_per_task,omitempty"`
	// Provider requests (captchaflow only).
	InPHPPerTask  float64 `json:"in_php_per_task,omitempty"`
	ResPHPPerTask float64 `json:"res_php_per_task,omitempty"`
	// InPHPMismatch counts tasks whose in.php requests differ from the submissions the workflow reported.
	InPHPMismatch int `json:"in_php_mismatch,omitempty"`
	ViaCallback   int `json:"via_callback,omitempty"`
}

// SlowTask is one of the slowest tasks; Timeline is relative to its callback (signal) being sent, or to its
// start request when it has no callback time.
type SlowTask struct {
	WorkflowID       string   `json:"workflow_id"`
	CallbackToResult float64  `json:"callback_to_result_ms"`
	StartToResult    float64  `json:"start_to_result_ms"`
	Timeline         []string `json:"timeline"`
}

// HistoryStats summarises the history lengths of a sample of tasks.
type HistoryStats struct {
	Sampled int     `json:"sampled"`
	Min     int     `json:"min"`
	Max     int     `json:"max"`
	Mean    float64 `json:"mean"`
	// WithTimer counts histories with a TimerStarted event: the callback came after the workflow had processed
	// the submit's result (else the timer is skipped).
	WithTimer int            `json:"with_timer"`
	Counts    map[string]int `json:"counts"` // events → tasks
}

// PollPathResult is one task that lost its pingback and was recovered by polling res.php.
type PollPathResult struct {
	Polls         int     `json:"polls"` // res.php requests it should take
	SolveMS       int     `json:"solve_ms"`
	WorkflowID    string  `json:"workflow_id"`
	Err           string  `json:"error,omitempty"`
	Via           string  `json:"via"`
	HistoryEvents int     `json:"history_events"`
	InPHP         int     `json:"in_php"`
	ResPHP        int64   `json:"res_php"`
	ResPHPBound   int     `json:"res_php_bound"` // 1 + ⌈(solve − callback timeout) / poll interval⌉
	TimerToResult float64 `json:"timer_to_result_ms"`
	Seconds       float64 `json:"seconds"`
}

// RecoveryResult is a batch of tasks solved at once whose pingback was dropped.
type RecoveryResult struct {
	Tasks                  int          `json:"tasks"`
	Failed                 int          `json:"failed"`
	FirstError             string       `json:"first_error,omitempty"`
	CallbackTimeoutSeconds int          `json:"callback_timeout_seconds"`
	PollIntervalSeconds    int          `json:"poll_interval_seconds"`
	TimerToResult          Dist         `json:"timer_to_result"`
	DropToResult           Dist         `json:"drop_to_result"`
	ResPHPPerTask          float64      `json:"res_php_per_task"`
	HistoryEvents          HistoryStats `json:"history_events"`
}

// WaitingResult is the worker's memory with tasks parked waiting for their callback.
type WaitingResult struct {
	StickyCacheSize string        `json:"sticky_cache_size"`
	Baseline        MemorySample  `json:"baseline"`
	Sizes           []WaitingSize `json:"sizes"`
}

// WaitingSize is one level of parked tasks.
type WaitingSize struct {
	Tasks        int          `json:"tasks"`
	Reached      int          `json:"reached"` // tasks counted awaiting_callback
	StartSeconds float64      `json:"start_seconds"`
	StartRate    float64      `json:"starts_per_second"`
	Failed       int          `json:"failed_starts"`
	Memory       MemorySample `json:"memory"`
	// Extrapolated is set when the phase's time budget ran out before the level was reached: the memory at
	// Tasks, estimated linearly from the last two measured points.
	Extrapolated *MemorySample `json:"extrapolated,omitempty"`
}

// MemorySample is scraped from the worker's /metrics.
type MemorySample struct {
	RSSMiB       float64 `json:"rss_mib"`
	HeapInuseMiB float64 `json:"heap_inuse_mib"`
	Goroutines   float64 `json:"goroutines"`
}

// Target is one of the targets, evaluated.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Got      string `json:"got"`
	Met      bool   `json:"met"`
	Measured bool   `json:"measured"`
}
