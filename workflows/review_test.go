package workflows

// Review findings for the issue-14 rework: each test fails on the code it was written against.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

const testRunID = "default-test-run-id"

// Two submissions in a row lose their in.php answer. Submission 1's answer comes (late, by its own named pingback)
// while submission 2's lost-answer wait runs. It is a paid, fresh solution of this round and must be the result at
// once; instead waitLostAnswer only looks at submission 2, waits out lost_answer_wait_seconds, and with the default
// max_submits=2 the task then fails Unsolvable with the answer sitting in the table.
func (s *SolveCaptchaSuite) TestReviewEarlierLostAnswerDuringLaterLostWait() {
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

// Under PROVIDER_THREADS (slots version 2) the slot is released when the attempt ends, but admission.granted stays
// true, so keepSlot keeps running in every later wait: during the delivery (and a refusal's backoff) it starts a
// fresh hold timer and, every SlotReaskInterval, re-asserts (AcquireSlot Held) the slot it already gave back. The
// semaphore queues and grants that request again, so a delivering task takes a provider thread it never releases
// until the semaphore's reclaim finds the task ended.
func TestReviewNoSlotReassertedAfterRelease(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true})
	}, 5*time.Second)
	e.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).After(70 * time.Second).Return(nil).Once()
	in := recaptcha()
	in.NotifyURL = "https://downstream.example/hook"
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, in)

	require.NoError(t, e.env.GetWorkflowError())
	require.Len(t, e.released, 1)
	for _, req := range e.acquired {
		assert.False(t, req.Held, "a slot re-asserted after it was released (during the delivery): %+v", req)
	}
}

// Same root cause as above, other door: solve checks max_submits (and attempt fails on any non-resubmit error)
// without looking at the table. Submission 1 is lost, its wait ends, submission 2's in.php request is made, and
// while it runs submission 1's answer comes (the table takes it: take-late-lost-answer). in.php then refuses
// submission 2; with max_submits=2 the task fails Unsolvable, throwing away the paid answer it holds.
func (s *SolveCaptchaSuite) TestReviewLateLostAnswerDuringRefusedSubmit() {
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

// A run whose every pingback URL names its run and submission can only receive a URL-without-names callback from
// an earlier run of the same workflow ID (started before the deploy). table.routeUnknown still holds such a
// callback in t.unplaced while a submission is being made, learnID keeps it there when the ID does not match, and
// table.lost then takes it as the next lost submission's answer: an earlier run's code delivered as this run's.
func (s *SolveCaptchaSuite) TestReviewEarlierRunLegacyCallbackHeldThenTakenAsLostAnswer() {
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
