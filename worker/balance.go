package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
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

// keepBalanceSchedule creates the balance Schedule (first run at once), or brings an existing one to this worker's
// interval, queue and overlap policy: the schedule, not the workers, sets the pace. A failure costs the gauge only.
func keepBalanceSchedule(ctx context.Context, sc client.ScheduleClient, cfg config.Worker, logger *slog.Logger) {
	if cfg.ProviderBalanceInterval <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.ProviderBalanceInterval}}}
	action := &client.ScheduleWorkflowAction{ID: "captchaflow-balance-check", // the server appends the start time
		Workflow: captchaflow.BalanceWorkflowType, TaskQueue: cfg.TaskQueue,
		WorkflowRunTimeout: workflows.BalanceCheckTimeout + 10*time.Second, WorkflowTaskTimeout: 10 * time.Second}
	_, err := sc.Create(ctx, client.ScheduleOptions{ID: captchaflow.BalanceScheduleID, Spec: spec, Action: action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: time.Minute, TriggerImmediately: true,
		Note: "created by the captchaflow worker: reads the provider balance (res.php?action=getbalance)"})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = sc.GetHandle(ctx, captchaflow.BalanceScheduleID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				s := in.Description.Schedule
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
