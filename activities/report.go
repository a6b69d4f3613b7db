package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// ReportTargetRequest names the task (its workflow ID) whose verdict is to be reported.
type ReportTargetRequest struct {
	TaskID string `json:"task_id"`
}

// ReportTarget is what a report needs of a solved task; never the code, which stays out of the report's history.
type ReportTarget struct {
	ProviderTaskID string    `json:"provider_task_id"`
	Provider       string    `json:"provider,omitempty"` // solved it ("" without PROVIDERS_FILE)
	Kind           string    `json:"kind,omitempty"`     // its createTask kind (some report calls depend on it)
	Method         string    `json:"method,omitempty"`   // the task's: verdicts teach the routing model
	SubmittedAt    time.Time `json:"submitted_at"`
	ReceivedAt     time.Time `json:"received_at"`
}

// LookupReportTarget is the provider task the task's result came from, with its kind for a createTask provider.
func (a *Activities) LookupReportTarget(ctx context.Context, req ReportTargetRequest) (ReportTarget, error) {
	dc := cmp.Or(a.DataConverter, converter.GetDefaultDataConverter())
	target, in, err := lookupReportTarget(ctx, activity.GetClient(ctx), dc, req.TaskID)
	if p, ok := a.set().Get(target.Provider); err == nil && target.Provider != "" && ok && p.Flavor != "" {
		kind, err := providers.KindOf(in.Method, in.Params)
		if err != nil {
			return ReportTarget{}, notSolved("task %s: %v", req.TaskID, err)
		}
		target.Kind = string(kind)
	}
	target.Method = in.Method
	return target, err
}

var ended = map[enums.EventType]string{enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed", enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled",
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated", enums.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
	enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued as new"}

// lookupReportTarget reads the task's history once: its input from the first event, its Result from the close event.
func lookupReportTarget(ctx context.Context, c client.Client, dc converter.DataConverter, taskID string) (ReportTarget, captchaflow.Input, error) {
	var first, last *historypb.HistoryEvent
	for iter := c.GetWorkflowHistory(ctx, taskID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); iter.HasNext(); {
		ev, err := iter.Next()
		if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
			return ReportTarget{}, captchaflow.Input{}, notSolved("there is no task %s (never started, or past the namespace's retention)", taskID)
		} else if err != nil {
			return ReportTarget{}, captchaflow.Input{}, err // a Temporal hiccup: retried
		}
		first, last = cmp.Or(first, ev), ev
	}
	start := first.GetWorkflowExecutionStartedEventAttributes()
	telemetry.LinkStarter(ctx, start.GetHeader()) // the report's own trace points at the task's
	if typ := start.GetWorkflowType().GetName(); typ != captchaflow.WorkflowType {
		return ReportTarget{}, captchaflow.Input{}, notSolved("workflow %s is a %.60s, not a %s task", taskID, typ, captchaflow.WorkflowType)
	}
	var in captchaflow.Input
	if err := dc.FromPayloads(start.GetInput(), &in); err != nil {
		return ReportTarget{}, in, notSolved("task %s: its input cannot be read: %v", taskID, err)
	}
	word, closed := ended[last.GetEventType()]
	if !closed {
		return ReportTarget{}, in, temporal.NewApplicationError(fmt.Sprintf("task %s is still running", taskID), FailureTaskRunning)
	}
	// A result is in a completed task, one cancelled delivering, or one failed DeliveryFailed or TokenExpired (else nil).
	payloads := cmp.Or(last.GetWorkflowExecutionCompletedEventAttributes().GetResult(), last.GetWorkflowExecutionCanceledEventAttributes().GetDetails())
	if failed := last.GetWorkflowExecutionFailedEventAttributes(); failed != nil {
		info := failed.GetFailure().GetApplicationFailureInfo()
		if slices.Contains([]string{captchaflow.FailureDeliveryFailed, captchaflow.FailureTokenExpired}, info.GetType()) {
			payloads = info.GetDetails()
		}
		word += " (" + cmp.Or(info.GetType(), "no failure type") + ")"
	}
	var res captchaflow.Result
	if payloads == nil || dc.FromPayloads(payloads, &res) != nil {
		return ReportTarget{}, in, notSolved("task %s ended %s without a result", taskID, word)
	} else if res.ProviderTaskID == "" {
		// A lost submission answered by a callback naming no task (CapMonster's): no ID exists that a report could name.
		return ReportTarget{}, in, notSolved("task %s was solved, but %s never named the task that solved it (its "+
			"submission's answer was lost and its callback names no task): there is nothing to report", taskID, cmp.Or(res.Provider, "the provider"))
	}
	return ReportTarget{ProviderTaskID: res.ProviderTaskID, Provider: res.Provider, SubmittedAt: res.SubmittedAt,
		ReceivedAt: res.ReceivedAt}, in, nil
}

