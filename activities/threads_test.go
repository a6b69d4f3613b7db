package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
)

func holder(id string) SlotHolder {
	return SlotHolder{SlotRequest: SlotRequest{WorkflowID: id, RunID: "run-" + id, Seq: 1}}
}

func described(status enumspb.WorkflowExecutionStatus) *client.WorkflowExecutionDescription {
	d := &client.WorkflowExecutionDescription{}
	d.Status = status
	return d
}

func TestCheckSlotHoldersFindsTheOnesThatStopped(t *testing.T) {
	c := &mocks.Client{}
	c.On("DescribeWorkflow", mock.Anything, "running", "run-running").Return(described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING), nil)
	c.On("DescribeWorkflow", mock.Anything, "terminated", "run-terminated").Return(described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED), nil)
	c.On("DescribeWorkflow", mock.Anything, "purged", "run-purged").Return(nil, serviceerror.NewNotFound("gone"))
	c.On("DescribeWorkflow", mock.Anything, "unknown", "run-unknown").Return(nil, errors.New("temporal hiccup"))

	dead, err := checkSlotHolders(context.Background(), c, []SlotHolder{holder("running"), holder("terminated"), holder("purged"), holder("unknown")})
	require.NoError(t, err)
	assert.Equal(t, []SlotHolder{holder("terminated"), holder("purged")}, dead, "a holder that cannot be described is kept")

	_, err = checkSlotHolders(context.Background(), c, []SlotHolder{holder("unknown")})
	assert.Error(t, err, "nothing learned: the activity fails (and the semaphore tries later)")
}
