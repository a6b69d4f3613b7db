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
	MetricQueueUnserved        = "captchaflow_provider_queue_unserved_total"
	MetricResubmits            = "captchaflow_resubmits_total"
	MetricResultLatency        = "captchaflow_result_latency_seconds"
	MetricTokenRefreshes       = "captchaflow_token_refreshes_total"         // fresh (paid) solves after an expiry
	MetricTokenAgeAtDelivery   = "captchaflow_token_age_at_delivery_seconds" // from receipt to notify_url's 2xx
	MetricSubmitsLost          = "captchaflow_submits_lost_total"            // by what became of a lost submission
	MetricProviderUnsolvable   = "captchaflow_provider_unsolvable_total"
	MetricProviderGaveUp       = "captchaflow_provider_gave_up_total" // each may have been paid for
	MetricProviderSolveSeconds = "captchaflow_provider_solve_seconds"
	MetricProviderSpend        = "captchaflow_provider_spend_microusd_total" // what submissions cost, when their solve ends
)

// outcomes label MetricTasksFinished by a result's Via ("callback" by default) and a failure's type ("error" by default).
var outcomes = map[string]string{string(captchaflow.ViaPoll): "poll", string(captchaflow.ViaSubmit): "submit",
	captchaflow.FailureDeadlineExceeded: "deadline_exceeded", captchaflow.FailureUnsolvable: "unsolvable",
	captchaflow.FailureDeliveryFailed: "delivery_failed", captchaflow.FailureTokenExpired: "token_expired",
	captchaflow.FailureInvalidInput: "invalid_input", captchaflow.FailureProxyRejected: "proxy_rejected"}

// count adds one to metric, tagged with the tag/value pairs given.
func count(ctx workflow.Context, metric string, tags ...string) {
	m := map[string]string{}
	for i := 0; i+1 < len(tags); i += 2 {
		m[tags[i]] = tags[i+1]
	}
	workflow.GetMetricsHandler(ctx).WithTags(m).Counter(metric).Inc(1)
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
	updates := []temporal.SearchAttributeUpdate{captchaflow.TaskIDKey.ValueSet(s.status.ProviderTaskID),
		captchaflow.PhaseKey.ValueSet(string(phase))}
	if s.status.Provider != "" { // in the same upsert: no event of its own
		updates = append(updates, captchaflow.ProviderKey.ValueSet(s.status.Provider))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		s.logger.Warn("could not upsert search attributes", "Error", err)
	}
}

// submittingPhase is PhaseSubmitting, or PhaseAwaitingBalance (upserted again if need be) during a zero-balance pause.
func (s *solver) submittingPhase(ctx workflow.Context) {
	switch {
	case s.status.Waiting == "":
		s.setPhase(ctx, captchaflow.PhaseSubmitting)
	case s.searched != captchaflow.PhaseAwaitingBalance:
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance)
	default:
		s.setPhase(ctx, captchaflow.PhaseAwaitingBalance)
	}
}

// statusNow is the status the query answers, with the token's age by the answering worker's clock.
func (s *solver) statusNow() (captchaflow.Status, error) {
	st := s.status
	for _, sub := range s.table.subs {
		st.Submissions = append(st.Submissions, captchaflow.SubmissionStatus{N: sub.N, ProviderTaskID: sub.ProviderID,
			Provider: sub.Provider, State: string(sub.State), CostUSD: sub.cost(), Route: sub.route})
	}
	if !st.ReceivedAt.IsZero() {
		// A query changes nothing in the workflow; the wall clock only shapes its answer.
		//workflowcheck:ignore
		st.TokenAgeSeconds = max(0, time.Since(st.ReceivedAt).Round(100*time.Millisecond).Seconds())
	}
	return st, nil
}
