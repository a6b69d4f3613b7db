package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// semaphoreEnv runs ProviderThreads with every grant recorded (in order) instead of signalled, and every answer to
// an acquire update recorded by requester.
type semaphoreEnv struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	grants  []string
	granted []activities.SlotGrant
	tickets map[string]activities.SlotTicket
	refused map[string]error
	// gone lists workflow IDs whose grant cannot be delivered (their run has ended); dead, holders whose run
	// CheckSlotHolders finds ended.
	gone, dead map[string]bool
	// peak is the most holders seen by a query (queried after every step the tests take).
	peak int
}

func newSemaphoreEnv(t *testing.T) *semaphoreEnv {
	var ts testsuite.WorkflowTestSuite
	e := &semaphoreEnv{t: t, env: ts.NewTestWorkflowEnvironment(), gone: map[string]bool{}, dead: map[string]bool{},
		tickets: map[string]activities.SlotTicket{}, refused: map[string]error{}}
	Register(e.env, &activities.Activities{}, Settings{})
	e.env.SetTestTimeout(20 * time.Second)
	e.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, activities.SlotGrantedSignal, mock.Anything).
		Return(func(_, workflowID, _, _ string, arg any) error {
			if e.gone[workflowID] {
				return assert.AnError
			}
			e.grants = append(e.grants, workflowID)
			e.granted = append(e.granted, arg.(activities.SlotGrant))
			return nil
		})
	e.env.OnActivity(acts.CheckSlotHolders, mock.Anything, mock.Anything).Return(
		func(_ context.Context, holders []activities.SlotHolder) ([]activities.SlotHolder, error) {
			var dead []activities.SlotHolder
			for _, h := range holders {
				if e.dead[h.WorkflowID] {
					dead = append(dead, h)
				}
			}
			return dead, nil
		}).Maybe()
	return e
}

func (e *semaphoreEnv) at(d time.Duration, f func()) { e.env.RegisterDelayedCallback(f, d) }

func request(id string) activities.SlotRequest {
	return activities.SlotRequest{WorkflowID: id, RunID: "run-" + id, Seq: 1}
}

// ask sends reqs in one acquire update, as one worker's AcquireSlot calls of a moment travel.
func (e *semaphoreEnv) ask(d time.Duration, reqs ...activities.SlotRequest) {
	e.at(d, func() { e.askNow(reqs...) })
}

func (e *semaphoreEnv) askNow(reqs ...activities.SlotRequest) {
	e.env.UpdateWorkflow(activities.AcquireSlotsUpdate, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			for _, r := range reqs {
				e.refused[r.WorkflowID] = err
			}
		},
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			require.NoError(e.t, err)
			var tickets []activities.SlotTicket
			b, _ := json.Marshal(v)
			require.NoError(e.t, json.Unmarshal(b, &tickets))
			require.Len(e.t, tickets, len(reqs))
			for i, r := range reqs {
				e.tickets[r.WorkflowID] = tickets[i]
			}
		},
	}, reqs)
	e.watch()
}

func (e *semaphoreEnv) release(d time.Duration, id string) {
	e.at(d, func() {
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: id, RunID: "run-" + id, Seq: 1})
	})
}

func (e *semaphoreEnv) view() activities.SlotsView {
	v, err := e.env.QueryWorkflow(activities.SlotsQuery)
	require.NoError(e.t, err)
	var sv activities.SlotsView
	require.NoError(e.t, v.Get(&sv))
	e.peak = max(e.peak, sv.InUse)
	return sv
}

func (e *semaphoreEnv) watch() { e.view() }

func holderIDs(v activities.SlotsView) []string {
	var ids []string
	for _, h := range v.Holders {
		ids = append(ids, h.WorkflowID)
	}
	return ids
}

func queuedIDs(reqs []activities.SlotRequest) []string {
	var ids []string
	for _, r := range reqs {
		ids = append(ids, r.WorkflowID)
	}
	return ids
}

// continuedAs runs the semaphore to its end and returns what it carried to its next run.
func (e *semaphoreEnv) continuedAs() (activities.SemaphoreState, []activities.SlotRequest) {
	e.t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(e.t, e.env.GetWorkflowError(), &can)
	assert.Equal(e.t, activities.ThreadsWorkflowType, can.WorkflowType.Name)
	var st activities.SemaphoreState
	var packed []byte
	require.NoError(e.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &st, &packed))
	queue, err := unpackQueue(packed)
	require.NoError(e.t, err)
	return st, queue
}

func (e *semaphoreEnv) run(st activities.SemaphoreState) {
	e.env.ExecuteWorkflow(ProviderThreads, st, []byte(nil))
	require.True(e.t, e.env.IsWorkflowCompleted())
}

