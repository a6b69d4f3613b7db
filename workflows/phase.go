package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
)

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

// setPhaseSearchable is setPhase plus an upsert of CaptchaPhase and CaptchaTaskId. The upsert costs one history
// event, so it is used only for the phases an operator searches for (and the untokened route looks up by).
func (s *solver) setPhaseSearchable(ctx workflow.Context, phase captchaflow.Phase) {
	s.setPhase(ctx, phase)
	s.searched = phase
	updates := []temporal.SearchAttributeUpdate{
		captchaflow.TaskIDKey.ValueSet(s.status.ProviderTaskID),
		captchaflow.PhaseKey.ValueSet(string(phase)),
	}
	if s.status.Provider != "" {
		// Part of the same upsert (replay matches an upsert by its type alone): no event of its own.
		updates = append(updates, captchaflow.ProviderKey.ValueSet(s.status.Provider))
	}
	err := workflow.UpsertTypedSearchAttributes(ctx, updates...)
	if err != nil {
		s.logger.Warn("could not upsert search attributes", "Error", err)
	}
}

// failureOutcome is the tasks-finished outcome for a failure that is not classified at its source.
func failureOutcome(err error) string {
	if temporal.IsCanceledError(err) {
		return OutcomeCancelled
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case captchaflow.FailureDeadlineExceeded:
			return OutcomeDeadlineExceeded
		case captchaflow.FailureUnsolvable:
			return OutcomeUnsolvable
		case captchaflow.FailureDeliveryFailed:
			return OutcomeDeliveryFailed
		case captchaflow.FailureTokenExpired:
			return OutcomeTokenExpired
		}
	}
	return OutcomeError
}
