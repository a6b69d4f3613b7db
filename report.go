package captchaflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Verdict is what the caller learned from the target site: the token was accepted (good) or refused (bad).
type Verdict string

const (
	VerdictGood Verdict = "good" // sent as res.php action=reportgood
	VerdictBad  Verdict = "bad"  // sent as res.php action=reportbad (the provider may refund it)
)

// VerdictOf is the verdict for "the target site accepted the token".
func VerdictOf(accepted bool) Verdict {
	if accepted {
		return VerdictGood
	}
	return VerdictBad
}

// Validate reports whether v is one of the two verdicts.
func (v Verdict) Validate() error {
	if v != VerdictGood && v != VerdictBad {
		return fmt.Errorf("verdict: must be %q or %q, got %.20q", VerdictGood, VerdictBad, string(v))
	}
	return nil
}

// ReportWindow is how long after a submission the provider still records a report on it. 2captcha documents
// ERROR_REPORT_NOT_RECORDED for a report sent more than 15 minutes after the captcha was submitted, and CaptchaAI
// speaks the same res.php protocol; captchaflow refuses later reports itself (FailureReportWindowClosed) rather than
// spend a request the provider would refuse, and stops retrying a report when the window closes.
const ReportWindow = 15 * time.Minute

// ReportInput is ReportVerdict's input. The task is named by the workflow ID (ReportWorkflowID), so that one task
// can only ever have one report workflow.
type ReportInput struct {
	Verdict Verdict `json:"verdict"`
}

// ReportResult is what ReportVerdict returns once the provider recorded the verdict.
type ReportResult struct {
	TaskID string `json:"task_id"`
	// ProviderTaskID is the provider task reported: the task's final submission, the one its Result came from.
	ProviderTaskID string  `json:"provider_task_id"`
	Verdict        Verdict `json:"verdict"`
	// SubmittedAt is when that submission was made: the report window runs from it.
	SubmittedAt time.Time `json:"submitted_at"`
	ReportedAt  time.Time `json:"reported_at"`
	// AlreadyRecorded: the provider answered ERROR_DUPLICATE_REPORT, i.e. it already held a report on this task
	// (e.g. our own, sent by an attempt whose answer was lost when the worker died).
	AlreadyRecorded bool `json:"already_recorded,omitempty"`
}

// reportIDSuffix ends every ReportVerdict workflow ID. "/" is outside the alphabet of task IDs
// (ValidateWorkflowID), so a report's workflow ID can never be a task's.
const reportIDSuffix = "/report"

// ReportWorkflowID is the workflow ID of the report on taskID: "<taskID>/report".
func ReportWorkflowID(taskID string) (string, error) {
	if err := ValidateWorkflowID(taskID); err != nil {
		return "", err
	}
	return taskID + reportIDSuffix, nil
}

// ReportedTaskID is the task ID a ReportVerdict workflow ID names, or an error if it names none.
func ReportedTaskID(reportWorkflowID string) (string, error) {
	taskID, ok := strings.CutSuffix(reportWorkflowID, reportIDSuffix)
	if !ok {
		return "", fmt.Errorf("workflow ID %.60q: a report's workflow ID is <task ID>%s", reportWorkflowID, reportIDSuffix)
	}
	if err := ValidateWorkflowID(taskID); err != nil {
		return "", err
	}
	return taskID, nil
}

// Report tells the provider whether the task's token worked on the target site (accepted: reportgood, else
// reportbad) and returns once the provider recorded it. See SendReport.
func Report(ctx context.Context, c client.Client, taskID string, accepted bool, opts ...StartOptions) error {
	_, err := SendReport(ctx, c, taskID, VerdictOf(accepted), opts...)
	return err
}

// SendReport reports verdict on the task's final provider task, exactly once: it starts the ReportVerdict workflow
// under ReportWorkflowID(taskID), or joins the one already running or completed, and waits for its result. The
// workflow retries the provider until its window closes and survives worker restarts; it works whether the task's
// workflow completed long ago or a moment ago.
//
// Repeating the same verdict is a no-op that returns the same result. A different verdict than the one already
// sent (or being sent) is refused with a *temporal.ApplicationError of type FailureVerdictConflict whose details
// hold the ReportResult that stands. The workflow's own failures are returned as they are (a
// *temporal.WorkflowExecutionError wrapping an ApplicationError of type FailureReportWindowClosed,
// FailureTaskNotSolved, FailureReportRefused, FailureInvalidInput, FailureProviderConfig …; FailureType names it).
// A failed report can be sent again, with either verdict: nothing reached the provider's record.
func SendReport(ctx context.Context, c client.Client, taskID string, verdict Verdict, opts ...StartOptions) (ReportResult, error) {
	id, err := ReportWorkflowID(taskID)
	if err != nil {
		return ReportResult{}, err
	}
	if err := verdict.Validate(); err != nil {
		return ReportResult{}, err
	}
	o := StartOptions{}
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.TaskQueue == "" {
		o.TaskQueue = DefaultTaskQueue
	}
	// USE_EXISTING joins a report in flight; ALLOW_DUPLICATE_FAILED_ONLY makes a completed report final (the SDK
	// then returns that run instead of an error) while a failed one can be sent again.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                o.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		StaticSummary:            fmt.Sprintf("report %s · %s", verdict, taskID),
	}, ReportWorkflowType, ReportInput{Verdict: verdict})
	if err != nil {
		return ReportResult{}, err
	}
	var res ReportResult
	if err := run.Get(ctx, &res); err != nil {
		return ReportResult{}, err
	}
	if res.Verdict != verdict {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task %s was already reported %s (provider task %s); a verdict cannot be changed to %s",
				taskID, res.Verdict, res.ProviderTaskID, verdict),
			FailureVerdictConflict, nil, res)
	}
	return res, nil
}

// FailureType is the type of the first temporal.ApplicationError in err's chain (one of the Failure… constants for
// captchaflow's own failures), or "" if there is none.
func FailureType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
