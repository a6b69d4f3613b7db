package workflows

import (
	"context"
	"errors"
	"fmt"
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

// semEnv runs the semaphore alone; its grants are recorded (those to a run in gone fail), and end() makes it
// continue as new, whose input is what it carries on.
type semEnv struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	grants []string // "workflow/seq@run"
	gone   map[string]bool
}

func newSemEnv(t *testing.T) *semEnv {
	var ts testsuite.WorkflowTestSuite
	e := &semEnv{t: t, env: ts.NewTestWorkflowEnvironment(), gone: map[string]bool{}}
	e.env.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
	e.env.RegisterActivity((&activities.Activities{}).CheckSlotHolders)
	e.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, activities.SlotGrantedSignal, mock.Anything).Return(
		func(_, wid, run, _ string, arg any) error {
			g := arg.(activities.SlotRequest)
			require.Equal(t, run, g.RunID)
			if e.gone[run] {
				return errors.New("workflow execution already completed")
			}
			e.grants = append(e.grants, fmt.Sprintf("%s/%d@%s", wid, g.Seq, run))
			return nil
		})
	old := semaphoreMaxEvents
	t.Cleanup(func() { semaphoreMaxEvents = old })
	return e
}

func ask(wid string, seq int, run string) activities.SlotRequest {
	return activities.SlotRequest{WorkflowID: wid, RunID: run, Seq: seq}
}

// at sends signal name with r at d.
func (e *semEnv) at(d time.Duration, name string, r activities.SlotRequest) {
	e.env.RegisterDelayedCallback(func() { e.env.SignalWorkflow(name, r) }, d)
}

func (e *semEnv) view() activities.SemaphoreState {
	v, err := e.env.QueryWorkflow(activities.SlotsQuery)
	require.NoError(e.t, err)
	var sv activities.SemaphoreState
	require.NoError(e.t, v.Get(&sv))
	return sv
}

