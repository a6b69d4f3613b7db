package captchaflow

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
)

func validInput() Input {
	return Input{Method: "turnstile", Params: Params{"sitekey": "0x4AAA", "pageurl": "https://shop.example.com/checkout"}}
}

func TestStartUsesContractOptions(t *testing.T) {
	c := &mocks.Client{}
	run := &mocks.WorkflowRun{}
	var got client.StartWorkflowOptions
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, WorkflowType, validInput()).
		Run(func(args mock.Arguments) { got = args.Get(1).(client.StartWorkflowOptions) }).
		Return(run, nil).Once()

	r, err := Start(context.Background(), c, "order-42", validInput())
	require.NoError(t, err)
	assert.Same(t, run, r)
	assert.Equal(t, "order-42", got.ID)
	assert.Equal(t, DefaultTaskQueue, got.TaskQueue)
	assert.Equal(t, enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, got.WorkflowIDConflictPolicy)
	assert.Equal(t, enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, got.WorkflowIDReusePolicy)
	assert.Equal(t, "turnstile · shop.example.com", got.StaticSummary)
	assert.Equal(t, 1, got.TypedSearchAttributes.Size())
	c.AssertExpectations(t)
}

func TestStartRefusesBadInputBeforeStarting(t *testing.T) {
	c := &mocks.Client{}
	_, err := Start(context.Background(), c, "bad id", validInput())
	assert.ErrorContains(t, err, "workflow ID")

	in := validInput()
	in.Params["key"] = "provider-key"
	_, err = Start(context.Background(), c, "ok-id", in)
	assert.ErrorContains(t, err, "params.key")
	c.AssertNotCalled(t, "ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything)
}
