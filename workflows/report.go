package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// MetricReports counts ReportVerdict runs by verdict and result; a caller joining or repeating a report starts no run.
const MetricReports = "captchaflow_reports_total"

// reportResults label MetricReports by a failure's type ("error" by default).
var reportResults = map[string]string{captchaflow.FailureTaskNotSolved: "not_solved",
	captchaflow.FailureReportWindowClosed: "window_closed", captchaflow.FailureReportRefused: "refused",
	captchaflow.FailureInvalidInput: "invalid_input"}

const (
	reportSettleTimeout = time.Minute // a just-delivered task completes by then; an unsolved one is refused soon
	minReportTime       = time.Second // a report with less of its window left is not attempted
)

// ReportVerdict sends a verdict on a task's provider task; run as captchaflow.ReportWorkflowID(taskID): one per task.
func ReportVerdict(ctx workflow.Context, in captchaflow.ReportInput) (captchaflow.ReportResult, error) {
	res, err := report(ctx, in)
	result, details := "sent", " · provider task "+res.ProviderTaskID
	switch {
	case err != nil:
		result, details = cmp.Or(reportResults[captchaflow.FailureType(err)], "error"), ""
		workflow.GetLogger(ctx).Warn("report failed", "Verdict", in.Verdict, "Result", result, "Error", err)
	case res.AlreadyRecorded:
		result = "already_recorded"
	}
	verdict := "invalid" // a bounded label whatever the input says
	if in.Verdict == captchaflow.VerdictGood || in.Verdict == captchaflow.VerdictBad {
		verdict = string(in.Verdict)
	}
	count(ctx, MetricReports, "verdict", verdict, "result", result)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** %s%s", in.Verdict, result, details))
	return res, err
}

// report checks the input, looks the task's result up, checks the provider's window and sends the verdict.
func report(ctx workflow.Context, in captchaflow.ReportInput) (captchaflow.ReportResult, error) {
	taskID, err := captchaflow.ReportedTaskID(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if err = cmp.Or(err, in.Verdict.Validate()); err != nil {
		return captchaflow.ReportResult{}, temporal.NewNonRetryableApplicationError(
			"invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	target, err := lookupTarget(ctx, in.Verdict, taskID)
	if err != nil {
		return captchaflow.ReportResult{}, err
	}
	closes := target.SubmittedAt.Add(captchaflow.ReportWindow)
	left := closes.Sub(workflow.Now(ctx))
	if left < minReportTime {
		return captchaflow.ReportResult{}, windowClosed(taskID, target, closes, nil)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** sending for provider task %s (window closes %s)",
		in.Verdict, target.ProviderTaskID, closes.UTC().Format(time.RFC3339)))
	var sent activities.SendReportResult
	opts := withRetry(ctx, ProviderStartToClose, left, backoff(time.Second, 30*time.Second)) // SendReport marks its final failures
	err = workflow.ExecuteActivity(opts, acts.SendReport,
		activities.SendReportRequest{ProviderTaskID: target.ProviderTaskID, Verdict: in.Verdict,
			Provider: target.Provider, Kind: target.Kind, Method: target.Method}).Get(ctx, &sent)
	// Timed out or still retryable: the retries ran into the window's end.
	if appErr, _ := errors.AsType[*temporal.ApplicationError](err); isTimeout(err) || appErr != nil && !appErr.NonRetryable() {
		return captchaflow.ReportResult{}, windowClosed(taskID, target, closes, err)
	} else if err != nil {
		return captchaflow.ReportResult{}, err
	}
	return captchaflow.ReportResult{TaskID: taskID, ProviderTaskID: target.ProviderTaskID, Verdict: in.Verdict,
		SubmittedAt: target.SubmittedAt, ReportedAt: workflow.Now(ctx), AlreadyRecorded: sent.AlreadyRecorded}, nil
}

// lookupTarget reads which provider task the task's result came from, waiting a while for a task still running.
func lookupTarget(ctx workflow.Context, verdict captchaflow.Verdict, taskID string) (activities.ReportTarget, error) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** looking up task %s", verdict, taskID))
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
		ScheduleToCloseTimeout: reportSettleTimeout, RetryPolicy: backoff(2*time.Second, 2*time.Second, captchaflow.FailureTaskNotSolved)})
	var target activities.ReportTarget
	err := workflow.ExecuteActivity(ctx, acts.LookupReportTarget, activities.ReportTargetRequest{TaskID: taskID}).Get(ctx, &target)
	if err != nil && (isTimeout(err) || captchaflow.FailureType(err) == activities.FailureTaskRunning) {
		err = temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task %s is still running after %s: report it once it has its result", taskID, reportSettleTimeout),
			captchaflow.FailureTaskNotSolved, nil)
	}
	return target, err
}

func windowClosed(taskID string, target activities.ReportTarget, closes time.Time, cause error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the provider's report window for task %s (provider task %s, submitted %s) closed at %s",
			taskID, target.ProviderTaskID, target.SubmittedAt.UTC().Format(time.RFC3339), closes.UTC().Format(time.RFC3339)),
		captchaflow.FailureReportWindowClosed, cause)
}

// BalanceCheckTimeout bounds one CheckBalance run: less than the schedule's minute, so runs never overlap.
const BalanceCheckTimeout = 50 * time.Second

// CheckBalance reads the balance once (FetchBalance records it as a gauge), started by captchaflow.BalanceScheduleID.
func CheckBalance(ctx workflow.Context) (activities.BalanceResult, error) {
	opts := withRetry(ctx, ProviderStartToClose, BalanceCheckTimeout,
		backoff(2*time.Second, 10*time.Second, activities.NonRetryableProviderErrors...))
	var res activities.BalanceResult
	err := workflow.ExecuteActivity(opts, acts.FetchBalance).Get(ctx, &res)
	return res, err
}
