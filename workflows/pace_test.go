package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

func notStartedErr() error {
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
}

// withPacing runs the suite's tasks on a worker that paces rates by provider (CAPTCHAAI_*'s: activities.SingleProvider).
func (s *SolveCaptchaSuite) withPacing(rates map[string]providers.Rates, names ...string) {
	s.env = s.NewTestWorkflowEnvironment()
	Register(s.env, &activities.Activities{}, Settings{Pacing: &activities.Pacer{TaskQueue: testTaskQueue, Rates: rates}, Providers: names})
}

const testTaskQueue = "default-test-taskqueue"

// A paced account's Submit and Poll run on its paced queues, with no marker and no local activity when the worker has
// one provider; a queue no worker takes from within queueWait sends the Submit elsewhere (nothing was sent: it is no
// submission) and the Poll to the task's own queue.
func (s *SolveCaptchaSuite) TestPacedQueuesAndTheirBounds() {
	s.withPacing(map[string]providers.Rates{activities.SingleProvider: {Submits: 13, Results: 14}})
	s.env.OnGetVersion(changeFleetPacing, workflow.DefaultVersion, 1).Return(workflow.Version(1)).Never()
	s.env.OnActivity(activities.AcquireSlotName, mock.Anything, mock.Anything).Return(activities.SlotTicket{}, nil).Never()
	in := recaptcha()
	in.CallbackTimeoutSeconds = 5
	var submitQueues, pollQueues []string
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			if submitQueues = append(submitQueues, activity.GetInfo(ctx).TaskQueue); len(submitQueues) == 1 {
				return activities.SubmitResult{}, notStartedErr()
			}
			return activities.SubmitResult{ProviderTaskID: "t-1"}, nil
		}).Twice()
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.PollRequest) (activities.PollResult, error) {
			if pollQueues = append(pollQueues, activity.GetInfo(ctx).TaskQueue); len(pollQueues) == 1 {
				return activities.PollResult{}, notStartedErr()
			}
			return activities.PollResult{Code: "CODE"}, nil
		}).Twice()
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, in)
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(1, res.Submits)
	tq := testTaskQueue
	s.Equal([]string{tq + "@captchaai/submit", tq + "@captchaai/submit"}, submitQueues)
	s.Equal([]string{tq + "@captchaai/results", tq}, pollQueues)
}

// A task no account's rate paces pays nothing for pacing: no marker, no local activity, Submit on its own queue.
func (s *SolveCaptchaSuite) TestUnpacedTaskPaysNothingForPacing() {
	for _, names := range [][]string{nil, {"a", "b"}} {
		s.withPacing(map[string]providers.Rates{activities.SingleProvider: {}, "a": {}, "b": {Results: 5}}, names...)
		s.env.OnGetVersion(changeFleetPacing, workflow.DefaultVersion, 1).Return(workflow.Version(1)).Never()
		s.env.OnActivity(activities.AcquireSlotName, mock.Anything, mock.Anything).Return(activities.SlotTicket{}, nil).Never()
		s.Equal(testTaskQueue, s.submitQueue(), "providers %v", names)
	}
}

// lanePacer paces CAPTCHAAI_*'s account, its queue listing the workers polling it: with this one, its lane opens.
func lanePacer(pollers ...string) *activities.Pacer {
	listed := &keptServer{}
	for _, id := range pollers {
		listed.pollers = append(listed.pollers, &taskqueuepb.PollerInfo{Identity: id})
	}
	pacer := &activities.Pacer{Service: listed, TaskQueue: testTaskQueue, Identity: "w",
		Rates: map[string]providers.Rates{activities.SingleProvider: {Submits: activities.LaneMinRate}}}
	read, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 { // the reads that open the lane
		pacer.Keep(read, time.Hour, func(string, error) {})
	}
	return pacer
}

