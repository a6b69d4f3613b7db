package workflows

import (
	"errors"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

func zeroBalanceErr(wait time.Duration) error {
	return temporal.NewApplicationErrorWithOptions("captchaai submit: ERROR_ZERO_BALANCE", activities.FailureProviderZeroBalance,
		temporal.ApplicationErrorOptions{NextRetryDelay: wait, Details: []any{"ERROR_ZERO_BALANCE", wait}})
}

func (s *SolveCaptchaSuite) queryStatus() captchaflow.Status {
	v, err := s.env.QueryWorkflow(captchaflow.StatusQuery)
	s.Require().NoError(err)
	var st captchaflow.Status
	s.Require().NoError(v.Get(&st))
	return st
}

// ERROR_ZERO_BALANCE pauses the task: it waits the activity's paced minute in awaiting_balance (the status says why
// and since when), submits again, and once in.php accepts it carries on as usual. Three refusals neither fail the
// task nor count against max_submits (2).
func (s *SolveCaptchaSuite) TestZeroBalancePausesSubmissionsUntilTheBalanceIsBack() {
	var submitsAt []time.Duration
	start := s.env.Now()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).
		Run(func(mock.Arguments) { submitsAt = append(submitsAt, s.env.Now().Sub(start)) }).
		Return(activities.SubmitResult{}, zeroBalanceErr(55*time.Second)).Times(3)
	s.expectSubmit("111")
	var waiting, after captchaflow.Status
	s.env.RegisterDelayedCallback(func() { waiting = s.queryStatus() }, 100*time.Second)
	s.env.RegisterDelayedCallback(func() { after = s.queryStatus() }, 170*time.Second)
	s.signalAt(180*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "C", Authenticated: true, RunID: testRunID, Submission: 4})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal(1, r.Submits, "the refused requests were no submissions")
	s.Equal([]time.Duration{0, 55 * time.Second, 110 * time.Second}, submitsAt, "in.php is asked again after the paced wait")
	s.Equal(captchaflow.PhaseAwaitingBalance, waiting.Phase)
	s.Equal(captchaflow.WaitingZeroBalance, waiting.Waiting)
	s.True(start.Equal(waiting.WaitingSince), "%v", waiting.WaitingSince)
	s.Equal(0, waiting.Submits)
	s.Equal(captchaflow.PhaseAwaitingCallback, after.Phase)
	s.Empty(after.Waiting, "the pause ends with the accepted submission")
	s.True(after.WaitingSince.IsZero())
}

// The deadline keeps counting through the pause: a balance still zero when it runs out fails the task
// DeadlineExceeded, and the failure says the balance was zero.
func (s *SolveCaptchaSuite) TestZeroBalanceUntilTheDeadlineSaysWhy() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, zeroBalanceErr(time.Minute))
	in := recaptcha()
	in.DeadlineSeconds = 150
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureDeadlineExceeded, s.failureType())
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(s.env.GetWorkflowError(), &appErr))
	s.True(strings.Contains(appErr.Message(), "balance was zero"), appErr.Message())
}
