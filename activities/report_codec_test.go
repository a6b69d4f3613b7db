package activities

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/codec"
)

// An encrypted task's history is read through the codec: the report finds its provider task, which the SDK's
// default converter could not (every encrypted task would answer TaskNotSolved).
func TestLookupReportTargetDecodesEncryptedHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(codec.NewKeyLine("k1")), 0o600))
	var opts client.Options
	_, err := codec.Configure(&opts, path, nil)
	require.NoError(t, err)
	in, err := opts.DataConverter.ToPayloads(reportedInput)
	require.NoError(t, err)
	solved := captchaflow.Result{ProviderTaskID: "7300000042", Code: "SECRET-TOKEN"}
	failure := opts.FailureConverter.ErrorToFailure(temporal.NewNonRetryableApplicationError("delivering failed",
		captchaflow.FailureDeliveryFailed, nil, solved))
	start := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: captchaflow.WorkflowType}, Input: in}}}
	last := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{Failure: failure}}}
	assert.NotContains(t, start.String()+last.String(), "SECRET-TOKEN")
	for _, dc := range []converter.DataConverter{opts.DataConverter, converter.GetDefaultDataConverter()} {
		c := &mocks.Client{}
		c.On("GetWorkflowHistory", mock.Anything, "order-42", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).
			Return(&events{list: []*historypb.HistoryEvent{start, last}})
		got, _, err := lookupReportTarget(context.Background(), c, dc, "order-42")
		if dc == opts.DataConverter {
			require.NoError(t, err)
			assert.Equal(t, "7300000042", got.ProviderTaskID)
		} else {
			typ, _ := appErrorType(t, err)
			assert.Equal(t, captchaflow.FailureTaskNotSolved, typ, "without the codec nothing is readable")
		}
	}
}
