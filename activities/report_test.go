package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
)

// reportProvider is a res.php that answers every report with answer and records the requests.
type reportProvider struct {
	mu       sync.Mutex
	requests []string // action=id
	answer   string
}

func (p *reportProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r.FormValue("action")+"="+r.FormValue("id"))
	answer := p.answer
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(answer))
}

func sendReport(t *testing.T, answer string, verdict captchaflow.Verdict) (SendReportResult, *reportProvider, error) {
	t.Helper()
	p := &reportProvider{answer: answer}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	provider, err := providers.NewInPHP(srv.URL, "0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(&Activities{Provider: provider})
	val, err := env.ExecuteActivity("SendReport", SendReportRequest{ProviderTaskID: "7300000042", Verdict: verdict})
	var res SendReportResult
	if err == nil {
		require.NoError(t, val.Get(&res))
	}
	return res, p, err
}

func appErrorType(t *testing.T, err error) (string, bool) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr.Type(), appErr.NonRetryable()
}

func TestSendReportSendsTheVerdict(t *testing.T) {
	for verdict, action := range map[captchaflow.Verdict]string{captchaflow.VerdictGood: "reportgood", captchaflow.VerdictBad: "reportbad"} {
		res, p, err := sendReport(t, `{"status":1,"request":"OK_REPORT_RECORDED"}`, verdict)
		require.NoError(t, err)
		assert.False(t, res.AlreadyRecorded)
		assert.Equal(t, []string{action + "=7300000042"}, p.requests)
	}
}

// A duplicate report (an earlier attempt of ours got through, its answer was lost) is a success.
func TestSendReportDuplicateIsRecorded(t *testing.T) {
	res, _, err := sendReport(t, `{"status":0,"request":"ERROR_DUPLICATE_REPORT"}`, captchaflow.VerdictBad)
	require.NoError(t, err)
	assert.True(t, res.AlreadyRecorded)
}

func TestSendReportProviderAnswers(t *testing.T) {
	for _, tc := range []struct {
		answer, wantType string
		wantFinal        bool
	}{
		{`{"status":0,"request":"ERROR_REPORT_NOT_RECORDED"}`, captchaflow.FailureReportRefused, true},
		{`{"status":0,"request":"ERROR_WRONG_CAPTCHA_ID"}`, captchaflow.FailureReportWindowClosed, true},
		{`{"status":0,"request":"ERROR_NO_SUCH_CAPCHA_ID"}`, captchaflow.FailureReportWindowClosed, true},
		{`{"status":0,"request":"ERROR_WRONG_USER_KEY"}`, captchaflow.FailureProviderConfig, true},
		{`{"status":0,"request":"ERROR_SOMETHING_NEW"}`, captchaflow.FailureProviderUnknown, true},
		{`{"status":0,"request":"ERROR_TOO_MUCH_REQUESTS"}`, FailureProviderTransient, false},
		{`not json`, FailureProviderTransient, false},
	} {
		_, _, err := sendReport(t, tc.answer, captchaflow.VerdictBad)
		require.Error(t, err, tc.answer)
		typ, final := appErrorType(t, err)
		assert.Equal(t, tc.wantType, typ, tc.answer)
		assert.Equal(t, tc.wantFinal, final, tc.answer)
		assert.NotContains(t, err.Error(), "0123456789abcdef", "the key never reaches an error")
	}
}

// events is a history as GetWorkflowHistory iterates it; err comes first.
type events struct {
	list []*historypb.HistoryEvent
	err  error
}

func (e *events) HasNext() bool { return len(e.list) > 0 || e.err != nil }

func (e *events) Next() (*historypb.HistoryEvent, error) {
	if err := e.err; err != nil {
		e.err = nil
		return nil, err
	}
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

var reportedInput = captchaflow.Input{Method: "hcaptcha", Params: map[string]string{"sitekey": "s"}}

// history makes c answer the task's history: a run of typ started with reportedInput and ending in last.
func history(t *testing.T, c *mocks.Client, typ string, last *historypb.HistoryEvent) {
	in, err := converter.GetDefaultDataConverter().ToPayloads(reportedInput)
	require.NoError(t, err)
	start := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: typ}, Input: in}}}
	c.On("GetWorkflowHistory", mock.Anything, "order-42", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).
		Return(&events{list: []*historypb.HistoryEvent{start, last}})
}

func completed(t *testing.T, res captchaflow.Result) *historypb.HistoryEvent {
	p, err := converter.GetDefaultDataConverter().ToPayloads(res)
	require.NoError(t, err)
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{
			WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{Result: p}}}
}

func failed(err error) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
			Failure: temporal.GetDefaultFailureConverter().ErrorToFailure(err)}}}
}

