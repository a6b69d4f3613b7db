package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/captchaflow/captchaflow"
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

func TestThreadsWorkflowIDIsNeverATaskOrReportID(t *testing.T) {
	for _, queue := range []string{"captcha-solve", "report", "q:1", ""} {
		id := ThreadsWorkflowID(queue)
		assert.Error(t, captchaflow.ValidateWorkflowID(id), "a task could take %q", id)
		_, err := captchaflow.ReportedTaskID(id)
		assert.Error(t, err, "%q reads as a report's workflow ID", id)
	}
}

func TestSlotMessagesDecodeWhatEarlierReleasesRecorded(t *testing.T) {
	var req SlotRequest
	require.NoError(t, json.Unmarshal([]byte(`{"workflow_id":"t1","run_id":"r1","seq":2,"threads":4,"requested_at":"2025-01-02T03:04:05Z"}`), &req))
	assert.Equal(t, SlotRequest{WorkflowID: "t1", RunID: "r1", Seq: 2, Threads: 4,
		RequestedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}, req)
	var g SlotGrant
	require.NoError(t, json.Unmarshal([]byte(`{"seq":3}`), &g))
	assert.Equal(t, SlotGrant{Seq: 3}, g, "a legacy grant names no run")

	b, err := json.Marshal(SlotRequest{WorkflowID: "t1", RunID: "r1", Seq: 1})
	require.NoError(t, err)
	assert.JSONEq(t, `{"workflow_id":"t1","run_id":"r1","seq":1,"requested_at":"0001-01-01T00:00:00Z"}`, string(b),
		"a new first ask carries no legacy threads, hold or ticket")
}

// Finding 7 of issue 20: a holder's run that an operator reset keeps its slot for resetGrace, until its reset run
// has re-asserted the slot as its own; another task is not granted it meanwhile.
func TestCheckSlotHoldersKeepsAResetRunsSlotUntilItsSuccessorReasserts(t *testing.T) {
	resetAt := func(ago time.Duration) *client.WorkflowExecutionDescription {
		d := described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)
		closed := time.Now().Add(-ago)
		d.WorkflowCloseTime = &closed
		d.RawResponse = &workflowservice.DescribeWorkflowExecutionResponse{
			WorkflowExtendedInfo: &workflowpb.WorkflowExecutionExtendedInfo{ResetRunId: "reset-run"}}
		return d
	}
	c := &mocks.Client{}
	c.On("DescribeWorkflow", mock.Anything, "just-reset", "run-just-reset").Return(resetAt(10*time.Second), nil)
	c.On("DescribeWorkflow", mock.Anything, "reset-long-ago", "run-reset-long-ago").Return(resetAt(resetGrace), nil)

	dead, err := checkSlotHolders(context.Background(), c, []SlotHolder{holder("just-reset"), holder("reset-long-ago")})
	require.NoError(t, err)
	assert.Equal(t, []SlotHolder{holder("reset-long-ago")}, dead)
}
