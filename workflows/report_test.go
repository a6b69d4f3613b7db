package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

type ReportVerdictSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
	t0  time.Time
}

func TestReportVerdict(t *testing.T) { suite.Run(t, new(ReportVerdictSuite)) }

func (s *ReportVerdictSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	Register(s.env, &activities.Activities{}, Settings{})
	s.t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	s.env.SetStartTime(s.t0)
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "order-42/report"})
}

func (s *ReportVerdictSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

// solvedAgo makes LookupReportTarget answer a task submitted d before the report started.
func (s *ReportVerdictSuite) solvedAgo(d time.Duration) activities.ReportTarget {
	target := activities.ReportTarget{ProviderTaskID: "7300000042", SubmittedAt: s.t0.Add(-d), ReceivedAt: s.t0.Add(-d + 20*time.Second)}
	s.env.OnActivity(acts.LookupReportTarget, mock.Anything, activities.ReportTargetRequest{TaskID: "order-42"}).
		Return(target, nil).Once()
	return target
}

func (s *ReportVerdictSuite) failureType() string {
	s.Require().True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr.Type()
}

func (s *ReportVerdictSuite) result() captchaflow.ReportResult {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var r captchaflow.ReportResult
	s.Require().NoError(s.env.GetWorkflowResult(&r))
	return r
}

// The report goes to the provider task of the task's result, once, with the caller's verdict.
func (s *ReportVerdictSuite) TestSendsTheVerdictOnce() {
	target := s.solvedAgo(time.Minute)
	s.env.OnActivity(acts.SendReport, mock.Anything, activities.SendReportRequest{ProviderTaskID: "7300000042", Verdict: captchaflow.VerdictBad}).
		Return(activities.SendReportResult{}, nil).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictBad})

	r := s.result()
	s.Equal(captchaflow.ReportResult{TaskID: "order-42", ProviderTaskID: "7300000042", Verdict: captchaflow.VerdictBad,
		SubmittedAt: target.SubmittedAt, ReportedAt: r.ReportedAt}, r)
	s.False(r.ReportedAt.IsZero())
}

// Transient provider trouble is retried; the report is made by exactly one successful request, and a duplicate
// answer (our own earlier attempt got through) is a success.
func (s *ReportVerdictSuite) TestTransientTroubleRetriedUntilRecorded() {
	s.solvedAgo(time.Minute)
	req := activities.SendReportRequest{ProviderTaskID: "7300000042", Verdict: captchaflow.VerdictGood}
	s.env.OnActivity(acts.SendReport, mock.Anything, req).
		Return(activities.SendReportResult{}, temporal.NewApplicationError("HTTP 503", activities.FailureProviderTransient)).Twice()
	s.env.OnActivity(acts.SendReport, mock.Anything, req).Return(activities.SendReportResult{AlreadyRecorded: true}, nil).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictGood})

	r := s.result()
	s.True(r.AlreadyRecorded)
	s.Equal(captchaflow.VerdictGood, r.Verdict)
}

// A provider that stays down until the window closes: the report fails ReportWindowClosed, not a generic error,
// and no attempt is made after the window.
func (s *ReportVerdictSuite) TestRetriesStopAtTheWindow() {
	s.solvedAgo(14 * time.Minute)
	var last time.Time
	s.env.OnActivity(acts.SendReport, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.SendReportRequest) (activities.SendReportResult, error) {
			last = s.env.Now()
			return activities.SendReportResult{}, temporal.NewApplicationError("HTTP 503", activities.FailureProviderTransient)
		})
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictBad})

	s.Equal(captchaflow.FailureReportWindowClosed, s.failureType())
	s.True(last.Before(s.t0.Add(time.Minute)), "last attempt at %s, the window closed at %s", last, s.t0.Add(time.Minute))
}

// A task solved longer ago than the window is refused before anything is sent.
func (s *ReportVerdictSuite) TestWindowPassed() {
	s.solvedAgo(captchaflow.ReportWindow + time.Second)
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictBad})

	s.Equal(captchaflow.FailureReportWindowClosed, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "7300000042")
}

// The provider saying it no longer knows the task is the window too.
func (s *ReportVerdictSuite) TestProviderForgotTheTask() {
	s.solvedAgo(time.Minute)
	s.env.OnActivity(acts.SendReport, mock.Anything, mock.Anything).Return(activities.SendReportResult{},
		temporal.NewNonRetryableApplicationError("ERROR_WRONG_CAPTCHA_ID", captchaflow.FailureReportWindowClosed, nil)).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictBad})

	s.Equal(captchaflow.FailureReportWindowClosed, s.failureType())
}

func (s *ReportVerdictSuite) TestReportRefused() {
	s.solvedAgo(time.Minute)
	s.env.OnActivity(acts.SendReport, mock.Anything, mock.Anything).Return(activities.SendReportResult{},
		temporal.NewNonRetryableApplicationError("ERROR_REPORT_NOT_RECORDED", captchaflow.FailureReportRefused, nil)).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictBad})

	s.Equal(captchaflow.FailureReportRefused, s.failureType())
}

// A task without a result is refused, and nothing is sent.
func (s *ReportVerdictSuite) TestTaskNotSolved() {
	s.env.OnActivity(acts.LookupReportTarget, mock.Anything, mock.Anything).Return(activities.ReportTarget{},
		temporal.NewNonRetryableApplicationError("task order-42 ended failed without a result (Unsolvable)", captchaflow.FailureTaskNotSolved, nil)).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictGood})

	s.Equal(captchaflow.FailureTaskNotSolved, s.failureType())
}

// A task still running is waited for a short while (its webhook may just have been delivered), then refused.
func (s *ReportVerdictSuite) TestTaskStillRunning() {
	calls := 0
	s.env.OnActivity(acts.LookupReportTarget, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ReportTargetRequest) (activities.ReportTarget, error) {
			calls++
			return activities.ReportTarget{}, temporal.NewApplicationError("task order-42 is still running", activities.FailureTaskRunning)
		})
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictGood})

	s.Equal(captchaflow.FailureTaskNotSolved, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "still running")
	s.Greater(calls, 5)
}

// A task that completes while the report waits for it is reported.
func (s *ReportVerdictSuite) TestTaskCompletesWhileWaiting() {
	s.env.OnActivity(acts.LookupReportTarget, mock.Anything, mock.Anything).Return(activities.ReportTarget{},
		temporal.NewApplicationError("task order-42 is still running", activities.FailureTaskRunning)).Twice()
	s.solvedAgo(time.Minute)
	s.env.OnActivity(acts.SendReport, mock.Anything, mock.Anything).Return(activities.SendReportResult{}, nil).Once()
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictGood})

	s.Equal("7300000042", s.result().ProviderTaskID)
}

func (s *ReportVerdictSuite) TestInvalidVerdict() {
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: "maybe"})
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
}

// Started from the CLI under an ID that names no task.
func (s *ReportVerdictSuite) TestWorkflowIDNamesNoTask() {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "order-42"})
	s.env.ExecuteWorkflow(ReportVerdict, captchaflow.ReportInput{Verdict: captchaflow.VerdictGood})
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "/report")
}
