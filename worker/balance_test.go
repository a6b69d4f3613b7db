package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

// A worker restarting with the same settings leaves the schedule alone; one with another interval or task queue,
// or a schedule an operator changed (overlap policy, a cron spec), is brought to the worker's settings.
func TestBalanceScheduleIsUpdatedOnlyWhenItDiffers(t *testing.T) {
	spec, action := balanceSchedule("captcha-solve", time.Minute)
	assert.Equal(t, captchaflow.BalanceWorkflowType, action.Workflow)
	as := func(mod func(*client.Schedule)) bool {
		haveSpec, haveAction := balanceSchedule("captcha-solve", time.Minute)
		s := client.Schedule{Spec: &haveSpec, Action: haveAction,
			Policy: &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}}
		mod(&s)
		return balanceScheduleIsAsWanted(s, spec, action)
	}
	assert.True(t, as(func(*client.Schedule) {}))
	assert.False(t, as(func(s *client.Schedule) { s.Spec.Intervals[0].Every = 5 * time.Minute }))
	assert.False(t, as(func(s *client.Schedule) { s.Spec.CronExpressions = []string{"* * * * *"} }))
	assert.False(t, as(func(s *client.Schedule) { s.Action.(*client.ScheduleWorkflowAction).TaskQueue = "other" }))
	assert.False(t, as(func(s *client.Schedule) { s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL }))
	assert.False(t, as(func(s *client.Schedule) { s.Policy = nil }))
}