// run starts the semaphore with st and makes it continue as new at end; it returns what it carried on.
func (e *semEnv) run(st activities.SemaphoreState, end time.Duration) activities.SemaphoreState {
	e.env.RegisterDelayedCallback(func() {
		semaphoreMaxEvents = 0
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, ask("nobody", 0, "r"))
	}, end)
	e.env.ExecuteWorkflow(activities.ThreadsWorkflowType, st)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(e.t, e.env.GetWorkflowError(), &can)
	var next activities.SemaphoreState
	require.NoError(e.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func TestSemaphoreGrantsAtOnceThenInArrivalOrderOnRelease(t *testing.T) {
	e := newSemEnv(t)
	for i, w := range []string{"a", "b", "c", "d"} {
		e.at(time.Duration(i+1)*time.Second, activities.AcquireSlotSignal, ask(w, 1, "r-"+w))
	}
	e.env.RegisterDelayedCallback(func() {
		assert.Equal(t, []string{"a/1@r-a", "b/1@r-b"}, e.grants, "two slots: granted as asked")
		assert.Len(t, e.view().Queue, 2)
	}, 5*time.Second)
	e.at(6*time.Second, activities.ReleaseSlotSignal, ask("d", 1, "r-d")) // d leaves the queue
	e.at(7*time.Second, activities.ReleaseSlotSignal, ask("a", 1, "r-a"))
	e.at(8*time.Second, activities.AcquireSlotSignal, ask("b", 1, "r-b2")) // b's run was reset: its slot is its own
	next := e.run(activities.SemaphoreState{Plan: 2}, 9*time.Second)

	assert.Equal(t, []string{"a/1@r-a", "b/1@r-b", "c/1@r-c", "b/1@r-b2"}, e.grants)
	assert.Equal(t, []activities.SlotRequest{ask("b", 1, "r-b2"), ask("c", 1, "r-c")}, next.Holders)
	assert.Empty(t, next.Queue)
}

// The latest ask's plan is the plan; a release the semaphore does not know (a slot its predecessor granted) is
// counted over the plan, not taken from anyone.
func TestSemaphorePlanIsTheLatestAsks(t *testing.T) {
	e := newSemEnv(t)
	e.at(time.Second, activities.AcquireSlotSignal, ask("a", 1, "r"))
	e.at(2*time.Second, activities.AcquireSlotSignal, ask("b", 1, "r"))
	e.at(3*time.Second, activities.ReleaseSlotSignal, ask("old", 1, "r"))
	e.env.RegisterDelayedCallback(func() {
		v := e.view()
		assert.Len(t, v.Holders, 1, "plan 1")
		assert.Len(t, v.Queue, 1)
	}, 4*time.Second)
	e.at(5*time.Second, activities.AcquireSlotSignal, activities.SlotRequest{WorkflowID: "c", RunID: "r", Seq: 1, Plan: 3})
	next := e.run(activities.SemaphoreState{Plan: 1}, 6*time.Second)

	assert.Equal(t, []string{"a/1@r", "b/1@r", "c/1@r"}, e.grants, "b and c granted once the plan grew to 3")
	assert.Equal(t, 3, next.Plan)
	assert.Len(t, next.Holders, 3)
}

// A grant that cannot be delivered (the run is gone) frees the slot for the next in line.
func TestSemaphoreGrantToAGoneRunFreesTheSlot(t *testing.T) {
	e := newSemEnv(t)
	e.gone["r-a"] = true
	e.at(time.Second, activities.AcquireSlotSignal, ask("a", 1, "r-a"))
	e.at(2*time.Second, activities.AcquireSlotSignal, ask("b", 1, "r-b"))
	next := e.run(activities.SemaphoreState{Plan: 1}, 3*time.Second)

	assert.Equal(t, []string{"b/1@r-b"}, e.grants)
	assert.Equal(t, []activities.SlotRequest{ask("b", 1, "r-b")}, next.Holders)
}

// Holders whose task ended are reclaimed by the periodic check; the others keep their slots.
func TestSemaphoreReclaimsHoldersWhoseTaskEnded(t *testing.T) {
	e := newSemEnv(t)
	var checked []activities.SlotRequest
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(
		func(_ context.Context, holders []activities.SlotRequest) ([]activities.SlotRequest, error) {
			checked = holders
			return []activities.SlotRequest{holders[0]}, nil
		}).Once()
	e.at(time.Second, activities.AcquireSlotSignal, ask("a", 1, "r"))
	e.at(2*time.Second, activities.AcquireSlotSignal, ask("b", 1, "r"))
	e.at(3*time.Second, activities.AcquireSlotSignal, ask("c", 1, "r"))
	next := e.run(activities.SemaphoreState{Plan: 2}, activities.SlotReaskInterval+10*time.Second)

	assert.Len(t, checked, 2)
	assert.Equal(t, []string{"a/1@r", "b/1@r", "c/1@r"}, e.grants, "a's slot went to c")
	assert.Equal(t, []activities.SlotRequest{ask("b", 1, "r"), ask("c", 1, "r")}, next.Holders)
}

// Continue-as-new carries holders and queue in order, each queued request once with its latest run.
func TestSemaphoreCarriesHoldersAndQueueOn(t *testing.T) {
	e := newSemEnv(t)
	e.at(time.Second, activities.AcquireSlotSignal, ask("b", 1, "r1"))
	e.at(2*time.Second, activities.AcquireSlotSignal, ask("c", 1, "r1"))
	e.at(3*time.Second, activities.AcquireSlotSignal, ask("b", 1, "r2"))
	next := e.run(activities.SemaphoreState{Plan: 1, Holders: []activities.SlotRequest{ask("a", 1, "r")}}, 4*time.Second)

	assert.Empty(t, e.grants)
	assert.Equal(t, []activities.SlotRequest{ask("a", 1, "r")}, next.Holders)
	assert.Equal(t, []activities.SlotRequest{ask("b", 1, "r2"), ask("c", 1, "r1")}, next.Queue)
}
