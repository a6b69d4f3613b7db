package workflows

// Where features meet: lost answers × later submissions, refusals, slots and earlier runs.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

const testRunID = "default-test-run-id"

// Submission 1's answer (lost, then late by its own named pingback) comes during submission 2's lost-answer wait:
// it is a paid, fresh solution of this round and is the result at once.
func (s *SolveCaptchaSuite) TestEarlierLostAnswerDuringLaterLostWait() {
	s.expectSubmitCalls(lostAnswer(), lostAnswer())
	in := recaptcha()
	in.LostAnswerWaitSeconds = 60
	// Submission 1 is lost at ~0 s; its wait ends at 60 s; submission 2 is lost at ~60 s and waits until ~120 s.
	s.signalAt(80*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true,
		RunID: testRunID, Submission: 1})
	start := s.env.Now()
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("CODE-111", r.Code)
	s.Equal("111", r.ProviderTaskID)
	s.Less(s.env.Now().Sub(start), 90*time.Second, "taken when it came, not after submission 2's wait")
}

// A released slot is not asked for again: during the delivery the task holds no slot.
func TestNoSlotReassertedAfterRelease(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 5*time.Second)
	e.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).After(70 * time.Second).Return(nil).Once()
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, in)

	require.NoError(t, e.env.GetWorkflowError())
	require.Len(t, e.released, 1)
	assert.Len(t, e.acquired, 1, "asked once, nothing during the delivery")
}

// A lost submission's late answer that comes while the next in.php request is refused is the result, even with
// max_submits spent.
func (s *SolveCaptchaSuite) TestLateLostAnswerDuringRefusedSubmit() {
	s.expectSubmitCalls(lostAnswer())
	s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).Once().
		Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111",
				Authenticated: true, RunID: testRunID, Submission: 1})
			return activities.SubmitResult{}, unsolvable()
		})
	in := recaptcha()
	in.LostAnswerWaitSeconds = 60
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("CODE-111", r.Code)
}

// A callback from a URL that names only the workflow, arriving while a submission is made, is never the answer
// of a later lost submission unless it is one by the rules of such URLs.
func (s *SolveCaptchaSuite) TestEarlierRunLegacyCallbackHeldThenTakenAsLostAnswer() {
	s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).Once().
		Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
			// The earlier run's pingback URL named only the workflow: no RunID, no Submission.
			s.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "900", Code: "EARLIER-RUN",
				Authenticated: true})
			return activities.SubmitResult{ProviderTaskID: "111"}, nil
		})
	s.expectSubmitCalls(lostAnswer())
	s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_CAPTCHA_UNSOLVABLE",
		Authenticated: true, RunID: testRunID, Submission: 1})
	s.signalAt(30*time.Second, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE-222",
		Authenticated: true, RunID: testRunID, Submission: 2})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())

	r := s.result()
	s.Equal("CODE-222", r.Code, "the lost submission's own answer, not the earlier run's")
}

// Submission 1's answer comes while submission 2's in.php request is being retried (no slot at the provider): the
// retries stop at once, and the token's life counts from when the answer arrived, not from when it was taken.
func (s *SolveCaptchaSuite) TestLostAnswerDuringSubmitRetriesStopsThem() {
	s.expectSubmitCalls(lostAnswer())
	var late []time.Time
	start := s.env.Now()
	s.env.OnActivity(acts.Submit, mock.Anything, recaptchaSubmit()).Return(
		func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
			if s.env.Now().Sub(start) > 60*time.Second {
				late = append(late, s.env.Now())
			}
			return activities.SubmitResult{}, temporal.NewApplicationError("ERROR_NO_SLOT_AVAILABLE", activities.FailureProviderTransient)
		})
	in := recaptcha()
	in.LostAnswerWaitSeconds = 30
	s.signalAt(60*time.Second, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111", Authenticated: true,
		RunID: testRunID, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)

	r := s.result()
	s.Equal("CODE-111", r.Code)
	s.Empty(late, "in.php asked again after the lost submission's answer arrived")
	s.Equal(60*time.Second, r.ReceivedAt.Sub(start), "received_at is when the answer arrived")
}
