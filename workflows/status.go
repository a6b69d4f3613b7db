package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
)

// Domain metrics. workflow.GetMetricsHandler stays silent during replay, so a replay does not count twice.
const (
	MetricTasksFinished        = "captchaflow_tasks_finished_total"
	MetricFallbackPollsStarts  = "captchaflow_fallback_polls_started_total"
	MetricResubmits            = "captchaflow_resubmits_total"
	MetricResultLatency        = "captchaflow_result_latency_seconds"
	MetricTokenRefreshes       = "captchaflow_token_refreshes_total"         // fresh (paid) solves after an expiry
	MetricTokenAgeAtDelivery   = "captchaflow_token_age_at_delivery_seconds" // from receipt to notify_url's 2xx
	MetricSubmitsLost          = "captchaflow_submits_lost_total"            // by what became of a lost submission
	MetricProviderUnsolvable   = "captchaflow_provider_unsolvable_total"
	MetricProviderGaveUp       = "captchaflow_provider_gave_up_total" // each may have been paid for
	MetricProviderSolveSeconds = "captchaflow_provider_solve_seconds"
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

// Outcomes of MetricSubmitsLost.
const (
	LostOutcomeCallback   = "callback"    // its callback came: solved, nothing paid twice
	LostOutcomeResubmit   = "resubmitted" // no callback in time: submitted again (or max_submits spent)
	LostOutcomeDeadline   = "deadline"    // the deadline came first
	LostOutcomeUnsolvable = "unsolvable"  // its own pingback said the provider gave up
)

// successOutcome: Via values are contract and outcomes are labels, so the mapping is written out.
func successOutcome(via captchaflow.Via) string {
	switch via {
	case captchaflow.ViaPoll:
		return OutcomePoll
	case captchaflow.ViaSubmit:
		return OutcomeSubmit
	}
	return OutcomeCallback
}

// failureOutcome is the MetricTasksFinished outcome of a failure.
func failureOutcome(err error) string {
	if temporal.IsCanceledError(err) {
		return OutcomeCancelled
	}
	switch failureType(err) {
	case captchaflow.FailureDeadlineExceeded:
		return OutcomeDeadlineExceeded
	case captchaflow.FailureUnsolvable:
		return OutcomeUnsolvable
	case captchaflow.FailureDeliveryFailed:
		return OutcomeDeliveryFailed
	case captchaflow.FailureTokenExpired:
		return OutcomeTokenExpired
	}
	return OutcomeError
}

func count(ctx workflow.Context, metric string, tags ...string) {
	h := workflow.GetMetricsHandler(ctx)
	if len(tags) == 2 {
		h = h.WithTags(map[string]string{tags[0]: tags[1]})
	}
	h.Counter(metric).Inc(1)
}

func countFinished(ctx workflow.Context, outcome string) {
	count(ctx, MetricTasksFinished, "outcome", outcome)
}
func countLostSubmit(ctx workflow.Context, outcome string) {
	count(ctx, MetricSubmitsLost, "outcome", outcome)
}
func countProvider(ctx workflow.Context, metric, provider string) {
	count(ctx, metric, "provider", provider)
}
func countFallbackPoll(ctx workflow.Context) { count(ctx, MetricFallbackPollsStarts) }
func countResubmit(ctx workflow.Context)     { count(ctx, MetricResubmits) }
func countTokenRefresh(ctx workflow.Context) { count(ctx, MetricTokenRefreshes) }

func recordTokenAgeAtDelivery(ctx workflow.Context, d time.Duration) {
	workflow.GetMetricsHandler(ctx).Timer(MetricTokenAgeAtDelivery).Record(d)
}

func recordResultLatency(ctx workflow.Context, provider string, d time.Duration) {
	workflow.GetMetricsHandler(ctx).Timer(MetricResultLatency).Record(d)
	if provider != "" {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": provider}).
			Timer(MetricProviderSolveSeconds).Record(d)
	}
}

// setPhase records the phase for the status query and the Web UI's current details; it adds no history event.
func (s *solver) setPhase(ctx workflow.Context, phase captchaflow.Phase) {
	s.status.Phase = phase
	details := fmt.Sprintf("**phase:** %s", phase)
	if s.status.Provider != "" {
		details += " · provider " + s.status.Provider
	}
	if s.status.ProviderTaskID != "" {
		details += fmt.Sprintf(" · provider task %s · submission %d/%d", s.status.ProviderTaskID, s.status.Submits, s.in.MaxSubmits)
	}
	if s.status.Waiting != "" {
		details += fmt.Sprintf(" · **waiting:** %s, since %s", s.status.Waiting, s.status.WaitingSince.UTC().Format(time.RFC3339))
	}
	workflow.SetCurrentDetails(ctx, details)
}

// setPhaseSearchable also upserts CaptchaPhase and CaptchaTaskId: one history event, so only for searched phases.
func (s *solver) setPhaseSearchable(ctx workflow.Context, phase captchaflow.Phase) {
	s.setPhase(ctx, phase)
	s.searched = phase
	updates := []temporal.SearchAttributeUpdate{
		captchaflow.TaskIDKey.ValueSet(s.status.ProviderTaskID),
		captchaflow.PhaseKey.ValueSet(string(phase)),
	}
	if s.status.Provider != "" { // in the same upsert: no event of its own
		updates = append(updates, captchaflow.ProviderKey.ValueSet(s.status.Provider))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		s.logger.Warn("could not upsert search attributes", "Error", err)
	}
}

// balancePhase continues a zero-balance pause; CaptchaPhase is upserted again if another phase was searched since.
func (s *solver) balancePhase(ctx workflow.Context) {
	if s.searched != captchaflow.PhaseAwaitingBalance {
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance)
		return
	}
	s.setPhase(ctx, captchaflow.PhaseAwaitingBalance)
}

// statusNow is the status the query answers, with the token's age by the answering worker's clock.
func (s *solver) statusNow() captchaflow.Status {
	st := s.status
	st.Submissions = s.table.statuses()
	if !st.ReceivedAt.IsZero() {
		// A query changes nothing in the workflow; the wall clock only shapes its answer.
		//workflowcheck:ignore
		st.TokenAgeSeconds = max(0, time.Since(st.ReceivedAt).Round(100*time.Millisecond).Seconds())
	}
	return st
}
