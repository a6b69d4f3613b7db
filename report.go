package captchaflow

import (
	"cmp"
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
	VerdictGood Verdict = "good" // res.php action=reportgood
	VerdictBad  Verdict = "bad"  // res.php action=reportbad (the provider may refund it)
)

func (v Verdict) Validate() error {
	if v != VerdictGood && v != VerdictBad {
		return fieldError("verdict", "must be %q or %q, got %.20q", VerdictGood, VerdictBad, string(v))
	}
	return nil
}

// ReportWindow: 2captcha answers ERROR_REPORT_NOT_RECORDED after 15 min, so later reports are refused here.
const ReportWindow = 15 * time.Minute

// ReportInput is ReportVerdict's input; the task is named by the workflow ID, so it has one report at most.
type ReportInput struct {
	Verdict Verdict `json:"verdict"`
}

// ReportResult is what ReportVerdict returns once the provider recorded the verdict.
type ReportResult struct {
	TaskID          string    `json:"task_id"`
	ProviderTaskID  string    `json:"provider_task_id"` // the final submission, the one the Result came from
	Verdict         Verdict   `json:"verdict"`
	SubmittedAt     time.Time `json:"submitted_at"` // the report window runs from it
	ReportedAt      time.Time `json:"reported_at"`
	AlreadyRecorded bool      `json:"already_recorded,omitempty"` // ERROR_DUPLICATE_REPORT, e.g. our own lost answer
}

const reportIDSuffix = "/report" // outside the task-ID alphabet, so a report's workflow ID is never a task's

// ReportWorkflowID is the workflow ID of the report on taskID: "<taskID>/report".
func ReportWorkflowID(taskID string) (string, error) {
	return taskID + reportIDSuffix, ValidateWorkflowID(taskID)
}

// ReportedTaskID is the task ID a ReportVerdict workflow ID names, or an error if it names none.
func ReportedTaskID(reportWorkflowID string) (string, error) {
	taskID, ok := strings.CutSuffix(reportWorkflowID, reportIDSuffix)
	if !ok {
		return "", fmt.Errorf("workflow ID %.60q: a report's workflow ID is <task ID>%s", reportWorkflowID, reportIDSuffix)
	}
	return taskID, ValidateWorkflowID(taskID)
}

// SendReport tells the provider, once, whether the task's token worked: it starts or joins ReportVerdict and waits.
// The same verdict again returns the same result, the other fails FailureVerdictConflict; a failed one can be resent.
func SendReport(ctx context.Context, c client.Client, taskID string, verdict Verdict, opts ...StartOptions) (ReportResult, error) {
	id, err := ReportWorkflowID(taskID)
	if err = cmp.Or(err, verdict.Validate()); err != nil {
		return ReportResult{}, err
	}
	// A completed report is final (the SDK returns its run), a failed one can run again.
	run, err := c.ExecuteWorkflow(ctx, startOptions(id, fmt.Sprintf("report %s · %s", verdict, taskID), opts),
		ReportWorkflowType, ReportInput{Verdict: verdict})
	if err != nil {
		return ReportResult{}, err
	}
	var res ReportResult
	if err := run.Get(ctx, &res); err != nil || res.Verdict == verdict {
		return res, err
	}
	return res, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("task %s was already reported %s (provider task %s); a verdict cannot be changed to %s",
			taskID, res.Verdict, res.ProviderTaskID, verdict), FailureVerdictConflict, nil, res)
}

// FailureType is the type of the first temporal.ApplicationError in err's chain, or "".
func FailureType(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return appErr.Type()
	}
	return ""
}

// startOptions joins a run in flight under id (USE_EXISTING) and starts again only after a failure.
func startOptions(id, summary string, opts []StartOptions) client.StartWorkflowOptions {
	opts = append(opts, StartOptions{}) // the zero value when none was passed
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                cmp.Or(opts[0].TaskQueue, DefaultTaskQueue),
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		StaticSummary:            summary,
	}
}
