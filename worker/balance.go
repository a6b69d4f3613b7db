package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/workflows"
)

// MinBalanceInterval is the shortest PROVIDER_BALANCE_INTERVAL: at most one read a minute per namespace.
const MinBalanceInterval = time.Minute

// balanceCheckWorkflowID is the ID of the workflows the schedule starts (the server appends the start time).
const balanceCheckWorkflowID = "captchaflow-balance-check"

// balanceSchedule is captchaflow.BalanceScheduleID as this worker wants it: CheckBalance on its queue every interval.
func balanceSchedule(taskQueue string, every time.Duration) (client.ScheduleSpec, *client.ScheduleWorkflowAction) {
	return client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		&client.ScheduleWorkflowAction{
			ID:                  balanceCheckWorkflowID,
			Workflow:            captchaflow.BalanceWorkflowType,
			TaskQueue:           taskQueue,
			WorkflowRunTimeout:  workflows.BalanceCheckTimeout + 10*time.Second,
			WorkflowTaskTimeout: 10 * time.Second,
		}
}

// ensureBalanceSchedule creates the balance Schedule (first run at once), or brings an existing one to this worker's
// interval, queue and overlap policy (one already so is untouched): the schedule, not the workers, sets the pace.
func ensureBalanceSchedule(ctx context.Context, sc client.ScheduleClient, taskQueue string, every time.Duration, logger *slog.Logger) error {
	spec, action := balanceSchedule(taskQueue, every)
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:                 captchaflow.BalanceScheduleID,
		Spec:               spec,
		Action:             action,
		Overlap:            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow:      time.Minute,
		TriggerImmediately: true,
		Note:               "created by the captchaflow worker: reads the provider balance (res.php?action=getbalance)",
	})
	if err == nil {
		logger.Info("balance schedule created", "schedule_id", captchaflow.BalanceScheduleID, "every", every)
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("creating schedule %s: %w", captchaflow.BalanceScheduleID, err)
	}
	err = sc.GetHandle(ctx, captchaflow.BalanceScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			if balanceScheduleIsAsWanted(s, spec, action) {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			s.Spec = &spec
			s.Action = action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			logger.Info("balance schedule updated", "schedule_id", captchaflow.BalanceScheduleID, "every", every)
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating schedule %s: %w", captchaflow.BalanceScheduleID, err)
	}
	return nil
}

func balanceScheduleIsAsWanted(s client.Schedule, spec client.ScheduleSpec, action *client.ScheduleWorkflowAction) bool {
	have, ok := s.Action.(*client.ScheduleWorkflowAction)
	if !ok || s.Spec == nil || s.Policy == nil || s.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		return false
	}
	name, _ := have.Workflow.(string)
	return name == captchaflow.BalanceWorkflowType && have.TaskQueue == action.TaskQueue && have.ID == action.ID &&
		have.WorkflowRunTimeout == action.WorkflowRunTimeout &&
		slices.Equal(s.Spec.Intervals, spec.Intervals) && len(s.Spec.Calendars) == 0 && len(s.Spec.CronExpressions) == 0
}

// exportBalanceLowThreshold sets MetricProviderBalanceLowThreshold to PROVIDER_BALANCE_LOW (> 0) for the alert.
func (m *metrics) exportBalanceLowThreshold(namespace string, low float64) {
	if low <= 0 {
		return
	}
	m.Handler().WithTags(map[string]string{"namespace": namespace}).Gauge(activities.MetricProviderBalanceLowThreshold).Update(low)
}
