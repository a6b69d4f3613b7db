package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// slotEnv runs SolveCaptcha on a worker with PROVIDER_THREADS=2; AcquireSlot and the release signal are recorded.
type slotEnv struct {
	t        *testing.T
	env      *testsuite.TestWorkflowEnvironment
	acquired []activities.SlotRequest
	released []activities.SlotRequest
	stuck    bool     // re-asks find the semaphore's workflow task failing
	provider []string // the tickets' providers, one per ask (the last one repeats)
	failRel  int      // releases that fail before they go through
}

// testSemaphore is the semaphore of the test environment's task queue.
var testSemaphore = activities.ThreadsWorkflowID(taskQueueOfTestEnv, "")

func newSlotEnv(t *testing.T) *slotEnv {
	var ts testsuite.WorkflowTestSuite
	e := &slotEnv{t: t, env: ts.NewTestWorkflowEnvironment()}
	Register(e.env, &activities.Activities{}, Settings{ProviderThreads: 2})
	e.env.OnActivity(acts.AcquireSlot, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ask activities.SlotAsk) (activities.SlotTicket, error) {
			e.acquired = append(e.acquired, ask.SlotRequest)
			t := activities.SlotTicket{Semaphore: testSemaphore, Run: "r1", RunID: ask.RunID, Stuck: e.stuck && ask.Ticket != nil}
			if n := len(e.provider); n > 0 {
				t.Provider = e.provider[min(len(e.acquired), n)-1]
			}
			return t, nil
		})
	e.env.OnActivity(acts.ReleaseSlot, mock.Anything, mock.Anything).Return(func(_ context.Context, rel activities.SlotRequest) error {
		require.Equal(t, testSemaphore, rel.Semaphore)
		if e.failRel > 0 {
			e.failRel--
			return temporal.NewNonRetryableApplicationError("Temporal unreachable", "test", nil)
		}
		e.released = append(e.released, rel)
		return nil
	})
	return e
}

// taskQueueOfTestEnv is the task queue the SDK's test environment runs workflows on.
const taskQueueOfTestEnv = "default-test-taskqueue"

func (e *slotEnv) grantAt(d time.Duration, seq int) {
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(activities.SlotGrantedSignal, activities.SlotRequest{Seq: seq, RunID: testRunID, Semaphore: testSemaphore})
	}, d)
}

func (e *slotEnv) status() captchaflow.Status {
	v, err := e.env.QueryWorkflow(captchaflow.StatusQuery)
	require.NoError(e.t, err)
	var st captchaflow.Status
	require.NoError(e.t, v.Get(&st))
	return st
}

func (e *slotEnv) submits(outcomes ...any) {
	for _, o := range outcomes {
		switch o := o.(type) {
		case string:
			e.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: o}, nil).Once()
		case error:
			e.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{}, o).Once()
		}
	}
}

func TestSlotQueuedUntilGrantedThenReleasedOnResult(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.env.RegisterDelayedCallback(func() {
		assert.Equal(t, captchaflow.PhaseQueued, e.status().Phase, "waiting for a slot")
		e.env.AssertActivityNotCalled(t, "Submit", mock.Anything, mock.Anything)
	}, 30*time.Second)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(activities.SlotGrantedSignal, activities.SlotRequest{Seq: 7, RunID: testRunID, Semaphore: testSemaphore}) // stale: not this submission's
	}, 40*time.Second)
	e.env.RegisterDelayedCallback(func() {
		assert.Equal(t, captchaflow.PhaseQueued, e.status().Phase, "a grant for another submission changes nothing")
	}, 50*time.Second)
	e.grantAt(55*time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		require.Len(t, e.released, 1, "the slot is held while the provider solves; only the stale grant went back")
		assert.Equal(t, 7, e.released[0].Seq)
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 70*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	var r captchaflow.Result
	require.NoError(t, e.env.GetWorkflowResult(&r))
	assert.Equal(t, "CODE", r.Code)
	require.Len(t, e.acquired, 2, "asked at once, re-asked after activities.SlotReaskInterval, granted at 55 s")
	for _, req := range e.acquired {
		assert.Equal(t, 1, req.Seq, "every re-ask is for the same request")
	}
	assert.Equal(t, []activities.SlotRequest{{WorkflowID: e.acquired[0].WorkflowID, RunID: e.acquired[0].RunID, Seq: 7, Semaphore: testSemaphore},
		{WorkflowID: e.acquired[0].WorkflowID, RunID: e.acquired[0].RunID, Seq: 1, Semaphore: testSemaphore}}, e.released)
}

func TestSlotReleasedOnUnsolvableAndRequeuedForTheResubmission(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111", "222")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 10*time.Second)
	e.env.RegisterDelayedCallback(func() {
		assert.Len(t, e.released, 1, "the unsolvable submission gave its slot back")
		assert.Equal(t, captchaflow.PhaseQueued, e.status().Phase, "the resubmission queues again")
	}, 15*time.Second)
	e.grantAt(20*time.Second, 2)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "222", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 2})
	}, 30*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	require.Len(t, e.acquired, 2)
	assert.Equal(t, []int{1, 2}, []int{e.acquired[0].Seq, e.acquired[1].Seq})
	require.Len(t, e.released, 2)
	assert.Equal(t, []int{1, 2}, []int{e.released[0].Seq, e.released[1].Seq})
}

func TestSlotReleasedWhenCancelledWhileQueued(t *testing.T) {
	e := newSlotEnv(t)
	e.env.RegisterDelayedCallback(e.env.CancelWorkflow, time.Minute)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.True(t, temporal.IsCanceledError(e.env.GetWorkflowError()), "%v", e.env.GetWorkflowError())
	require.Len(t, e.released, 1, "a cancelled task leaves the queue (disconnected context)")
	e.env.AssertActivityNotCalled(t, "Submit", mock.Anything, mock.Anything)
}