func TestLookupReportTarget(t *testing.T) {
	submitted := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	solved := captchaflow.Result{ProviderTaskID: "7300000042", Code: "SECRET-TOKEN", SubmittedAt: submitted, ReceivedAt: submitted.Add(time.Second)}
	want := ReportTarget{ProviderTaskID: "7300000042", SubmittedAt: submitted, ReceivedAt: submitted.Add(time.Second)}
	ctx := context.Background()

	t.Run("completed", func(t *testing.T) {
		c := &mocks.Client{}
		history(t, c, captchaflow.WorkflowType, completed(t, solved))
		got, in, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		require.NoError(t, err)
		assert.Equal(t, want, got, "the code itself is not returned")
		assert.Equal(t, reportedInput, in, "the input, for a createTask provider's kind")
	})
	for _, typ := range []string{captchaflow.FailureDeliveryFailed, captchaflow.FailureTokenExpired} {
		t.Run(typ+": the result is in the details", func(t *testing.T) {
			c := &mocks.Client{}
			history(t, c, captchaflow.WorkflowType, failed(temporal.NewNonRetryableApplicationError("delivering failed", typ, nil, solved)))
			got, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	t.Run("cancelled while delivering: the result is in the details", func(t *testing.T) {
		c := &mocks.Client{}
		p, err := converter.GetDefaultDataConverter().ToPayloads(solved)
		require.NoError(t, err)
		history(t, c, captchaflow.WorkflowType, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionCanceledEventAttributes{
				WorkflowExecutionCanceledEventAttributes: &historypb.WorkflowExecutionCanceledEventAttributes{Details: p}}})
		got, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("unsolvable", func(t *testing.T) {
		c := &mocks.Client{}
		history(t, c, captchaflow.WorkflowType, failed(temporal.NewNonRetryableApplicationError("could not solve", captchaflow.FailureUnsolvable, nil)))
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, final := appErrorType(t, err)
		assert.Equal(t, captchaflow.FailureTaskNotSolved, typ)
		assert.True(t, final)
		assert.Contains(t, err.Error(), "Unsolvable")
	})
	t.Run("solved by a lost submission's callback that named no task (CapMonster's)", func(t *testing.T) {
		c := &mocks.Client{}
		unnamed := solved
		unnamed.ProviderTaskID, unnamed.Provider = "", "capmonster"
		history(t, c, captchaflow.WorkflowType, completed(t, unnamed))
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, final := appErrorType(t, err)
		assert.Equal(t, captchaflow.FailureTaskNotSolved, typ, "no provider task ID exists to report: final")
		assert.True(t, final)
		assert.Contains(t, err.Error(), "never named the task", "says why, not that the task has no result")
	})
	t.Run("running", func(t *testing.T) {
		c := &mocks.Client{}
		history(t, c, captchaflow.WorkflowType, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED})
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, final := appErrorType(t, err)
		assert.Equal(t, FailureTaskRunning, typ)
		assert.False(t, final)
	})
	t.Run("terminated", func(t *testing.T) {
		c := &mocks.Client{}
		history(t, c, captchaflow.WorkflowType, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED})
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, _ := appErrorType(t, err)
		assert.Equal(t, captchaflow.FailureTaskNotSolved, typ)
		assert.Contains(t, err.Error(), "terminated")
	})
	t.Run("its history could not be read: retried", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("GetWorkflowHistory", mock.Anything, "order-42", "", false, mock.Anything).Return(&events{err: serviceerror.NewUnavailable("down")})
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		require.Error(t, err)
		assert.Empty(t, captchaflow.FailureType(err), "not a typed, final failure")
	})
	t.Run("another workflow type", func(t *testing.T) {
		c := &mocks.Client{}
		history(t, c, captchaflow.ReportWorkflowType, completed(t, solved))
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, _ := appErrorType(t, err)
		assert.Equal(t, captchaflow.FailureTaskNotSolved, typ)
	})
	t.Run("unknown", func(t *testing.T) {
		c := &mocks.Client{}
		c.On("GetWorkflowHistory", mock.Anything, "order-42", "", false, mock.Anything).Return(&events{err: serviceerror.NewNotFound("no such workflow")})
		_, _, err := lookupReportTarget(ctx, c, converter.GetDefaultDataConverter(), "order-42")
		typ, _ := appErrorType(t, err)
		assert.Equal(t, captchaflow.FailureTaskNotSolved, typ)
	})
}

// A report for a provider removed from PROVIDERS_FILE cannot be sent by this worker: refused at once, naming it,
// not retried until the report window closes while the caller waits.
func TestSendReportForARemovedProviderIsRefused(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(&Activities{Provider: &providers.InPHP{}})
	_, err := env.ExecuteActivity("SendReport", SendReportRequest{ProviderTaskID: "7300000042", Provider: "gone", Verdict: captchaflow.VerdictBad})
	typ, nonRetryable := appErrorType(t, err)
	assert.Equal(t, captchaflow.FailureReportRefused, typ)
	assert.True(t, nonRetryable, "retried until the window closes")
	assert.ErrorContains(t, err, `"gone"`)
}
