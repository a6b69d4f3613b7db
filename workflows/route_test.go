package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// The routed callback path costs what the one-provider path costs: the provider comes in Submit's result and rides
// on the one searchable upsert (ProviderGivenUp, the only new local activity, is not mocked: a call would fail the
// test). The result, the status and its submission name the provider.
func (s *SolveCaptchaSuite) TestRoutedCallbackPathAddsNoCommand() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{
		ProviderTaskID: "cs-1", Provider: "capsolver", Alternatives: 1, GiveUpSeconds: 120}, nil).Once()
	var upserted []string
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(captchaflow.ProviderKey); ok {
			upserted = append(upserted, v)
		}
	}).Return(nil)
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(captchaflow.StatusQuery)
		s.Require().NoError(err)
		var st captchaflow.Status
		s.Require().NoError(v.Get(&st))
		s.Equal("capsolver", st.Provider)
		s.Equal("capsolver", st.Submissions[0].Provider)
		s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "cs-1", Code: "TOKEN",
			Authenticated: true, Submission: 1})
	}, 10*time.Second)
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal("capsolver", res.Provider)
	s.Equal([]string{"capsolver"}, upserted)
}

// A poll that finds its provider given up abandons the submission and submits elsewhere, excluding the provider,
// without counting it against max_submits; an unsolvable answer moves the next submission away (avoid).
func (s *SolveCaptchaSuite) TestGiveUpAndUnsolvableSteerTheNextSubmission() {
	in := recaptcha()
	in.MaxSubmits, in.CallbackTimeoutSeconds = 2, 5
	var reqs []activities.SubmitRequest
	results := []activities.SubmitResult{
		{ProviderTaskID: "a-1", Provider: "a", Alternatives: 1, GiveUpSeconds: 120},
		{ProviderTaskID: "b-1", Provider: "b", Alternatives: 1, GiveUpSeconds: 120},
		{ProviderTaskID: "b-2", Provider: "b", Alternatives: 0, GiveUpSeconds: 120},
	}
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			reqs = append(reqs, req)
			return results[len(reqs)-1], nil
		})
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.PollRequest) (activities.PollResult, error) {
			switch req.ProviderTaskID {
			case "a-1":
				s.True(req.GiveUp)
				return activities.PollResult{}, temporal.NewNonRetryableApplicationError("gave up", activities.FailureProviderGaveUp, nil, "a")
			case "b-1":
				return activities.PollResult{}, unsolvable()
			}
			s.Equal("b", req.Provider)
			return activities.PollResult{Code: "CODE-B2"}, nil
		})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal("b", res.Provider)
	s.Equal("CODE-B2", res.Code)
	s.Require().Len(reqs, 3)
	s.Equal([]string{"a"}, reqs[1].Exclude)
	s.Equal([]string{"b"}, reqs[2].Avoid)
}

// A callback from a candidate that did not take the submission (its pingback URL names a; b took the submission) is
// a's, for a's task (#20 §3): the result names a and a-1, so a verdict goes to the provider that solved it. What a
// says about its own task (unsolvable) says nothing about b's.
func (s *SolveCaptchaSuite) TestCandidateCallbackIsItsProviders() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{
		ProviderTaskID: "b-1", Provider: "b", Alternatives: 1, GiveUpSeconds: 120}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		for _, code := range []string{"ERROR_CAPTCHA_UNSOLVABLE", "CODE-A"} {
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "a-1", Code: code,
				Authenticated: true, Submission: 1, Provider: "a"})
		}
	}, 10*time.Second)
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(captchaflow.Result{Provider: "a", ProviderTaskID: "a-1", Code: "CODE-A"},
		captchaflow.Result{Provider: res.Provider, ProviderTaskID: res.ProviderTaskID, Code: res.Code})
}

// A lost submission's answer names the candidate it came from: the result is that provider's.
func (s *SolveCaptchaSuite) TestLostAnswerFromACandidateIsItsProviders() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		temporal.NewApplicationError("the provider's answer was lost: EOF", activities.FailureSubmitOutcomeUnknown,
			activities.LostDetails{Provider: "b", Alternatives: 1})).Once()
	s.env.RegisterDelayedCallback(func() {
		for _, code := range []string{"ERROR_CAPTCHA_UNSOLVABLE", "CODE-A"} {
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "a-1", Code: code,
				Authenticated: true, Submission: 1, Provider: "a"})
		}
	}, 5*time.Second)
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal([]string{"a", "a-1", "CODE-A"}, []string{res.Provider, res.ProviderTaskID, res.Code})
}

// A provider that lacks the task type (#29 §11) moves the task to the next provider, uncounted against max_submits
// (nothing was created), by excluding it from the next Submit; with no provider left (Alternatives 0, or the
// one-provider worker) the task fails with ProviderConfig at once, naming the refusal.
func (s *SolveCaptchaSuite) TestRefusedTaskTypeMovesToTheNextProvider() {
	in := recaptcha()
	in.MaxSubmits = 1
	var reqs []activities.SubmitRequest
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			if reqs = append(reqs, req); len(reqs) == 1 {
				return activities.SubmitResult{}, refusedType("a", 1)
			}
			return activities.SubmitResult{ProviderTaskID: "b-1", Provider: "b"}, nil
		})
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "b-1", Code: "CODE-B", Authenticated: true, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal([]string{"b", "CODE-B"}, []string{r.Provider, r.Code})
	s.Equal(1, r.Submits, "the refusal is no submission")
	s.Require().Len(reqs, 2)
	s.Equal([]string{"a"}, reqs[1].Exclude)
}

func (s *SolveCaptchaSuite) TestRefusedTaskTypeWithNoProviderLeftFails() {
	for _, provider := range []string{"b", ""} { // the last routed provider; the one-provider worker
		s.SetupTest()
		s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, refusedType(provider, 0)).Once()
		s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
		s.Equal(captchaflow.FailureProviderConfig, s.failureType(), provider)
		s.ErrorContains(s.env.GetWorkflowError(), "no provider this task may use takes its task type")
	}
}

func refusedType(provider string, alternatives int) error {
	return temporal.NewNonRetryableApplicationError("createtask anticaptcha createTask: ERROR_TASK_NOT_SUPPORTED (unsupported)",
		activities.FailureProviderUnsupported, nil, activities.LostDetails{Provider: provider, Alternatives: alternatives})
}

// A provider removed from PROVIDERS_FILE while the task's submission is open there (no alternative when it was
// submitted): the poll gives the submission up, and the next submission goes where the file now says, uncounted.
func (s *SolveCaptchaSuite) TestSubmissionAtARemovedProviderGoesWhereTheFileNowSays() {
	in := recaptcha()
	in.MaxSubmits = 1
	var reqs []activities.SubmitRequest
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			reqs = append(reqs, req)
			return []activities.SubmitResult{{ProviderTaskID: "gone-1", Provider: "gone", GiveUpSeconds: 120},
				{ProviderTaskID: "new-1", Provider: "new", GiveUpSeconds: 120}}[len(reqs)-1], nil
		})
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.PollRequest) (activities.PollResult, error) {
			if req.Provider == "gone" {
				return activities.PollResult{}, temporal.NewNonRetryableApplicationError(`provider "gone" is not in this worker's `+
					"PROVIDERS_FILE: submission given up", activities.FailureProviderGaveUp, nil, "gone")
			}
			return activities.PollResult{Code: "CODE-NEW"}, nil
		})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal([]string{"new", "CODE-NEW"}, []string{res.Provider, res.Code})
	s.Require().Len(reqs, 2)
	s.Equal([]string{"gone"}, reqs[1].Exclude)
}