func TestSemaphoreGrantsInTheAnswerThenInArrivalOrderOnRelease(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.ask(time.Millisecond, request("a"), request("b"), request("c"))
	e.ask(2*time.Millisecond, request("d"), request("e"))
	e.ask(3*time.Millisecond, request("b"), request("d")) // retried asks: same answers, no second place in line
	e.at(time.Second, func() {
		assert.True(t, e.tickets["a"].Granted && e.tickets["b"].Granted, "two threads: the first two hold at once")
		assert.False(t, e.tickets["c"].Granted || e.tickets["d"].Granted || e.tickets["e"].Granted)
		assert.Empty(t, e.grants, "a slot granted in the answer needs no signal")
		v := e.view()
		assert.Equal(t, []string{"a", "b"}, holderIDs(v))
		assert.Equal(t, []string{"c", "d", "e"}, queuedIDs(v.QueueHead))
		assert.Equal(t, activities.ThreadsWorkflowID("captcha-solve"), e.tickets["c"].Semaphore)
		assert.NotEmpty(t, e.tickets["c"].Epoch)
		assert.Equal(t, "run-c", e.tickets["c"].RunID, "a ticket names the run it was issued to")
	})
	e.release(2*time.Second, "b")
	e.release(3*time.Second, "d")       // leaves the queue before its turn (a cancelled task)
	e.release(3*time.Second, "unknown") // harmless
	e.release(4*time.Second, "a")
	e.at(5*time.Second, func() {
		assert.Equal(t, []string{"c", "e"}, e.grants)
		assert.Equal(t, activities.SlotGrant{Seq: 1, RunID: "run-c", Semaphore: activities.ThreadsWorkflowID("captcha-solve")},
			e.granted[0], "a grant names the run, the request and the semaphore")
		v := e.view()
		assert.Equal(t, []string{"c", "e"}, holderIDs(v))
		assert.Zero(t, v.Queued)
		e.env.CancelWorkflow()
	})
	e.env.SetStartWorkflowOptions(startOn("captcha-solve"))
	e.run(activities.SemaphoreState{Threads: 2})
	assert.LessOrEqual(t, e.peak, 2)
}

func startOn(queue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: activities.ThreadsWorkflowID(queue), TaskQueue: queue}
}

func TestSemaphoreAnswersLegacyRequestsAndSignalAsksByGrant(t *testing.T) {
	e := newSemaphoreEnv(t)
	legacy := request("legacy")
	legacy.Threads = 2 // sent by a task of the first release: it waits for a grant signal
	e.ask(time.Millisecond, legacy)
	e.at(2*time.Millisecond, func() { e.env.SignalWorkflow(activities.AcquireSlotSignal, request("signalled")) })
	e.at(time.Second, func() {
		assert.False(t, e.tickets["legacy"].Granted)
		assert.Equal(t, []string{"legacy", "signalled"}, e.grants)
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 2})
}

func TestSemaphoreRegistersReassertedHoldersEvenAbovePlan(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.ask(time.Millisecond, request("a"), request("b"))
	held := request("held-elsewhere")
	held.Held = true
	e.ask(2*time.Millisecond, held)
	e.at(time.Second, func() {
		assert.True(t, e.tickets["held-elsewhere"].Granted)
		v := e.view()
		assert.Equal(t, []string{"a", "held-elsewhere"}, holderIDs(v), "the slot is really in use: it counts")
		assert.Equal(t, []string{"b"}, queuedIDs(v.QueueHead))
	})
	e.release(2*time.Second, "a")
	e.at(3*time.Second, func() {
		assert.Empty(t, e.grants, "one slot, still held by the re-asserted holder")
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1})
}

func TestSemaphoreReclaimsSlotsOfHoldersThatStopped(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.ask(time.Millisecond, request("killed"), request("next"))
	e.dead["killed"] = true
	e.at(10*time.Second, func() { assert.Empty(t, e.grants, "the second waits") })
	e.at(slotReclaimInterval+time.Second, func() {
		assert.Equal(t, []string{"next"}, e.grants, "the dead holder's slot went to the next in line")
		assert.Equal(t, []string{"next"}, holderIDs(e.view()))
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1})
}

func TestSemaphoreGrantToAGoneRequesterFreesTheSlot(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.gone["cancelled"] = true
	e.ask(time.Millisecond, request("first"), request("cancelled"), request("next"))
	e.release(time.Second, "first")
	e.at(2*time.Second, func() {
		assert.Equal(t, []string{"next"}, e.grants)
		assert.Equal(t, []string{"next"}, holderIDs(e.view()))
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1})
}

