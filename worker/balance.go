package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/workflows"
)

// MinBalanceInterval is the shortest PROVIDER_BALANCE_INTERVAL: at most one read a minute per namespace.
const MinBalanceInterval = time.Minute

// balanceSchedule is captchaflow.BalanceScheduleID as this worker wants it: CheckBalance on its queue every interval.
func balanceSchedule(taskQueue string, every time.Duration) (client.ScheduleSpec, *client.ScheduleWorkflowAction) {
	return client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		&client.ScheduleWorkflowAction{
			ID:                  "captchaflow-balance-check", // the server appends the start time
			Workflow:            captchaflow.BalanceWorkflowType,
			TaskQueue:           taskQueue,
			WorkflowRunTimeout:  workflows.BalanceCheckTimeout + 10*time.Second,
			WorkflowTaskTimeout: 10 * time.Second,
		}
}

// keepBalanceSchedule creates the balance Schedule (first run at once), or brings an existing one to this worker's
// interval, queue and overlap policy (one already so is untouched): the schedule, not the workers, sets the pace.
// A failure costs the gauge, never a task.
func keepBalanceSchedule(ctx context.Context, sc client.ScheduleClient, cfg config.Worker, logger *slog.Logger) {
	if cfg.ProviderBalanceInterval <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	spec, action := balanceSchedule(cfg.TaskQueue, cfg.ProviderBalanceInterval)
	_, err := sc.Create(ctx, client.ScheduleOptions{ID: captchaflow.BalanceScheduleID, Spec: spec, Action: action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: time.Minute, TriggerImmediately: true,
		Note: "created by the captchaflow worker: reads the provider balance (res.php?action=getbalance)"})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = sc.GetHandle(ctx, captchaflow.BalanceScheduleID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				s := in.Description.Schedule
				if balanceScheduleIsAsWanted(s, spec, action) {
					return nil, temporal.ErrSkipScheduleUpdate
				}
				s.Spec, s.Action = &spec, action
				s.Policy = cmp.Or(s.Policy, &client.SchedulePolicies{})
				s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
				return &client.ScheduleUpdate{Schedule: &s}, nil
			},
		})
	}
	if err != nil {
		logger.Warn("the balance schedule could not be created or updated: the provider balance may not be read",
			"schedule_id", captchaflow.BalanceScheduleID, "error", err)
	}
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