// A paced account's Submit that its worker's lane has room for runs on the task's own queue (no matching, as an
// unpaced one), naming the lane it takes room in; with no lane open, on the account's queue.
func (s *SolveCaptchaSuite) TestALaneAdmitsTheSubmitOnTheTasksOwnQueue() {
	paced := testTaskQueue + "@captchaai/submit"
	for _, c := range []struct{ pollers, want, lane string }{{"w", testTaskQueue, paced}, {"another", paced, ""}} {
		s.env = s.NewTestWorkflowEnvironment()
		Register(s.env, &activities.Activities{}, Settings{Pacing: lanePacer(c.pollers)})
		var lane string
		s.env.SetOnActivityStartedListener(func(_ *activity.Info, _ context.Context, args converter.EncodedValues) {
			var req activities.SubmitRequest
			if args.Get(&req) == nil && req.Method != "" {
				lane = req.Lane
			}
		})
		s.Equal(c.want, s.submitQueue(), "listed: %s", c.pollers)
		s.Equal(c.lane, lane, "listed: %s", c.pollers)
	}
}

// A lane's Submit that found no room as it went comes back (nothing was sent) and is submitted again, uncounted.
func (s *SolveCaptchaSuite) TestALaneSubmitWithNoRoomIsSubmittedAgain() {
	s.env = s.NewTestWorkflowEnvironment()
	Register(s.env, &activities.Activities{}, Settings{Pacing: lanePacer("w")})
	var lanes []string
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			if lanes = append(lanes, req.Lane); len(lanes) == 1 {
				return activities.SubmitResult{}, temporal.NewNonRetryableApplicationError("no room", activities.FailureLaneSpent, nil)
			}
			return activities.SubmitResult{ProviderTaskID: "t-1", Code: "CODE"}, nil
		}).Twice()
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	var res captchaflow.Result
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(1, res.Submits)
	s.Equal(testTaskQueue+"@captchaai/submit", lanes[0])
}

// With several providers of which one is paced, the task pins each submission's provider (recorded behind the marker)
// and submits on the pinned account's queue.
func (s *SolveCaptchaSuite) TestSeveralProvidersOnePacedPins() {
	s.withPacing(map[string]providers.Rates{"a": {Submits: 13}, "b": {}}, "a", "b")
	s.env.OnActivity(activities.AcquireSlotName, mock.Anything, mock.Anything).Return(
		activities.SlotTicket{Provider: "a", Queue: activities.ProviderQueue(testTaskQueue, "a", activities.SubmitQueue)}, nil).Once()
	s.Equal(testTaskQueue+"@a/submit", s.submitQueue())
}

// submitQueue runs a task solved in Submit's answer and says where its Submit ran.
func (s *SolveCaptchaSuite) submitQueue() string {
	var queue string
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			queue = activity.GetInfo(ctx).TaskQueue
			return activities.SubmitResult{ProviderTaskID: "t-1", Code: "CODE"}, nil
		}).Once()
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha()) // by name: the settings' registration
	s.Require().NoError(s.env.GetWorkflowError())
	s.env.AssertExpectations(s.T())
	return queue
}

// A Poll no worker started before the task's deadline (its ScheduleToStart is the time left, and the server fires
// it first at a tie with ScheduleToClose) ends the task DeadlineExceeded: asking again on the task's own queue then
// would schedule an activity with no time left, a command the server refuses (the task's workflow task would fail
// for ever, the task never ending).
func (s *SolveCaptchaSuite) TestPollUnservedUntilTheDeadline() {
	in := recaptcha()
	in.CallbackTimeoutSeconds, in.DeadlineSeconds = 5, 60
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "t-1"}, nil).Once()
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).After(55*time.Second).Return(activities.PollResult{}, notStartedErr()).Once()
	s.env.ExecuteWorkflow(SolveCaptcha, in)
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	s.Equal(captchaflow.FailureDeadlineExceeded, captchaflow.FailureType(err), "%v", err)
}

