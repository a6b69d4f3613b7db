package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/captchaflow/captchaflow/activities"
)

// semaphoreWithPlan is a client whose task queue "q" has a running semaphore holding plan (none with plan < 0).
func semaphoreWithPlan(plan int) *mocks.Client {
	c := &mocks.Client{}
	if plan < 0 {
		c.On("DescribeWorkflow", mock.Anything, activities.ThreadsWorkflowID("q"), "").Return(nil, serviceerror.NewNotFound("none"))
		return c
	}
	p, _ := converter.GetDefaultDataConverter().ToPayload(plan)
	d := &client.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{activities.MemoPlan: p}}},
	}}
	d.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	c.On("DescribeWorkflow", mock.Anything, activities.ThreadsWorkflowID("q"), "").Return(d, nil)
	return c
}

func TestWorkersOfATaskQueueMustStateTheSamePlan(t *testing.T) {
	for _, tc := range []struct {
		name          string
		running, mine int
		refused       string
	}{
		{"no semaphore yet", -1, 40, ""},
		{"no semaphore, unset", -1, 0, ""},
		{"same plan", 40, 40, ""},
		{"another plan", 40, 50, "PROVIDER_THREADS=50 disagrees with the plan of 40 threads"},
		{"unset beside a plan", 40, 0, "PROVIDER_THREADS is unset, but the semaphore captchaflow/threads/q holds a plan of 40"},
		{"unset beside a retired plan", 0, 0, ""},
		{"a plan beside a retired one", 0, 40, "PROVIDER_THREADS=40 disagrees with the plan of 0 threads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkThreadsPlan(context.Background(), semaphoreWithPlan(tc.running), "q", tc.mine)
			if tc.refused == "" {
				assert.NoError(t, err)
				return
			}
			var cfgErr configError
			require.True(t, errors.As(err, &cfgErr), "refused at start as a configuration error (exit 2): %v", err)
			assert.Contains(t, err.Error(), tc.refused)
			assert.Contains(t, err.Error(), "-set-provider-threads")
		})
	}
}

func TestRetiringAdmissionNeedsARunningSemaphore(t *testing.T) {
	_, err := setThreadsPlan(context.Background(), semaphoreWithPlan(-1), "q", 0)
	assert.ErrorContains(t, err, "nothing to retire")
	_, err = setThreadsPlan(context.Background(), semaphoreWithPlan(-1), "q", -2)
	assert.ErrorContains(t, err, "negative")
}

func TestTheFirstReleaseSemaphoreIsRetired(t *testing.T) {
	running := &client.WorkflowExecutionDescription{}
	running.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	c := &mocks.Client{}
	c.On("DescribeWorkflow", mock.Anything, "captchaflow-threads:q", "").Return(running, nil)
	empty := &mocks.Value{}
	empty.On("Get", mock.Anything).Return(nil) // no holders, no queue: nothing to hand over
	c.On("QueryWorkflow", mock.Anything, "captchaflow-threads:q", "", activities.SlotsQuery).Return(empty, nil)
	c.On("TerminateWorkflow", mock.Anything, "captchaflow-threads:q", "", mock.Anything).Return(nil).Once()
	retireLegacySemaphore(context.Background(), c, "q", 2, slog.New(slog.DiscardHandler))
	c.AssertExpectations(t)

	// A first-release semaphore that cannot hand its waiters over is left running: they would strand without it.
	stuck := &mocks.Client{}
	stuck.On("DescribeWorkflow", mock.Anything, "captchaflow-threads:q", "").Return(running, nil)
	stuck.On("QueryWorkflow", mock.Anything, "captchaflow-threads:q", "", activities.SlotsQuery).Return(nil, errors.New("no worker answers"))
	retireLegacySemaphore(context.Background(), stuck, "q", 2, slog.New(slog.DiscardHandler))
	stuck.AssertNotCalled(t, "TerminateWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything)

	gone := &mocks.Client{}
	gone.On("DescribeWorkflow", mock.Anything, "captchaflow-threads:q", "").Return(nil, serviceerror.NewNotFound("none"))
	retireLegacySemaphore(context.Background(), gone, "q", 2, slog.New(slog.DiscardHandler))
	gone.AssertNotCalled(t, "TerminateWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything)
}
