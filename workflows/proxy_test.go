package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

func proxied() captchaflow.Input {
	in := recaptcha()
	in.Params["proxy"], in.Params["proxytype"] = "login:hunter2@203.0.113.7:3128", "HTTP"
	in.MaxSubmits = 3
	return in
}

// failureMessage is the task's ApplicationError message.
func (s *SolveCaptchaSuite) failureMessage() string {
	var appErr *temporal.ApplicationError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &appErr)
	return appErr.Message()
}

// A proxy no provider can reach is InvalidInput naming params.proxy, its password never echoed; nothing is submitted.
func (s *SolveCaptchaSuite) TestAPrivateProxyIsInvalidInput() {
	in := proxied()
	in.Params["proxy"] = "login:hunter2@192.168.1.10:3128"
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureInvalidInput, s.failureType())
	s.Contains(s.failureMessage(), "params.proxy")
	s.NotContains(s.failureMessage(), "hunter2")
	s.env.AssertActivityNotCalled(s.T(), "Submit", mock.Anything, mock.Anything)
}

// A history recorded before proxies were checked took such a proxy: replayed, it still does.
func (s *SolveCaptchaSuite) TestAPrivateProxyReplaysAsTakenBeforeTheChange() {
	s.env.OnGetVersion(changeProxies, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	in := proxied()
	in.Params["proxy"] = "10.0.0.1:3128"
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal("CODE", s.result().Code)
}

// A proxy word in the callback ends the task ProxyRejected, naming the word and the host: one payment, no resubmission.
func (s *SolveCaptchaSuite) TestAProxyWordInTheCallbackEndsTheTask() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_PROXY_CONNECTION_FAILED", Authenticated: true,
		RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, proxied())
	s.Equal(captchaflow.FailureProxyRejected, s.failureType())
	s.Contains(s.failureMessage(), "ERROR_PROXY_CONNECTION_FAILED")
	s.Contains(s.failureMessage(), "203.0.113.7")
	s.NotContains(s.failureMessage(), "hunter2")
}

// Recorded before the change, ERROR_PROXY_CONNECTION_FAILED resubmitted: such a history replays so.
func (s *SolveCaptchaSuite) TestAProxyWordReplaysAsResubmittedBeforeTheChange() {
	s.env.OnGetVersion(changeProxies, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Once()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_PROXY_CONNECTION_FAILED", Authenticated: true,
		RunID: testRunID, Submission: 1})
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 2})
	in := proxied()
	in.Params["proxy"] = "10.0.0.1:3128" // taken then as well
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(2, s.result().Submits)
}

// A poll's proxy word (it names no host) ends the task named from the input; ERROR_WRONG_USERAGENT names the user agent.
func (s *SolveCaptchaSuite) TestAPolledProxyWordEndsTheTaskNamingTheHostOrUserAgent() {
	for word, want := range map[string]string{"ERROR_PROXY_BANNED": "host 203.0.113.7", "ERROR_WRONG_USERAGENT": `"Mozilla/5.0 test"`} {
		s.SetupTest()
		s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
		s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{},
			temporal.NewNonRetryableApplicationError("createtask anticaptcha getTaskResult: "+word, captchaflow.FailureProxyRejected, nil, word)).Once()
		in := proxied()
		in.Params["userAgent"] = "Mozilla/5.0 test"
		in.CallbackTimeoutSeconds = 5
		s.env.ExecuteWorkflow(SolveCaptcha, in)
		s.Equal(captchaflow.FailureProxyRejected, s.failureType(), word)
		s.Contains(s.failureMessage(), word)
		s.Contains(s.failureMessage(), want)
		s.NotContains(s.failureMessage(), "hunter2")
	}
}

// A Submit refused for the proxy ends the task at once: no second submission with the same proxy.
func (s *SolveCaptchaSuite) TestASubmitRefusedForTheProxyIsNotResubmitted() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		activities.ProxyRejected("ERROR_BAD_PROXY", proxied().Params)).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, proxied())
	s.Equal(captchaflow.FailureProxyRejected, s.failureType())
	s.Contains(s.failureMessage(), "ERROR_BAD_PROXY")
}

// A submission whose answer was lost, called back with a proxy word, ends the task: not submitted again.
func (s *SolveCaptchaSuite) TestALostSubmitsProxyWordEndsTheTask() {
	at := s.expectSubmitCalls(lostAnswer())
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_PROXY_CONNECT_TIMEOUT", Authenticated: true,
		RunID: "default-test-run-id", Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, proxied())
	s.Equal(captchaflow.FailureProxyRejected, s.failureType())
	s.Contains(s.failureMessage(), "ERROR_PROXY_CONNECT_TIMEOUT")
	s.Len(*at, 1)
}

// A lost submission's proxy word that comes while the next Submit is still being made (retried on a busy provider)
// cancels it and ends the task: the same proxy is not paid for again.
func (s *SolveCaptchaSuite) TestALateLostProxyWordCancelsTheNextSubmit() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, lostAnswer()).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(5*time.Minute).
		Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Maybe()
	in := proxied()
	in.LostAnswerWaitSeconds = 10
	s.signalAt(time.Minute, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_PROXY_BANNED", Authenticated: true,
		RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureProxyRejected, s.failureType())
	s.Contains(s.failureMessage(), "ERROR_PROXY_BANNED")
}

// An unauthenticated callback's confirmation that answers a proxy word ends the task then, not at the callback timeout.
func (s *SolveCaptchaSuite) TestAConfirmationsProxyWordEndsTheTask() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(activities.PollResult{},
		temporal.NewNonRetryableApplicationError("ERROR_PROXY_CONNECTION_FAILED", captchaflow.FailureProxyRejected, nil,
			"ERROR_PROXY_CONNECTION_FAILED")).Once()
	in := proxied()
	in.CallbackTimeoutSeconds = 600
	in.DeadlineSeconds = 900
	start := s.env.Now()
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureProxyRejected, s.failureType())
	s.Less(s.env.Now().Sub(start), time.Minute)
}
