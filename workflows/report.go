package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// MetricReports counts ReportVerdict runs by verdict (good, bad) and result (ReportSent, ReportAlreadyRecorded,
// ReportWindowClosed, ReportNotSolved, ReportRefused, ReportInvalid, ReportError). A caller joining a report in
// flight or repeating a finished one starts no run and is not counted.
const MetricReports = "captchaflow_reports_total"

// Results of MetricReports.
const (
	ReportSent            = "sent"
	ReportAlreadyRecorded = "already_recorded"
	ReportWindowClosed    = "window_closed"
	ReportNotSolved       = "not_solved"
	ReportRefused         = "refused"
	ReportInvalid         = "invalid_input"
	ReportError           = "error"
)

const (
	// reportSettleTimeout is how long a report waits for a task that is still running: long enough for a task
	// whose webhook has just been delivered to complete, short enough to tell a caller at once that an unsolved
	// task has nothing to report.
	reportSettleTimeout  = time.Minute
	reportSettleInterval = 2 * time.Second
	lookupStartToClose   = 30 * time.Second
	// minReportTime: a report with less of its window left than this is not attempted.
	minReportTime = time.Second
)

// ReportVerdict sends the caller's verdict on a solved task to the provider (res.php reportgood / reportbad) for
// the provider task its result came from. It runs under the workflow ID captchaflow.ReportWorkflowID(taskID), so a
// task has at most one report: callers start it with conflict policy USE_EXISTING and reuse policy
// ALLOW_DUPLICATE_FAILED_ONLY, and compare the verdict in its result with theirs (captchaflow.SendReport does).
//
// It reads the task's result (LookupReportTarget, waiting up to reportSettleTimeout for a task still running),
// refuses when the provider's window (captchaflow.ReportWindow after the submission) has passed, and otherwise
// sends the report, retrying transient trouble until the window closes.
func ReportVerdict(ctx workflow.Context, in captchaflow.ReportInput) (captchaflow.ReportResult, error) {
	res, outcome, err := report(ctx, in)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"verdict": reportVerdictTag(in.Verdict), "result": outcome}).
		Counter(MetricReports).Inc(1)
	if err != nil {
		workflow.GetLogger(ctx).Warn("report failed", "Verdict", in.Verdict, "Result", outcome, "Error", err)
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** %s", in.Verdict, outcome))
		return captchaflow.ReportResult{}, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** %s · provider task %s", res.Verdict, outcome, res.ProviderTaskID))
	return res, nil
}

// report does ReportVerdict's work and names its MetricReports result: check, look up, check the window, send.
func report(ctx workflow.Context, in captchaflow.ReportInput) (captchaflow.ReportResult, string, error) {
	taskID, err := reportedTask(ctx, in)
	if err != nil {
		return captchaflow.ReportResult{}, ReportInvalid, err
	}
	target, err := lookupTarget(ctx, in.Verdict, taskID)
	if err != nil {
		return captchaflow.ReportResult{}, reportOutcome(err), err
	}

	closes := target.SubmittedAt.Add(captchaflow.ReportWindow)
	left := closes.Sub(workflow.Now(ctx))
	if left < minReportTime {
		return captchaflow.ReportResult{}, ReportWindowClosed, windowClosed(taskID, target, closes, nil)
	}
	sent, err := sendVerdict(ctx, in.Verdict, taskID, target, closes, left)
	if err != nil {
		return captchaflow.ReportResult{}, reportOutcome(err), err
	}
	res := captchaflow.ReportResult{
		TaskID:          taskID,
		ProviderTaskID:  target.ProviderTaskID,
		Verdict:         in.Verdict,
		SubmittedAt:     target.SubmittedAt,
		ReportedAt:      workflow.Now(ctx),
		AlreadyRecorded: sent.AlreadyRecorded,
	}
	if sent.AlreadyRecorded {
		return res, ReportAlreadyRecorded, nil
	}
	return res, ReportSent, nil
}