// A poll's priority on its results queue follows its task's deadline: the nearest served first.
func TestPollPriorityFollowsTheDeadline(t *testing.T) {
	for left, want := range map[time.Duration]int{30 * time.Second: 1, 4 * time.Minute: 2, 10 * time.Minute: 3, 59 * time.Minute: 4, 2 * time.Hour: 5} {
		if got := pollPriority(left); got != want {
			t.Errorf("%v left: priority %d, want %d", left, got, want)
		}
	}
}

// A pinned Submit that the worker taking it turns away (its circuit for the pin is open) puts the pin last: the next
// pin goes elsewhere rather than back to the same provider at once.
func (s *SolveCaptchaSuite) TestMovedPinGoesLast() {
	s.withPacing(map[string]providers.Rates{"a": {Submits: 13}, "b": {Submits: 13}}, "a", "b")
	var asks []activities.SlotAsk
	s.env.OnActivity(activities.AcquireSlotName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ask activities.SlotAsk) (activities.SlotTicket, error) {
			asks = append(asks, ask)
			pin := map[bool]string{true: "a", false: "b"}[len(asks) == 1]
			return activities.SlotTicket{Provider: pin, Queue: activities.ProviderQueue("q", pin, activities.SubmitQueue)}, nil
		})
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
			if req.Provider == "a" {
				return activities.SubmitResult{}, temporal.NewNonRetryableApplicationError("a is skipped", activities.FailureProviderMoved, nil)
			}
			return activities.SubmitResult{ProviderTaskID: "b-1", Provider: "b", Code: "CODE"}, nil
		})
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	s.Require().Len(asks, 2)
	s.Equal([]string{"a"}, asks[1].Avoid)
}

// The pin's ranking decides a probe (or an exploration) and the pinned Submit, on whichever worker takes it, is told
// why: the probe is decided once, and its Submit's route says so.
func (s *SolveCaptchaSuite) TestPinsReasonGoesWithItsSubmit() {
	s.withPacing(map[string]providers.Rates{"a": {Submits: 13}, "b": {}}, "a", "b")
	s.env.OnActivity(activities.AcquireSlotName, mock.Anything, mock.Anything).Return(activities.SlotTicket{Provider: "a",
		Queue: activities.ProviderQueue("q", "a", activities.SubmitQueue), Reason: captchaflow.RouteProbe}, nil)
	var req activities.SubmitRequest
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.SubmitRequest) (activities.SubmitResult, error) {
			req = r
			return activities.SubmitResult{ProviderTaskID: "a-1", Provider: "a", Code: "CODE"}, nil
		}).Once()
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal([2]string{"a", captchaflow.RouteProbe}, [2]string{req.Provider, req.Reason})
}

// A results queue whose backlog outlasts queueWait is no unserved queue: the task asks once on its own queue (a ready
// code is fetched) and then waits its turn on the results queue again, within the account's budget.
func (s *SolveCaptchaSuite) TestPollBacklogAsksOnceOffTheBudget() {
	s.withPacing(map[string]providers.Rates{activities.SingleProvider: {Submits: 13, Results: 14}})
	in := recaptcha()
	in.CallbackTimeoutSeconds = 5
	s.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "t-1"}, nil).Once()
	var pollQueues []string
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req activities.PollRequest) (activities.PollResult, error) {
			switch pollQueues = append(pollQueues, activity.GetInfo(ctx).TaskQueue); len(pollQueues) {
			case 1:
				return activities.PollResult{}, notStartedErr()
			case 2:
				return activities.PollResult{}, notReady()
			}
			return activities.PollResult{Code: "CODE"}, nil
		}).Times(3)
	s.env.ExecuteWorkflow(captchaflow.WorkflowType, in)
	s.Require().NoError(s.env.GetWorkflowError())
	results := testTaskQueue + "@captchaai/results"
	s.Equal([]string{results, testTaskQueue, results}, pollQueues)
}
