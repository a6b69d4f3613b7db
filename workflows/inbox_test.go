package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// asResetRun makes the test's run a reset run (resetRuns, model_reset_test.go): its chain began as "chain-" + its ID.
func (s *SolveCaptchaSuite) asResetRun() (chain string) {
	const wid = "default-test-workflow-id"
	s.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{
		&resetRuns{s: &schedule{solves: []*model{{wid: wid, discards: 1}}}}}})
	return "chain-" + wid
}

// A reset run's submission 1 waits 20 s on its queue (or the provider) and then ends without a task; meanwhile, at
// 5 s, the pingback of the submission 1 the reset discarded brings its paid code. However that Submit ends, the code
// is the result and nothing is paid again (issue 37: it sat in the inbox, and every end but an ID or a lost answer
// dropped it).
func (s *SolveCaptchaSuite) TestParkedDiscardedCodeTakenWhateverTheSubmitsEnd() {
	for name, end := range map[string]error{
		"zero balance":     zeroBalanceErr(time.Minute),
		"provider moved":   temporal.NewNonRetryableApplicationError("a is skipped", activities.FailureProviderMoved, nil),
		"queue unserved":   notStartedErr(),
		"type unsupported": refusedType("", 0),
		"in.php refused":   unsolvable(),
	} {
		s.SetupTest()
		chain := s.asResetRun()
		s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(20*time.Second).
			Return(activities.SubmitResult{}, end).Once()
		s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 1})
		s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
		r := s.result()
		s.Equal("DISCARDED", r.Code, name)
		s.Equal("900", r.ProviderTaskID, name)
		s.env.AssertExpectations(s.T())
	}
}

// A reset run's Submit comes back after 20 s with its task's code already solved (an instant answer); the code of the
// discarded submission 1, parked at 5 s, came first and is the result (seed 18385 at 20 000: the instant code won).
func (s *SolveCaptchaSuite) TestParkedDiscardedCodeBeatsAnInstantAnswer() {
	chain := s.asResetRun()
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(20 * time.Second).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			return activities.SubmitResult{ProviderTaskID: "901", Code: "INSTANT", RunID: req.RunID}, nil
		}).Once()
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, recaptcha())
	r := s.result()
	s.Equal("DISCARDED", r.Code)
	s.Equal("900", r.ProviderTaskID)
}

// The parked code came first, then a lost submission's answer, which cancels the Submit that parked it: both were
// paid, and the first to arrive is the result.
func (s *SolveCaptchaSuite) TestParkedDiscardedCodeBeforeALostAnswerWins() {
	chain := s.asResetRun()
	s.expectSubmitCalls(lostAnswer())
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ activities.SubmitRequest) (activities.SubmitResult, error) {
			return activities.SubmitResult{}, temporal.NewCanceledError() // cancelled before it answered
		}).After(time.Minute).Maybe()
	s.signalAt(15*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 2})
	s.signalAt(20*time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "LOST", Authenticated: true, RunID: chain, Submission: 1})
	in := recaptcha()
	in.LostAnswerWaitSeconds = 10
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal("DISCARDED", r.Code)
	s.Equal(1, r.Submits, "the cancelled Submit never answered")
}

// A reset run's Submit whose answer is lost as the deadline comes: a code parked meanwhile is taken, not dropped.
func (s *SolveCaptchaSuite) TestParkedCodeTakenWhenTheAnswerIsLostAtTheDeadline() {
	chain := s.asResetRun()
	in := recaptcha()
	in.DeadlineSeconds = 60
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(60*time.Second).Return(activities.SubmitResult{}, lostAnswer()).Once()
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.Equal("DISCARDED", r.Code)
}

// A parked code whose token died while the Submit that parked it waited does not win over that Submit's own task,
// accepted meanwhile: taken, it superseded the live submission and the task paid a refresh (model seed 565).
func (s *SolveCaptchaSuite) TestParkedCodeExpiredWhileParkedIsNotTaken() {
	chain := s.asResetRun()
	in := recaptcha()
	in.TokenTTLSeconds = 60
	var own string // the URL run this run's submission named, as Submit echoes it
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).After(90 * time.Second).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			own = req.RunID
			s.signalAt(10*time.Second, captchaflow.Callback{ProviderTaskID: "901", Code: "OWN", Authenticated: true, RunID: own, Submission: 1})
			return activities.SubmitResult{ProviderTaskID: "901", RunID: req.RunID}, nil
		}).Once()
	s.signalAt(5*time.Second, captchaflow.Callback{ProviderTaskID: "900", Code: "DISCARDED", Authenticated: true, RunID: chain, Submission: 1})
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	r := s.result()
	s.NotEqual(chain, own)
	s.Equal("OWN", r.Code)
	s.Equal(1, r.Submits)
}
