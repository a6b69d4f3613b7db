package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

func v3WithAction() captchaflow.Input {
	in := recaptcha()
	in.Params["version"], in.Params["action"] = "v3", "login"
	return in
}

// A reCAPTCHA v3 task's action reaches Submit (1.0 refused params.action: providers solved for a default action).
func (s *SolveCaptchaSuite) TestV3ActionIsSubmitted() {
	var params map[string]string
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		params = args.Get(1).(activities.SubmitRequest).Params
	}).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, v3WithAction())
	s.Equal("CODE", s.result().Code)
	s.Equal("login", params["action"])
}

// A history 1.0 recorded (no provider-quirks marker) replays as it ran: params.action refused.
func (s *SolveCaptchaSuite) TestV3ActionAsRecordedBefore() {
	s.env.OnGetVersion(changeQuirks, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	s.env.ExecuteWorkflow(SolveCaptcha, v3WithAction())
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), "params.action")
	s.env.AssertActivityNotCalled(s.T(), "Submit", mock.Anything, mock.Anything)
}

// The ID ".." is a dot segment a client drops from the pingback URL: refused, naming the workflow ID.
func (s *SolveCaptchaSuite) TestDotSegmentWorkflowIDIsInvalid() {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ".."})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.env.GetWorkflowError().Error(), `workflow ID ".."`)
	s.env.AssertActivityNotCalled(s.T(), "Submit", mock.Anything, mock.Anything)
}

// A task 1.0 started under the ID ".." (no marker) carries on as it did.
func (s *SolveCaptchaSuite) TestDotSegmentWorkflowIDAsRecordedBefore() {
	s.env.OnGetVersion(changeQuirks, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ".."})
	s.expectSubmit("111")
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal("CODE", s.result().Code)
}