func TestSlotReleasedWhenCancelledWhileSolving(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(e.env.CancelWorkflow, time.Minute)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.True(t, temporal.IsCanceledError(e.env.GetWorkflowError()), "%v", e.env.GetWorkflowError())
	require.Len(t, e.released, 1)
}

func TestSlotReleasedWhenSubmitFails(t *testing.T) {
	e := newSlotEnv(t)
	e.submits(temporal.NewNonRetryableApplicationError("ERROR_WRONG_USER_KEY", captchaflow.FailureProviderConfig, nil))
	e.grantAt(time.Second, 1)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.Error(t, e.env.GetWorkflowError())
	require.Len(t, e.released, 1)
}

// A semaphore whose workflow task keeps failing does not strand the task: the re-ask finds it stuck and the task
// submits without a slot, and still leaves the queue when it ends. One that merely grants late is waited for.
func TestSlotWaitsForAGrantButNotForAStuckSemaphore(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		t.Run(fmt.Sprintf("stuck %v", stuck), func(t *testing.T) {
			e := newSlotEnv(t)
			e.stuck = stuck
			var submittedAt time.Duration
			start := e.env.Now()
			e.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
				submittedAt = e.env.Now().Sub(start)
				return activities.SubmitResult{ProviderTaskID: "111"}, nil
			}).Once()
			e.grantAt(100*time.Second, 1)
			e.env.RegisterDelayedCallback(func() {
				e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
			}, 110*time.Second)
			e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

			require.NoError(t, e.env.GetWorkflowError())
			want := map[bool]time.Duration{false: 100 * time.Second, true: activities.SlotReaskInterval}[stuck]
			assert.Equal(t, want, submittedAt)
			require.Len(t, e.released, 1, "leaves the queue")
		})
	}
}

func TestNoSlotsWhenProviderThreadsUnset(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	Register(env, &activities.Activities{}, Settings{})
	env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, time.Second)
	env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())
	require.NoError(t, env.GetWorkflowError())
	env.AssertActivityNotCalled(t, activities.AcquireSlotName, mock.Anything, mock.Anything)
}

// A grant naming no run is not taken (one that reaches a run names a run of its reset chain: a targeted signal, or
// one a reset reapplied); the slot is held, with no renewal, while the submission lasts.
func TestGrantNamingNoRunIsNotTaken(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(activities.SlotGrantedSignal, activities.SlotRequest{Seq: 1, Semaphore: testSemaphore})
	}, time.Second)
	e.env.RegisterDelayedCallback(func() {
		assert.Equal(t, captchaflow.PhaseQueued, e.status().Phase, "a grant naming no run is not this task's")
	}, 2*time.Second)
	e.grantAt(3*time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 100*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	assert.Len(t, e.acquired, 1, "granted before the first re-ask; holding asks nothing")
	assert.Len(t, e.released, 1)
}

// A reset run gets the grants its chain's earlier runs received after the reset point (the server reapplies them),
// naming runs its history may not hold: a stray one is sent back whatever run this is, so that a run reset from
// this one, replaying it under another run ID, sends it back too (tests/threads_reset_twice_e2e_test.go).
func TestStrayGrantOfAnEarlierRunIsSentBack(t *testing.T) {
	e := newSlotEnv(t)
	e.submits("111")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(activities.SlotGrantedSignal, activities.SlotRequest{Seq: 7, RunID: "middle-run", Semaphore: testSemaphore})
	}, 5*time.Second)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 10*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	require.Len(t, e.released, 2, "the stray grant and the submission's slot")
	assert.Equal(t, 7, e.released[0].Seq)
	assert.Equal(t, 1, e.released[1].Seq)
}

// Submit is pinned to the ticket's provider; when it would move (that provider's circuit opened), the slot goes back
// and the task admits again at the next provider, the move uncounted.
func TestSlotMovedSubmissionAdmitsAgainAtTheNextProvider(t *testing.T) {
	e := newSlotEnv(t)
	e.provider = []string{"a", "b"}
	var pinned []string
	e.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
		if pinned = append(pinned, req.Provider); req.Provider == "a" {
			return activities.SubmitResult{}, temporal.NewNonRetryableApplicationError("moved", activities.FailureProviderMoved, nil)
		}
		return activities.SubmitResult{ProviderTaskID: "111", Provider: req.Provider}, nil
	})
	e.grantAt(time.Second, 1)
	e.grantAt(2*time.Second, 2)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 2})
	}, 10*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	var r captchaflow.Result
	require.NoError(t, e.env.GetWorkflowResult(&r))
	assert.Equal(t, []string{"a", "b"}, pinned)
	assert.Equal(t, 1, r.Submits, "the move sent nothing")
	require.Len(t, e.released, 2)
	assert.Equal(t, []int{1, 2}, []int{e.released[0].Seq, e.released[1].Seq})
	assert.False(t, e.released[0].Ungranted || e.released[1].Ungranted, "both slots were granted")
}

// A release that fails does not hold the task up: it delivers, and the semaphore's holder check takes the slot
// back from a task that delivers (CheckSlotHolders).
func TestSlotReleaseThatFailsDoesNotHoldUpTheTask(t *testing.T) {
	e := newSlotEnv(t)
	e.failRel = 1
	e.submits("111")
	e.grantAt(time.Second, 1)
	e.env.RegisterDelayedCallback(func() {
		e.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 10*time.Second)
	e.env.ExecuteWorkflow(captchaflow.WorkflowType, recaptcha())

	require.NoError(t, e.env.GetWorkflowError())
	assert.Empty(t, e.released)
	e.env.AssertNumberOfCalls(t, activities.ReleaseSlotName, 1)
}
