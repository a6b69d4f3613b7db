package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// A callback that overtakes Submit's result (the provider called back before in.php answered) needs no callback
// timer: it costs an action and two events per task on the fastest path.
func (s *SolveCaptchaSuite) TestCallbackBeforeSubmitResultStartsNoTimer() {
	timers := 0
	s.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
		s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE",
			Authenticated: true, RunID: testRunID, Submission: 1})
		return activities.SubmitResult{ProviderTaskID: "111"}, nil
	}).Once()
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	var r captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&r))
	s.Equal("CODE", r.Code)
	s.Zero(timers, "the callback was in before the timer would start")
}