func notSolved(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), captchaflow.FailureTaskNotSolved, nil)
}

// SendReportRequest is the input of SendReport; Provider and Kind are the ReportTarget's.
type SendReportRequest struct {
	ProviderTaskID string              `json:"provider_task_id"`
	Provider       string              `json:"provider,omitempty"`
	Kind           string              `json:"kind,omitempty"`
	Method         string              `json:"method,omitempty"`
	Verdict        captchaflow.Verdict `json:"verdict"`
}

// SendReportResult says how the provider took the report.
type SendReportResult struct {
	AlreadyRecorded bool `json:"already_recorded,omitempty"` // ERROR_DUPLICATE_REPORT: it holds a report already
}

// SendReport makes one report request; ERROR_DUPLICATE_REPORT succeeds (a lost attempt's report holds).
func (a *Activities) SendReport(ctx context.Context, req SendReportRequest) (SendReportResult, error) {
	p, err := a.provider(req.Provider)
	if err != nil { // removed from this worker's file: as its polls do, the report gives up rather than wait out the window
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(err.Error()+": nothing sent", captchaflow.FailureReportRefused, nil)
	}
	if err := req.Verdict.Validate(); err != nil {
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	defer keepAlive(ctx)()
	ctx = telemetry.Annotate(ctx, "", p.Name, req.ProviderTaskID)
	if activity.GetInfo(ctx).Attempt == 1 { // the caller's verdict, whatever the provider does with it
		a.set().Model.Verdict(p.Name, req.Method, req.Verdict == captchaflow.VerdictGood)
	}
	err = p.Client.Report(ctx, providers.Kind(req.Kind), req.ProviderTaskID, req.Verdict == captchaflow.VerdictGood)
	if errors.Is(err, providers.ErrReportUnsupported) {
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"provider %s has no report call for a %s verdict on a %s task: nothing sent", req.Provider, req.Verdict, req.Kind),
			captchaflow.FailureReportRefused, nil)
	}
	a.countAnswer(ctx, p, "report", err)
	switch code := codeOf(err); {
	case err == nil, code == callback.CodeDuplicate:
		activity.GetLogger(ctx).Info("report recorded", "ProviderTaskID", req.ProviderTaskID, "Verdict", req.Verdict, "Before", err != nil)
		return SendReportResult{AlreadyRecorded: err != nil}, nil
	case code == callback.CodeNotRecorded:
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(
			"the provider did not record the report: "+err.Error(), captchaflow.FailureReportRefused, nil, code)
	case slices.Contains([]string{"ERROR_WRONG_CAPTCHA_ID", "ERROR_NO_SUCH_CAPCHA_ID", "ERROR_NO_SUCH_CAPTCHA_ID"}, code):
		return SendReportResult{}, temporal.NewNonRetryableApplicationError(
			"the provider no longer knows the task (its report window has passed): "+err.Error(),
			captchaflow.FailureReportWindowClosed, nil, code)
	case slices.Contains([]callback.Class{callback.ClassConfig, callback.ClassUnknown}, providers.ClassOf(err)):
		return SendReportResult{}, providerError(ctx, err) // a configuration problem or an unknown answer fails the report
	}
	return SendReportResult{}, transientError(ctx, err, FailureProviderTransient) // anything else is paced and retried
}
