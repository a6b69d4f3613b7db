package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// The held answer delivered after the first token expired is another result: under the expired token's webhook-id, a
// receiver that stored that ID when an attempt reached it (cut off at expiry, a slow 2xx) would drop it as a duplicate.
func (s *SolveCaptchaSuite) TestHeldTokenHasAWebhookIDOfItsOwn() {
	chain := s.asResetRun()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "OWN", Authenticated: true, RunID: req.RunID, Submission: 1})
			return activities.SubmitResult{ProviderTaskID: "901", RunID: req.RunID}, nil
		}).Once()
	calls := s.deliverFailingFor("OWN")
	s.signalAt(60*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	r := s.result()
	s.Equal("DISCARDED", r.Code, "the held answer was delivered")
	last := (*calls)[len(*calls)-1]
	s.Equal("DISCARDED", last.res.Code)
	s.NotEqual((*calls)[0].refresh, last.refresh, "another token, another result: a webhook-id of its own")
}

// A lost submission's paid answer that comes while the first token is being delivered (the solve superseded it) is
// delivered when that token expires, instead of a paid refresh.
func (s *SolveCaptchaSuite) TestLostAnswerComeDuringDeliveryIsDeliveredInsteadOfARefresh() {
	s.expectSubmitCalls(lostAnswer(), "222")
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "333"}, nil).Maybe()
	s.deliverFailingFor("CODE-222")
	s.signalAt(15*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	s.signalAt(60*time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "LOST", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(200*time.Second, captchaflow.Callback{ProviderTaskID: "333", Code: "CODE-333", Authenticated: true, RunID: testRunID, Submission: 3})
	in := withNotify(recaptcha())
	in.LostAnswerWaitSeconds = 10
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal("LOST", r.Code, "the lost submission's paid answer, live, is delivered")
	s.Zero(r.Refreshes, "no refresh paid")
}

// A callback on a settled submission's URL naming another provider task (a leaked URL, as onCallback takes it) cannot
// bar the refresh the task is owed with a proxy word.
func (s *SolveCaptchaSuite) TestProxyWordNamingAnotherTaskDoesNotBarTheRefresh() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "222"}, nil).Once()
	s.deliverFailingFor("CODE-111")
	s.signalAt(time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "999", Code: "ERROR_PROXY_NOT_AUTHORISED", Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(140*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	r := s.result()
	s.Equal("CODE-222", r.Code)
	s.Equal(1, r.Refreshes)
}

// A reset run's submission 1, still asking in.php, is superseded by a discarded submission 2's code; the discarded
// submission 1's pingback then comes on that URL number and is held. Delivered once the first token expires, it names
// the provider the callback's URL names: its Submit never answered, so the run knew none (seed 6253 at 14 000).
func (s *SolveCaptchaSuite) TestHeldAnswerOfACancelledSubmitNamesItsProvider() {
	chain := s.asResetRun()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{},
		temporal.NewApplicationError("ERROR_NO_SLOT_AVAILABLE", activities.FailureProviderTransient))
	s.deliverFailingFor("ADOPTED")
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "902", Code: "ADOPTED", Authenticated: true, RunID: chain, Submission: 2, Provider: "a"})
	s.signalAt(60*time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "HELD", Authenticated: true, RunID: chain, Submission: 1, Provider: "a"})
	s.env.ExecuteWorkflow(SolveCaptcha, withNotify(recaptcha()))
	r := s.result()
	s.Equal("HELD", r.Code, "the held answer was delivered")
	s.Equal("a", r.Provider, "the provider its pingback's URL names")
}

// A poll's code stamped by a worker whose clock runs ahead is held to the workflow's time when settled; once that token
// expires undelivered, its own filed answer, still bearing the ahead stamp, is not another paid answer to hand over
// (seed 16674 at 20 000: the same dead token went out again, past its life, under a new webhook-id).
func (s *SolveCaptchaSuite) TestExpiredTokenIsNotHandedOverAsItsOwnHeldAnswer() {
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "901"}, nil).Once()
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(func(context.Context, activities.PollRequest) (activities.PollResult, error) {
		return activities.PollResult{Code: "AHEAD", ReceivedAt: s.env.Now().Add(40 * time.Second)}, nil
	}).Once()
	calls := s.deliverFailingFor("AHEAD")
	in := withNotify(recaptcha())
	in.MaxRefreshes = new(int)
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.tokenExpiredDetails()
	s.neverExpired(*calls)
	for _, c := range *calls {
		s.Zero(c.refresh, "one token, one webhook-id")
	}
}
