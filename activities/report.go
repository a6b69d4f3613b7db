package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Activity names of the ReportVerdict workflow (method names, like SubmitName).
const (
	LookupReportTargetName = "LookupReportTarget"
	SendReportName         = "SendReport"
)

// FailureTaskRunning: the task's workflow has not finished yet; LookupReportTarget is retried for a short while
// (a caller may report the moment its webhook arrived, just before the workflow completes).
const FailureTaskRunning = "TaskRunning"

// ReportTargetRequest names the task (its workflow ID) whose verdict is to be reported.
type ReportTargetRequest struct {
	TaskID string `json:"task_id"`
}

// ReportTarget is what a report needs to know of a solved task. The code itself is never returned: it stays out of
// the report's history.
type ReportTarget struct {
	ProviderTaskID string `json:"provider_task_id"`
	// Provider solved it (PROVIDERS_FILE name; "" without the file); Kind is its createTask kind, for a provider
	// whose report call depends on it.
	Provider    string    `json:"provider,omitempty"`
	Kind        string    `json:"kind,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	ReceivedAt  time.Time `json:"received_at"`
}

// LookupReportTarget reads the SolveCaptcha workflow of the task through the worker's Temporal client and returns
// the provider task its result came from. A completed task has a result; so has one that failed DeliveryFailed or
// TokenExpired, or was cancelled while delivering (their details carry it). A running task is
// a retryable TaskRunning error; anything else is TaskNotSolved.
func (a *Activities) LookupReportTarget(ctx context.Context, req ReportTargetRequest) (ReportTarget, error) {
	target, err := lookupReportTarget(ctx, activity.GetClient(ctx), req.TaskID)
	if err != nil || target.Provider == "" {
		return target, err
	}
	if p, ok := a.set().Get(target.Provider); ok && p.Flavor != "" {
		target.Kind, err = taskKind(ctx, activity.GetClient(ctx), req.TaskID)
	}
	return target, err
}

func lookupReportTarget(ctx context.Context, c client.Client, taskID string) (ReportTarget, error) {
	desc, err := c.DescribeWorkflow(ctx, taskID, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return ReportTarget{}, notSolved("there is no task %s (never started, or past the namespace's retention)", taskID)
		}
		return ReportTarget{}, err // a Temporal hiccup: retried
	}
	if typ := desc.WorkflowType.Name; typ != captchaflow.WorkflowType {
		return ReportTarget{}, notSolved("workflow %s is a %.60s, not a %s task", taskID, typ, captchaflow.WorkflowType)
	}
	status := desc.Status
	if status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return ReportTarget{}, temporal.NewApplicationError(fmt.Sprintf("task %s is still running", taskID), FailureTaskRunning)
	}
	var res captchaflow.Result
	err = c.GetWorkflow(ctx, taskID, desc.WorkflowExecution.RunID).Get(ctx, &res)
	switch status {
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if err != nil {
			return ReportTarget{}, err
		}
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED, enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		if !isOutcome(err) {
			return ReportTarget{}, err // reading the outcome failed, not the task: retried
		}
		if !resultInDetails(err, &res) {
			return ReportTarget{}, notSolved("task %s ended %s without a result (%s)", taskID, statusWord(status), failureTypeOf(err))
		}
	default:
		return ReportTarget{}, notSolved("task %s ended %s without a result", taskID, statusWord(status))
	}
	if res.ProviderTaskID == "" {
		return ReportTarget{}, notSolved("task %s has no provider task in its result", taskID)
	}
	return ReportTarget{ProviderTaskID: res.ProviderTaskID, Provider: res.Provider, SubmittedAt: res.SubmittedAt,
		ReceivedAt: res.ReceivedAt}, nil
}

// taskKind is the createTask kind of the task's input (its method and params, read from the start event): the
// provider's report call depends on it.
func taskKind(ctx context.Context, c client.Client, taskID string) (string, error) {
	iter := c.GetWorkflowHistory(ctx, taskID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return "", notSolved("task %s has no history", taskID)
	}
	ev, err := iter.Next()
	if err != nil {
		return "", err // a Temporal hiccup: retried
	}
	var in captchaflow.Input
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
	if err := converter.GetDefaultDataConverter().FromPayloads(payloads, &in); err != nil {
		return "", notSolved("task %s: its input cannot be read: %v", taskID, err)
	}
	kind, err := providers.KindOf(in.Method, in.Params)
	if err != nil {
		return "", notSolved("task %s: %v", taskID, err)
	}
	return string(kind), nil
}

// isOutcome tells a closed workflow's failure (what Get returns for it) from a failure to read it (an RPC error).
func isOutcome(err error) bool {
	var execErr *temporal.WorkflowExecutionError
	var appErr *temporal.ApplicationError
	return errors.As(err, &execErr) || errors.As(err, &appErr) || temporal.IsCanceledError(err)
}

// resultFailures are the failures whose details carry the task's last Result.
var resultFailures = []string{captchaflow.FailureDeliveryFailed, captchaflow.FailureTokenExpired}

// resultInDetails decodes the Result a DeliveryFailed or TokenExpired failure, or a cancellation while delivering,
// carries.
func resultInDetails(err error, res *captchaflow.Result) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && slices.Contains(resultFailures, appErr.Type()) && appErr.HasDetails() {
		return appErr.Details(res) == nil
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && canceled.HasDetails() {
		return canceled.Details(res) == nil
	}
	return false
}

func failureTypeOf(err error) string {
	if t := captchaflow.FailureType(err); t != "" {
		return t
	}
	if temporal.IsCanceledError(err) {
		return "cancelled"
	}
	return "no failure type"
}

func statusWord(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	}
	return s.String()
}

func notSolved(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), captchaflow.FailureTaskNotSolved, nil)
}

// SendReportRequest is the input of SendReport; Provider and Kind are the ReportTarget's.
type SendReportRequest struct {
	ProviderTaskID string              `json:"provider_task_id"`
	Provider       string              `json:"provider,omitempty"`
	Kind           string              `json:"kind,omitempty"`
	Verdict        captchaflow.Verdict `json:"verdict"`
}

// SendReportResult says how the provider took the report.
type SendReportResult struct {
	// AlreadyRecorded: the provider answered ERROR_DUPLICATE_REPORT (it holds a report on the task already).
	AlreadyRecorded bool `json:"already_recorded,omitempty"`
}

// SendReport makes one report request to the provider that solved the task. ERROR_DUPLICATE_REPORT is a success (a
// lost attempt's report holds); an unknown task ID is ReportWindowClosed (the provider forgets it when that closes).
func (a *Activities) SendReport(ctx context.Context, req SendReportRequest) (SendReportResult, error) {
	p, ok := a.set().Get(req.Provider)
	if !ok {
		return SendReportResult{}, temporal.NewApplicationError(fmt.Sprintf("provider %.40q is not in this worker's PROVIDERS_FILE", req.Provider), FailureWorkerConfig)
	}
	if req.Verdict != captchaflow.VerdictGood && req.Verdict != captchaflow.VerdictBad {
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("verdict %.20q is neither good nor bad", string(req.Verdict)), captchaflow.FailureInvalidInput, nil)
	}
	defer keepAlive(ctx)()
	err := p.Client.Report(ctx, providers.Kind(req.Kind), req.ProviderTaskID, req.Verdict == captchaflow.VerdictGood)
	if errors.Is(err, providers.ErrReportUnsupported) {
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"provider %s has no report call for a %s verdict on a %s task: nothing sent", req.Provider, req.Verdict, req.Kind),
			captchaflow.FailureReportRefused, nil)
	}
	a.countAnswer(ctx, p, AnswerOpReport, answerCode(err))
	if err == nil {
		activity.GetLogger(ctx).Info("report recorded", "ProviderTaskID", req.ProviderTaskID, "Verdict", req.Verdict)
		return SendReportResult{}, nil
	}
	switch code := codeOf(err); code {
	case callback.CodeDuplicate:
		activity.GetLogger(ctx).Info("report already recorded", "ProviderTaskID", req.ProviderTaskID, "Verdict", req.Verdict)
		return SendReportResult{AlreadyRecorded: true}, nil
	case callback.CodeNotRecorded:
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(
			"the provider did not record the report: "+err.Error(), captchaflow.FailureReportRefused, nil, code)
	case "ERROR_WRONG_CAPTCHA_ID", "ERROR_NO_SUCH_CAPCHA_ID", "ERROR_NO_SUCH_CAPTCHA_ID":
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(
			"the provider no longer knows the task (its report window has passed): "+err.Error(),
			captchaflow.FailureReportWindowClosed, nil, code)
	}
	return SendReportResult{}, reportError(ctx, err)
}

// reportError fails the report on a configuration problem or an unknown answer; anything else is paced and retried.
func reportError(ctx context.Context, err error) error {
	if class := providers.ClassOf(err); class == callback.ClassConfig || class == callback.ClassUnknown {
		return providerError(ctx, err)
	}
	return transientError(ctx, err.Error(), codeOf(err))
}