// reportedTask is the task this report's workflow ID names, once the verdict is known to be valid; bad input
// fails for good, since no retry changes it.
func reportedTask(ctx workflow.Context, in captchaflow.ReportInput) (string, error) {
	taskID, err := captchaflow.ReportedTaskID(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if err == nil {
		err = in.Verdict.Validate()
	}
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(
			"invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	return taskID, nil
}

// lookupTarget reads which provider task the task's result came from, waiting a while for a task still running and
// then telling the caller it has nothing to report yet.
func lookupTarget(ctx workflow.Context, verdict captchaflow.Verdict, taskID string) (activities.ReportTarget, error) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** looking up task %s", verdict, taskID))
	var target activities.ReportTarget
	err := workflow.ExecuteActivity(lookupOptions(ctx), acts.LookupReportTarget,
		activities.ReportTargetRequest{TaskID: taskID}).Get(ctx, &target)
	if err != nil && (isTimeout(err) || hasFailureType(err, activities.FailureTaskRunning)) {
		err = temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task %s is still running after %s: report it once it has its result", taskID, reportSettleTimeout),
			captchaflow.FailureTaskNotSolved, nil)
	}
	return target, err
}

// sendVerdict sends the report to the provider, retrying within what is left of the window; retries that ran into
// its end make the report too late, whatever the last attempt met.
func sendVerdict(ctx workflow.Context, verdict captchaflow.Verdict, taskID string, target activities.ReportTarget,
	closes time.Time, left time.Duration) (activities.SendReportResult, error) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**report %s:** sending for provider task %s (window closes %s)",
		verdict, target.ProviderTaskID, closes.UTC().Format(time.RFC3339)))
	var sent activities.SendReportResult
	err := workflow.ExecuteActivity(sendReportOptions(ctx, left), acts.SendReport,
		activities.SendReportRequest{ProviderTaskID: target.ProviderTaskID, Verdict: verdict,
			Provider: target.Provider, Kind: target.Kind}).Get(ctx, &sent)
	if err != nil && (isTimeout(err) || isRetryable(err)) {
		err = windowClosed(taskID, target, closes, err)
	}
	return sent, err
}

func windowClosed(taskID string, target activities.ReportTarget, closes time.Time, cause error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the provider's report window for task %s (provider task %s, submitted %s) closed at %s",
			taskID, target.ProviderTaskID, target.SubmittedAt.UTC().Format(time.RFC3339), closes.UTC().Format(time.RFC3339)),
		captchaflow.FailureReportWindowClosed, cause)
}

// lookupOptions retry a task that is still running every reportSettleInterval for reportSettleTimeout.
func lookupOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    lookupStartToClose,
		ScheduleToCloseTimeout: reportSettleTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        reportSettleInterval,
			BackoffCoefficient:     1,
			MaximumInterval:        reportSettleInterval,
			NonRetryableErrorTypes: []string{captchaflow.FailureTaskNotSolved},
		},
	})
}

// reportFinalTypes are the SendReport failures no retry changes.
var reportFinalTypes = []string{captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown,
	captchaflow.FailureReportRefused, captchaflow.FailureReportWindowClosed, captchaflow.FailureInvalidInput}

// sendReportOptions retry transient provider trouble with backoff until the window closes.
func sendReportOptions(ctx workflow.Context, left time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(ProviderStartToClose, left),
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: left,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: reportFinalTypes,
		},
	})
}

// isRetryable: the activity failed with an error its retry policy would have retried, so the retries stopped
// because the schedule-to-close timeout (here: the end of the window) left no time for another attempt.
func isRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && !appErr.NonRetryable() && !slices.Contains(reportFinalTypes, appErr.Type())
}

func hasFailureType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

// reportOutcome is the MetricReports result of a failed report.
func reportOutcome(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case captchaflow.FailureTaskNotSolved:
			return ReportNotSolved
		case captchaflow.FailureReportWindowClosed:
			return ReportWindowClosed
		case captchaflow.FailureReportRefused:
			return ReportRefused
		case captchaflow.FailureInvalidInput:
			return ReportInvalid
		}
	}
	return ReportError
}

// reportVerdictTag keeps the metric's label values bounded whatever the input says.
func reportVerdictTag(v captchaflow.Verdict) string {
	if v == captchaflow.VerdictGood || v == captchaflow.VerdictBad {
		return string(v)
	}
	return "invalid"
}
