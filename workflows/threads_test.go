package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// semaphoreEnv runs ProviderThreads with every grant recorded (in order) instead of signalled.
type semaphoreEnv struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	grants []string
	// gone lists workflow IDs whose grant cannot be delivered (their run has ended).
	gone map[string]bool
}

func newSemaphoreEnv(t *testing.T) *semaphoreEnv {
	var ts testsuite.WorkflowTestSuite
	e := &semaphoreEnv{t: t, env: ts.NewTestWorkflowEnvironment(), gone: map[string]bool{}}
	Register(e.env, &activities.Activities{}, Settings{})
	e.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, activities.SlotGrantedSignal, mock.Anything).
		Return(func(_, workflowID, _, _ string, _ any) error {
			if e.gone[workflowID] {
				return assert.AnError
			}
			e.grants = append(e.grants, workflowID)
			return nil
		})
	return e
}

func (e *semaphoreEnv) at(d time.Duration, f func()) { e.env.RegisterDelayedCallback(f, d) }

func (e *semaphoreEnv) acquire(d time.Duration, id string, threads int) {
	e.at(d, func() {
		e.env.SignalWorkflow(activities.AcquireSlotSignal, activities.SlotRequest{WorkflowID: id, RunID: "run-" + id, Seq: 1, Threads: threads})
	})
}

func (e *semaphoreEnv) release(d time.Duration, id string) {
	e.at(d, func() {
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: id, RunID: "run-" + id, Seq: 1})
	})
}

func (e *semaphoreEnv) state() activities.SemaphoreState {
	v, err := e.env.QueryWorkflow(activities.SlotsQuery)
	require.NoError(e.t, err)
	var st activities.SemaphoreState
	require.NoError(e.t, v.Get(&st))
	return st
}

func holderIDs(st activities.SemaphoreState) []string {
	var ids []string
	for _, h := range st.Holders {
		ids = append(ids, h.WorkflowID)
	}
	return ids
}

func TestSemaphoreGrantsInArrivalOrderAndOnRelease(t *testing.T) {
	e := newSemaphoreEnv(t)
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		e.acquire(time.Duration(i+1)*time.Millisecond, id, 2)
	}
	e.acquire(6*time.Millisecond, "b", 2) // a retried AcquireSlot is not queued twice
	e.at(time.Second, func() {
		assert.Equal(t, []string{"a", "b"}, e.grants, "two threads: the first two in arrival order")
		st := e.state()
		assert.Equal(t, []string{"a", "b"}, holderIDs(st))
		assert.Len(t, st.Queue, 3)
	})
	e.release(2*time.Second, "b")
	e.release(3*time.Second, "d") // leaves the queue before its turn (a cancelled task)
	e.release(4*time.Second, "a")
	e.at(5*time.Second, func() {
		assert.Equal(t, []string{"a", "b", "c", "e"}, e.grants)
		st := e.state()
		assert.Equal(t, []string{"c", "e"}, holderIDs(st))
		assert.Empty(t, st.Queue)
		e.env.CancelWorkflow()
	})
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(nil, nil).Maybe()
	e.env.ExecuteWorkflow(ProviderThreads, activities.SemaphoreState{})
	require.True(t, e.env.IsWorkflowCompleted())
}

func TestSemaphoreReclaimsSlotsOfHoldersThatStopped(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.acquire(time.Millisecond, "killed", 1)
	e.acquire(2*time.Millisecond, "next", 1)
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(
		func(_ context.Context, holders []activities.SlotHolder) ([]activities.SlotHolder, error) {
			var dead []activities.SlotHolder
			for _, h := range holders {
				if h.WorkflowID == "killed" {
					dead = append(dead, h)
				}
			}
			return dead, nil
		})
	e.at(10*time.Second, func() { assert.Equal(t, []string{"killed"}, e.grants, "the second waits") })
	e.at(slotReclaimInterval+time.Second, func() {
		assert.Equal(t, []string{"killed", "next"}, e.grants, "the dead holder's slot went to the next in line")
		assert.Equal(t, []string{"next"}, holderIDs(e.state()))
		e.env.CancelWorkflow()
	})
	e.env.ExecuteWorkflow(ProviderThreads, activities.SemaphoreState{})
	require.True(t, e.env.IsWorkflowCompleted())
}

func TestSemaphoreGrantToAGoneRequesterFreesTheSlot(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.gone["cancelled"] = true
	e.acquire(time.Millisecond, "cancelled", 1)
	e.acquire(2*time.Millisecond, "next", 1)
	e.at(time.Second, func() {
		assert.Equal(t, []string{"next"}, e.grants)
		assert.Equal(t, []string{"next"}, holderIDs(e.state()))
		e.env.CancelWorkflow()
	})
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(nil, nil).Maybe()
	e.env.ExecuteWorkflow(ProviderThreads, activities.SemaphoreState{})
}

func TestSemaphoreContinuesAsNewWithItsState(t *testing.T) {
	defer func(n int) { semaphoreMaxSignals = n }(semaphoreMaxSignals)
	semaphoreMaxSignals = 30
	e := newSemaphoreEnv(t)
	for i := range 30 {
		e.acquire(time.Duration(i+1)*time.Millisecond, string(rune('a'+i)), 2)
	}
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(nil, nil).Maybe()
	e.env.ExecuteWorkflow(ProviderThreads, activities.SemaphoreState{})
	require.True(t, e.env.IsWorkflowCompleted())
	err := e.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	assert.Equal(t, activities.ThreadsWorkflowType, can.WorkflowType.Name)
	var st activities.SemaphoreState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &st))
	assert.Equal(t, 2, st.Threads)
	assert.Equal(t, []string{"a", "b"}, holderIDs(st), "the holders are carried over")
	assert.Len(t, st.Queue, 28, "every request is carried over, in order")
	assert.Equal(t, "c", st.Queue[0].WorkflowID)
	assert.Equal(t, "z", st.Queue[23].WorkflowID)
}

func TestSemaphoreContinueAsNewTakesAnAcquireAndItsReleaseInOrder(t *testing.T) {
	defer func(n int) { semaphoreMaxSignals = n }(semaphoreMaxSignals)
	semaphoreMaxSignals = 1
	e := newSemaphoreEnv(t)
	e.gone["x"] = true // keeps the first grant from taking "a" off the queue
	e.at(time.Millisecond, func() {
		e.env.SignalWorkflow(activities.AcquireSlotSignal, activities.SlotRequest{WorkflowID: "x", RunID: "run-x", Seq: 1, Threads: 0})
		e.env.SignalWorkflow(activities.AcquireSlotSignal, activities.SlotRequest{WorkflowID: "a", RunID: "run-a", Seq: 1, Threads: 0})
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: "a", RunID: "run-a", Seq: 1})
	})
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(nil, nil).Maybe()
	e.env.ExecuteWorkflow(ProviderThreads, activities.SemaphoreState{})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, e.env.GetWorkflowError(), &can)
	var st activities.SemaphoreState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &st))
	for _, q := range st.Queue {
		assert.NotEqual(t, "a", q.WorkflowID, "a released request must not be carried over as queued")
	}
}
