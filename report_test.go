package captchaflow

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
)

func TestReportWorkflowID(t *testing.T) {
	id, err := ReportWorkflowID("order-42.login:x")
	require.NoError(t, err)
	assert.Equal(t, "order-42.login:x/report", id)
	assert.Error(t, ValidateWorkflowID(id), "a report's ID can never be a task's")
	task, err := ReportedTaskID(id)
	require.NoError(t, err)
	assert.Equal(t, "order-42.login:x", task)

	_, err = ReportWorkflowID("a/b")
	assert.Error(t, err)
	for _, bad := range []string{"order-42", "/report", "a b/report", "x/report/report"} {
		_, err := ReportedTaskID(bad)
		assert.Error(t, err, bad)
	}
}

func TestVerdict(t *testing.T) {
	assert.NoError(t, VerdictGood.Validate())
	assert.Error(t, Verdict("Good").Validate())
}

// reportClient starts (or joins) a report run whose result carries standing.
func reportClient(t *testing.T, standing Verdict) (*mocks.Client, *client.StartWorkflowOptions) {
	c := &mocks.Client{}
	run := &mocks.WorkflowRun{}
	run.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, v any) error {
		*v.(*ReportResult) = ReportResult{TaskID: "order-42", ProviderTaskID: "7300000042", Verdict: standing}
		return nil
	})
	var opts client.StartWorkflowOptions
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, ReportWorkflowType, mock.Anything).
		Run(func(args mock.Arguments) { opts = args.Get(1).(client.StartWorkflowOptions) }).Return(run, nil)
	t.Cleanup(func() { c.AssertExpectations(t) })
	return c, &opts
}

func TestReportSameVerdictIsIdempotent(t *testing.T) {
	c, opts := reportClient(t, VerdictBad)
	_, err := SendReport(context.Background(), c, "order-42", VerdictBad)
	require.NoError(t, err)
	assert.Equal(t, "order-42/report", opts.ID)
	assert.Equal(t, DefaultTaskQueue, opts.TaskQueue)
	assert.Equal(t, enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, opts.WorkflowIDConflictPolicy)
	assert.Equal(t, enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, opts.WorkflowIDReusePolicy)
}

func TestReportOtherVerdictConflicts(t *testing.T) {
	c, _ := reportClient(t, VerdictBad)
	res, err := SendReport(context.Background(), c, "order-42", VerdictGood, StartOptions{TaskQueue: "q"})
	require.Error(t, err)
	assert.Equal(t, FailureVerdictConflict, FailureType(err))
	assert.Contains(t, err.Error(), "already reported bad")
	assert.Equal(t, VerdictBad, res.Verdict, "the verdict that stands")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	var standing ReportResult
	require.NoError(t, appErr.Details(&standing))
	assert.Equal(t, "7300000042", standing.ProviderTaskID)
}

func TestReportRefusesBadArguments(t *testing.T) {
	c := &mocks.Client{} // nothing may be started
	_, err := SendReport(context.Background(), c, "not a task id", VerdictGood)
	assert.Error(t, err)
	_, err = SendReport(context.Background(), c, "order-42", "maybe")
	assert.Error(t, err)
	c.AssertExpectations(t)
}
