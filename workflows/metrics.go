package workflows

import (
	"time"

	"github.com/captchaflow/captchaflow"

	"go.temporal.io/sdk/workflow"
)

// Domain metrics the workflow emits. They go through workflow.GetMetricsHandler, which stays silent during
// replay, so a replayed history does not count twice.
const (
	MetricTasksFinished       = "captchaflow_tasks_finished_total"
	MetricFallbackPollsStarts = "captchaflow_fallback_polls_started_total"
	MetricResubmits           = "captchaflow_resubmits_total"
	MetricResultLatency       = "captchaflow_result_latency_seconds"
	// MetricTokenRefreshes counts fresh solves made because a token expired before notify_url took it (each one
	// a paid submission).
	MetricTokenRefreshes = "captchaflow_token_refreshes_total"
	// MetricTokenAgeAtDelivery is a token's age (from its receipt) when notify_url accepted it.
	MetricTokenAgeAtDelivery = "captchaflow_token_age_at_delivery_seconds"
)

// Outcomes of MetricTasksFinished.
const (
	OutcomeCallback         = "callback"
	OutcomePoll             = "poll"
	OutcomeSubmit           = "submit"
	OutcomeUnsolvable       = "unsolvable"
	OutcomeDeadlineExceeded = "deadline_exceeded"
	OutcomeInvalidInput     = "invalid_input"
	OutcomeDeliveryFailed   = "delivery_failed"
	OutcomeTokenExpired     = "token_expired"
	OutcomeCancelled        = "cancelled"
	OutcomeError            = "error"
)

// successOutcome names a solved task's outcome by how its code arrived. The outcome values are metric labels and
// the Via values are contract, so the mapping is written out rather than assumed from equal spellings.
func successOutcome(via captchaflow.Via) string {
	switch via {
	case captchaflow.ViaPoll:
		return OutcomePoll
	case captchaflow.ViaSubmit:
		return OutcomeSubmit
	}
	return OutcomeCallback
}

func countFinished(ctx workflow.Context, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(MetricTasksFinished).Inc(1)
}

func countFallbackPoll(ctx workflow.Context) {
	workflow.GetMetricsHandler(ctx).Counter(MetricFallbackPollsStarts).Inc(1)
}

func countResubmit(ctx workflow.Context) {
	workflow.GetMetricsHandler(ctx).Counter(MetricResubmits).Inc(1)
}

func recordResultLatency(ctx workflow.Context, d time.Duration) {
	workflow.GetMetricsHandler(ctx).Timer(MetricResultLatency).Record(d)
}
