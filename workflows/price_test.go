package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

// lostAt is a lost Submit at provider, priced as Submit prices it.
func lostAtPriced(provider string, price float64) error {
	return temporal.NewApplicationError("the provider's answer was lost: EOF", activities.FailureSubmitOutcomeUnknown,
		activities.LostDetails{Provider: provider, Alternatives: 1, PriceUSD: price})
}

// observed records every Observe the task runs (a local activity: the routing model's input).
func (s *SolveCaptchaSuite) observed() *[]activities.ObserveRequest {
	var reqs []activities.ObserveRequest
	s.env.OnActivity(acts.Observe, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.ObserveRequest) error {
		reqs = append(reqs, req)
		return nil
	})
	return &reqs
}

var scoredRoute = &captchaflow.Route{Reason: captchaflow.RouteCheapest, Candidates: []captchaflow.RouteCandidate{{Provider: "a"}}}

// #29 §6: a lost submission whose callback solves the task was paid: cost_usd says its price, not $0.
func (s *SolveCaptchaSuite) TestLostSubmissionAnsweredIsPaidFor() {
	s.expectSubmitCalls(lostAtPriced("a", 0.002))
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "a-1", Code: "CODE-A1", Authenticated: true, RunID: testRunID,
		Submission: 1, Provider: "a"})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("CODE-A1", r.Code)
	s.InDelta(0.002, r.CostUSD, 1e-12, "the lost submission's price")
}

// #29 §5: a lost submission that never answered and was superseded by a later one's solve says nothing of how long
// its provider takes (it may never have been created): the model learns the solve alone, not "open for 170 s".
func (s *SolveCaptchaSuite) TestLostUnansweredSubmissionIsNotASlowSolve() {
	in := recaptcha()
	in.LostAnswerWaitSeconds = 140
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, lostAtPriced("a", 0.001)).Once()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "a-2", Provider: "a",
		PriceUSD: 0.001, Route: scoredRoute}, nil).Once()
	reqs := s.observed()
	s.signalAt(170*time.Second, captchaflow.Callback{ProviderTaskID: "a-2", Code: "CODE-A2", Authenticated: true, RunID: testRunID,
		Submission: 2, Provider: "a"})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.InDelta(0.002, r.CostUSD, 1e-12, "both may have been paid")
	s.Require().Len(*reqs, 1)
	s.Equal([]activities.Observation{{Provider: "a", Seconds: 30, Outcome: providers.ObservedSolved}}, (*reqs)[0].Observations)
}

// #29 suspicion: a token that died before its delivery began still hands the solve's submissions to the model
// (the delivery that would have carried them never starts).
func (s *SolveCaptchaSuite) TestExpiredBeforeDeliveryStillObserved() {
	in := recaptcha()
	in.NotifyURL, in.TokenTTLSeconds, in.CallbackTimeoutSeconds, in.DeadlineSeconds = "https://downstream.example/hook", 60, 600, 900
	in.MaxRefreshes = new(0)
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "a-1", Provider: "a",
		PriceUSD: 0.001, Route: scoredRoute}, nil).Once()
	reqs := s.observed()
	start := s.env.Now()
	s.env.RegisterDelayedCallback(func() { // a worker backlog: the ingress got it 240 s before the workflow ran
		s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "a-1", Code: "CODE-A1", Authenticated: true,
			RunID: testRunID, Submission: 1, Provider: "a", ReceivedAt: start.Add(60 * time.Second)})
	}, 300*time.Second)
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	s.Equal(captchaflow.FailureTokenExpired, s.failureType())
	s.Require().Len(*reqs, 1, "the observations are dropped with the delivery that never began")
	s.Equal([]activities.Observation{{Provider: "a", Seconds: 60, Outcome: providers.ObservedSolved}}, (*reqs)[0].Observations)
}

// #29 §6 for the other lost Submit: the worker died mid-request (a heartbeat timeout the lost-aware policy hands over
// as non-retryable). The provider may have created and will charge the task; its callback then solves the task
// through the signed URL. The workflow must know where it went and its price, as for SubmitOutcomeUnknown.
func TestLostByTimeoutIsPriced(t *testing.T) {
	beat, err := converter.GetDefaultDataConverter().ToPayloads(activities.LostDetails{Provider: "a", Alternatives: 1,
		GiveUpSeconds: 10, RunID: testRunID, PriceUSD: 0.002})
	require.NoError(t, err)
	err = activityFailure(enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, enumspb.TIMEOUT_TYPE_HEARTBEAT, beat)
	require.True(t, submitOutcomeUnknown(err))
	sub := &submission{}
	lostAt(sub, err, testRunID)
	assert.NotEmpty(t, sub.Provider, "where the lost submission went")
	assert.InDelta(t, 0.002, sub.price, 1e-12, "its price: it may have been paid")
	assert.Equal(t, 10*time.Second, sub.giveUp, "it may go elsewhere")
}

// A submission whose route says it was a probe hands its solve to the model as a probe's, so whichever worker learns
// it (this Observe, or the delivery that carries it) knows the provider recovered.
func (s *SolveCaptchaSuite) TestProbesSolveIsObservedAsAProbes() {
	probe := &captchaflow.Route{Reason: captchaflow.RouteProbe, Candidates: []captchaflow.RouteCandidate{{Provider: "a"}}}
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "a-1", Provider: "a",
		PriceUSD: 0.001, Route: probe}, nil).Once()
	reqs := s.observed()
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "a-1", Code: "CODE-A1", Authenticated: true, RunID: testRunID,
		Submission: 1, Provider: "a"})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	s.Equal("CODE-A1", s.result().Code)
	s.Require().Len(*reqs, 1)
	s.Equal([]activities.Observation{{Provider: "a", Seconds: 20, Outcome: providers.ObservedSolved, Probe: true}}, (*reqs)[0].Observations)
}