// historyFull makes the semaphore's next look find its history at semaphoreMaxEvents.
func (e *semaphoreEnv) historyFull(d time.Duration) {
	e.at(d, func() {
		e.env.SetCurrentHistoryLength(semaphoreMaxEvents)
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: "wake", RunID: "up"})
	})
}

func TestSemaphoreContinuesAsNewWithItsStatePacked(t *testing.T) {
	e := newSemaphoreEnv(t)
	for i := range 30 {
		e.ask(time.Duration(i+1)*time.Millisecond, request(fmt.Sprintf("t%02d", i)))
	}
	e.historyFull(time.Second)
	e.run(activities.SemaphoreState{Threads: 2})
	st, queue := e.continuedAs()
	assert.Equal(t, 2, st.Threads)
	assert.NotEmpty(t, st.Epoch, "the epoch is carried: tasks do not re-register after a continue-as-new")
	assert.Len(t, st.Holders, 2, "the holders are carried over")
	assert.Equal(t, "t00", st.Holders[0].WorkflowID)
	require.NotEmpty(t, queue)
	assert.Equal(t, "t02", queue[0].WorkflowID, "the queue is carried over, in order")
	assert.Equal(t, "run-t02", queue[0].RunID)
}

func TestSemaphoreCancelledCarriesItsQueueOn(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.ask(time.Millisecond, request("a"), request("b"), request("c"))
	e.at(time.Second, func() { e.env.CancelWorkflow() })
	e.run(activities.SemaphoreState{Threads: 1})
	st, queue := e.continuedAs()
	assert.Equal(t, []string{"a"}, []string{st.Holders[0].WorkflowID})
	assert.Equal(t, []string{"b", "c"}, queuedIDs(queue), "an operator's cancel does not drop the queue")
}

func TestSemaphoreContinueAsNewTakesAnAcquireAndItsReleaseInOrder(t *testing.T) {
	e := newSemaphoreEnv(t)
	e.at(time.Millisecond, func() {
		e.env.SetCurrentHistoryLength(semaphoreMaxEvents)
		e.env.SignalWorkflow(activities.AcquireSlotSignal, request("x"))
		e.env.SignalWorkflow(activities.AcquireSlotSignal, request("a"))
		e.env.SignalWorkflow(activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: "a", RunID: "run-a", Seq: 1})
	})
	e.run(activities.SemaphoreState{Threads: 1})
	st, queue := e.continuedAs()
	assert.NotContains(t, queuedIDs(queue), "a", "a released request must not be carried over as queued")
	assert.Len(t, append(queuedIDs(queue), holderIDs(activities.SlotsView{Holders: st.Holders})...), 1)
}

// A fresh instance after one that ended without handing over grants nothing new until the holders had a re-ask
// interval to re-assert: the plan holds across the replacement, and the line is in the order tasks first asked.
func TestSemaphoreFencedAfterAReplacementGrantsOnlyWhatIsFree(t *testing.T) {
	e := newSemaphoreEnv(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.env.SetStartTime(t0)
	waiter := func(id string, askedAgo time.Duration) activities.SlotRequest {
		r := request(id)
		r.RequestedAt = t0.Add(-askedAgo)
		return r
	}
	e.ask(time.Second, waiter("late", time.Minute), waiter("early", 2*time.Minute))
	e.at(2*time.Second, func() {
		assert.False(t, e.tickets["late"].Granted, "no grant while fenced")
		assert.NotNil(t, e.view().FencedUntil)
	})
	for i := range 2 { // the two holders of the instance before re-assert within a re-ask interval
		h := waiter(fmt.Sprintf("holder%d", i), 3*time.Minute)
		h.Held = true
		e.ask(activities.SlotReaskInterval-time.Duration(i)*time.Second, h)
	}
	e.at(semaphoreFence-time.Second, func() {
		assert.Empty(t, e.grants)
		assert.Equal(t, 2, e.view().InUse)
	})
	e.release(semaphoreFence+time.Second, "holder0")
	e.at(semaphoreFence+2*time.Second, func() {
		assert.Equal(t, []string{"early"}, e.grants, "one slot freed, to the first to have asked")
		assert.Nil(t, e.view().FencedUntil)
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 2, Fence: true})
	assert.LessOrEqual(t, e.peak, 2)
}

func TestSemaphorePlanIsOneStatedValue(t *testing.T) {
	e := newSemaphoreEnv(t)
	plan := func(d time.Duration, change activities.PlanChange, check func(int, error)) {
		e.at(d, func() {
			e.env.UpdateWorkflow(activities.PlanUpdate, "", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { check(0, err) },
				OnAccept:   func() {},
				OnComplete: func(v any, err error) { n, _ := v.(int); check(n, err) },
			}, change)
		})
	}
	plan(time.Millisecond, activities.PlanChange{Threads: 2}, func(n int, err error) {
		assert.NoError(t, err)
		assert.Equal(t, 2, n)
	})
	plan(2*time.Millisecond, activities.PlanChange{Threads: 3}, func(_ int, err error) {
		require.Error(t, err, "a worker with another PROVIDER_THREADS is refused")
		assert.Contains(t, err.Error(), "PROVIDER_THREADS=3 disagrees with the plan of 2 threads")
	})
	e.ask(3*time.Millisecond, request("a"), request("b"), request("c"))
	plan(time.Second, activities.PlanChange{Threads: 3, Set: true}, func(n int, err error) {
		assert.NoError(t, err)
		assert.Equal(t, 3, n)
	})
	e.at(2*time.Second, func() {
		assert.Equal(t, []string{"c"}, e.grants, "a bigger plan grants the next in line")
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 2})
}

