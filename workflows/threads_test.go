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
	"google.golang.org/protobuf/proto"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
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

// blobLimit is Temporal's limit.blobSize.error: a continue-as-new whose input Payloads is larger terminates the run
// (WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES), losing every holder and queued ask.
const blobLimit = 2 * 1024 * 1024

// longestAsks are n asks of the longest workflow IDs a task accepts (200 characters), each with a run ID.
func longestAsks(n int) []activities.SlotRequest {
	out := make([]activities.SlotRequest, n)
	for i := range out {
		id := fmt.Sprintf("%0200d", i)
		out[i] = ask(id, 1, fmt.Sprintf("0199a3c2-7d4e-7b1a-9f3e-%012d", i))
	}
	return out
}

func payloadSize(t *testing.T, st activities.SemaphoreState) int {
	p, err := converter.GetDefaultDataConverter().ToPayloads(st)
	require.NoError(t, err)
	return proto.Size(p)
}

// With thousands of tasks queued behind one provider's plan, what the semaphore carries across continue-as-new stays
// under the blob limit: every holder, and the longest waiting asks in order (the others ask again, as their ticket
// names the run that ended, and queue again).
func TestSemaphoreContinueAsNewStaysUnderTheBlobLimit(t *testing.T) {
	per := payloadSize(t, activities.SemaphoreState{Queue: longestAsks(2)}) - payloadSize(t, activities.SemaphoreState{Queue: longestAsks(1)})
	crossing := func(holders int) int { // the fewest queued asks whose state passes the limit
		n := 1
		for payloadSize(t, activities.SemaphoreState{Plan: holders, Holders: longestAsks(holders), Queue: longestAsks(n)}) <= blobLimit {
			n += 100
		}
		for payloadSize(t, activities.SemaphoreState{Plan: holders, Holders: longestAsks(holders), Queue: longestAsks(n - 1)}) > blobLimit {
			n--
		}
		return n
	}
	over := crossing(50) - 1
	t.Logf("%d bytes an ask: %d queued asks pass the %d-byte limit alone, %d behind 50 holders", per, crossing(0), blobLimit, over+1)

	e := newSemEnv(t)
	queued := longestAsks(50 + over + 1000)
	next := e.run(activities.SemaphoreState{Plan: 50, Holders: queued[:50], Queue: queued[50:]}, 2*time.Second)

	size := payloadSize(t, next)
	assert.LessOrEqual(t, size, blobLimit, "continue-as-new carries %d holders and %d queued asks", len(next.Holders), len(next.Queue))
	assert.Equal(t, queued[:50], next.Holders, "every holder carried")
	assert.Equal(t, queued[50:50+len(next.Queue)], next.Queue, "the longest waiting carried, in order")
	assert.Greater(t, len(next.Queue), over/2, "most of what fits is carried")
	most := activities.SemaphoreState{Plan: providers.MaxThreads, Holders: longestAsks(providers.MaxThreads),
		Queue: longestAsks(max(0, semaphoreMaxCarried-providers.MaxThreads))}
	assert.LessOrEqual(t, payloadSize(t, most), blobLimit, "the largest plan's holders and its queue fit")
}
