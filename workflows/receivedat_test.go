package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// backlog is how late the worker's workflow task runs after an activity got the code (a single worker restarting).
const backlog = 90 * time.Second

// solvedAt runs a task whose code comes as arrange has it and returns its result and its start.
func (s *SolveCaptchaSuite) solvedAt(arrange func(env *testsuite.TestWorkflowEnvironment, start time.Time)) (captchaflow.Result, time.Time) {
	env := s.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	start := env.Now()
	arrange(env, start)
	in := recaptcha()
	in.CallbackTimeoutSeconds = 10
	env.ExecuteWorkflow(SolveCaptcha, in)
	s.Require().True(env.IsWorkflowCompleted())
	s.Require().NoError(env.GetWorkflowError())
	var r captchaflow.Result
	s.Require().NoError(env.GetWorkflowResult(&r))
	env.AssertExpectations(s.T())
	return r, start
}

// pollAnswers makes Poll answer code, stamped by the activity's clock at stamp(now) for a completion seen after wait.
func pollAnswers(env *testsuite.TestWorkflowEnvironment, wait time.Duration, stamp func(now time.Time) time.Time) {
	env.OnActivity(acts.Poll, mock.Anything, mock.Anything).After(wait).Return(
		func(context.Context, activities.PollRequest) (activities.PollResult, error) {
			return activities.PollResult{Code: "CODE-111", ReceivedAt: stamp(env.Now())}, nil
		})
}

func submitAccepts(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
}

// TestReceivedAtIsWhenTheActivityGotTheCode: the workflow task that takes a polled, confirmed or instant code runs
// 90 s after the activity got it; received_at, and expires_at (reCAPTCHA: 120 s) with it, are the activity's time.
func (s *SolveCaptchaSuite) TestReceivedAtIsWhenTheActivityGotTheCode() {
	got := func(now time.Time) time.Time { return now.Add(-backlog) }
	for name, tc := range map[string]struct {
		arrange func(env *testsuite.TestWorkflowEnvironment)
		got     time.Duration // when the activity got the code, after the start
	}{
		"poll (after the 10 s callback timeout)": {func(env *testsuite.TestWorkflowEnvironment) {
			submitAccepts(env)
			pollAnswers(env, backlog, got)
		}, 10 * time.Second},
		"res.php confirmation of an unauthenticated callback at 5 s": {func(env *testsuite.TestWorkflowEnvironment) {
			submitAccepts(env)
			pollAnswers(env, backlog, got)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111"})
			}, 5*time.Second)
		}, 5 * time.Second},
		"the Submit answer (createTask's instant code)": {func(env *testsuite.TestWorkflowEnvironment) {
			env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(backlog).Return(
				func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
					return activities.SubmitResult{ProviderTaskID: "111", Code: "CODE-111", ReceivedAt: got(env.Now())}, nil
				}).Once()
		}, 0},
	} {
		r, start := s.solvedAt(func(env *testsuite.TestWorkflowEnvironment, _ time.Time) { tc.arrange(env) })
		s.Equal("CODE-111", r.Code, name)
		s.Equal(tc.got, r.ReceivedAt.Sub(start), "%s: received_at is when the activity got the code", name)
		s.Equal(tc.got+120*time.Second, r.ExpiresAt.Sub(start), "%s: expires_at counts from it", name)
	}
}

// TestReceivedAtIsHeldWithinTheWorkflowsClock: a stamp by a clock that is ahead or behind (a worker's, the
// ingress's) is held between the submission's time and the workflow task that took the code.
func (s *SolveCaptchaSuite) TestReceivedAtIsHeldWithinTheWorkflowsClock() {
	for name, tc := range map[string]struct {
		arrange func(env *testsuite.TestWorkflowEnvironment, start time.Time)
		want    time.Duration // received_at, after the start
	}{
		"a worker clock 10 min ahead": {func(env *testsuite.TestWorkflowEnvironment, _ time.Time) {
			submitAccepts(env)
			pollAnswers(env, 0, func(now time.Time) time.Time { return now.Add(10 * time.Minute) })
		}, 10 * time.Second},
		"a worker clock an hour behind": {func(env *testsuite.TestWorkflowEnvironment, _ time.Time) {
			submitAccepts(env)
			pollAnswers(env, 0, func(now time.Time) time.Time { return now.Add(-time.Hour) })
		}, 0},
		"an ingress clock 10 min ahead": {func(env *testsuite.TestWorkflowEnvironment, _ time.Time) {
			submitAccepts(env)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111",
					Authenticated: true, RunID: testRunID, Submission: 1, ReceivedAt: env.Now().Add(10 * time.Minute)})
			}, 7*time.Second)
		}, 7 * time.Second},
		"an ingress clock an hour behind": {func(env *testsuite.TestWorkflowEnvironment, _ time.Time) {
			submitAccepts(env)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE-111",
					Authenticated: true, RunID: testRunID, Submission: 1, ReceivedAt: env.Now().Add(-time.Hour)})
			}, 7*time.Second)
		}, 0},
	} {
		r, start := s.solvedAt(tc.arrange)
		s.Equal(tc.want, r.ReceivedAt.Sub(start), "%s: received_at", name)
		s.Equal(tc.want+120*time.Second, r.ExpiresAt.Sub(start), "%s: expires_at", name)
	}
}

// TestSubmittedAtIsTheAcceptance: the Submit waits 40 s on its paced queue, then the provider accepts it and solves
// it in 10 s. submitted_at (the Result's, the status's, the first poll's hold) is the acceptance, and the solve
// takes 10 s, not 50: the queue's backlog is no solve time (issue 37).
func (s *SolveCaptchaSuite) TestSubmittedAtIsTheAcceptance() {
	start := s.env.Now()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(40 * time.Second).Return(
		func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
			return activities.SubmitResult{ProviderTaskID: "111", AcceptedAt: s.env.Now()}, nil
		}).Once()
	var polled activities.PollRequest
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.PollRequest) (activities.PollResult, error) {
			polled = req
			return activities.PollResult{Code: "CODE-111", ReceivedAt: start.Add(50 * time.Second)}, nil
		}).Once()
	var status captchaflow.Status
	s.env.RegisterDelayedCallback(func() { status = s.queryStatus() }, 45*time.Second)
	in := recaptcha()
	in.CallbackTimeoutSeconds = 10
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal(40*time.Second, r.SubmittedAt.Sub(start), "the Result's submitted_at")
	s.Equal(10*time.Second, r.ReceivedAt.Sub(r.SubmittedAt), "the solve time")
	s.Equal(40*time.Second, status.SubmittedAt.Sub(start), "the status's submitted_at")
	s.Equal(40*time.Second, polled.SubmittedAt.Sub(start), "the first poll's hold")
}