func TestSemaphoreRefusesAsksBeyondWhatItCanCarry(t *testing.T) {
	defer func(n int) { maxQueueBytes = n }(maxQueueBytes)
	maxQueueBytes = 2 * packedSize(request("q0")) // q0 holds; q1 and q2 fill the queue
	e := newSemaphoreEnv(t)
	e.ask(time.Millisecond, request("q0"), request("q1"), request("q2"))
	e.ask(2*time.Millisecond, request("q3"))
	e.ask(3*time.Millisecond, activities.SlotRequest{WorkflowID: "norun", Seq: 1})
	e.at(time.Second, func() {
		require.Error(t, e.refused["q3"])
		assert.Contains(t, e.refused["q3"].Error(), "queue is full (2 requests waiting)")
		assert.ErrorContains(t, e.refused["norun"], "run_id is empty")
		assert.Equal(t, 2, e.view().Queued, "a refused ask leaves no trace")
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1})
}

func TestSemaphoreViewShowsTheOldestWait(t *testing.T) {
	e := newSemaphoreEnv(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.env.SetStartTime(t0)
	first := request("waiting")
	first.RequestedAt = t0
	e.ask(time.Millisecond, request("holder"), first)
	e.at(90*time.Second, func() {
		v := e.view()
		assert.Equal(t, 1, v.InUse)
		assert.Equal(t, 1, v.Queued)
		assert.InDelta(t, 90, v.OldestWaitSeconds, 1)
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1})
}

func TestEpochIsKeptAcrossContinueAsNewAndNewAfterAReset(t *testing.T) {
	assert.Equal(t, "run-1", epochOf("run-1", "run-1", ""), "a fresh start takes its run ID")
	assert.Equal(t, "run-1", epochOf("run-2", "run-2", "run-1"), "a continued run keeps the epoch it carries")
	assert.Equal(t, "run-3", epochOf("run-3", "run-2", "run-1"), "a reset run (original run ID elsewhere) takes its own")
}

func TestSemaphoreQueuesTenThousandAndCarriesThemOn(t *testing.T) {
	e := newSemaphoreEnv(t)
	const n, batch = 10_000, 200
	for b := range n / batch {
		reqs := make([]activities.SlotRequest, batch)
		for i := range reqs {
			reqs[i] = request(fmt.Sprintf("task-%05d", b*batch+i))
		}
		e.ask(time.Duration(b+1)*time.Millisecond, reqs...)
	}
	e.at(time.Second, func() {
		v := e.view()
		assert.Equal(t, 4, v.InUse)
		assert.Equal(t, n-4, v.Queued)
		assert.Len(t, v.QueueHead, activities.SlotsViewQueueHead, "the query answer stays small")
	})
	e.historyFull(2 * time.Second)
	e.run(activities.SemaphoreState{Threads: 4})
	st, queue := e.continuedAs()
	assert.Len(t, st.Holders, 4)
	require.Len(t, queue, n-4)
	assert.Equal(t, "task-00004", queue[0].WorkflowID)
	assert.Equal(t, "task-09999", queue[len(queue)-1].WorkflowID)
}

func TestSemaphoreServesTheFirstToHaveAskedWhenItsFenceEnds(t *testing.T) {
	e := newSemaphoreEnv(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.env.SetStartTime(t0)
	late, early := request("late"), request("early")
	late.RequestedAt, early.RequestedAt = t0.Add(-time.Minute), t0.Add(-2*time.Minute)
	e.ask(time.Second, late)
	e.ask(2*time.Second, early) // re-registered after "late", asked before it
	e.at(semaphoreFence+time.Second, func() {
		assert.Equal(t, []string{"early"}, e.grants, "the one free slot goes to the first to have asked")
		e.env.CancelWorkflow()
	})
	e.run(activities.SemaphoreState{Threads: 1, Fence: true})
}
