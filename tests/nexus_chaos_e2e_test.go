package tests

// Issue 39, item 4: the Nexus endpoint under the same chaos as direct starts, and a caller's reset.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_NexusChaos: 30 tasks through the endpoint, one caller workflow each, with dropped, duplicated and late
// callbacks and the worker (the handler's host too) SIGKILLed mid-batch: every task delivered once and paid once
// (scenario.verify), and every caller's result the task's own.
func TestE2E_NexusChaos(t *testing.T) {
	s := requireStack(t)
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "nexuschaos")
	sc.allowCrashRepeats = true
	sc.add(9, taskSpec{Kind: "no fault, via nexus"})
	sc.add(7, taskSpec{Kind: "dropped pingback, via nexus", Faults: "drop_pingback", Via: captchaflow.ViaPoll})
	dup := sc.add(7, taskSpec{Kind: "duplicate pingback, via nexus", Faults: "duplicate_pingback"})
	late := sc.add(7, taskSpec{Kind: "late pingback, via nexus", Faults: "late_pingback"})
	require.NoError(t, s.simRules(ctx, sc.rules()))

	sc.started = time.Now()
	runs := make([]client.WorkflowRun, len(sc.tasks))
	require.NoError(t, errors.Join(parallel(len(sc.tasks), 8, func(i int) (err error) {
		tr := sc.tasks[i]
		runs[i], err = callThroughNexus(ctx, shop, tr.ID+"-caller", tr.ID, s.input(tr.taskSpec))
		return err
	})...))
	killAtSubmissions(ctx, t, sc, len(sc.tasks)/2)

	callers := make([]captchaflow.Result, len(runs))
	callerErrs := parallel(len(runs), len(runs), func(i int) error { return runs[i].Get(ctx, &callers[i]) })
	sc.await(ctx, scenarioTimeout)
	waitPingbacksAnswered(ctx, sc, dup, late)
	sc.verify(ctx) // after the late and duplicate pingbacks: still one delivery and one payment each
	for i, tr := range sc.tasks {
		if assert.NoError(t, callerErrs[i], "%s: its caller", tr.ID) {
			assert.Equal(t, tr.Result, callers[i], "%s: the caller's result is the task's own", tr.ID)
		}
	}
	replayLive(t, s, sc.ids()[:3]...)
	replayCallers(t, s, shop, runs[0].GetID(), runs[len(runs)-1].GetID()) // written across the SIGKILL too
}

// killAtSubmissions SIGKILLs the worker once the provider has n of the scenario's submissions, and restarts it.
func killAtSubmissions(ctx context.Context, t *testing.T, sc *scenario, n int) {
	got := 0
	eventually(t, fmt.Sprintf("%d submissions", n), 2*time.Minute, 50*time.Millisecond, func() string {
		tasks, err := sc.s.simTasks(ctx, callbackPathPrefix+sc.prefix)
		if got = len(tasks); err != nil || got < n {
			return fmt.Sprintf("%d submissions so far (%v)", got, err)
		}
		return ""
	})
	sc.s.worker.Kill()
	require.NoError(t, sc.s.restartWorker(ctx))
	sc.note("worker (and Nexus handler) SIGKILLed with %d of %d tasks submitted, and restarted", got, len(sc.tasks))
}

// waitPingbacksAnswered waits until the late pingbacks and both of each duplicate have been sent and answered 200.
func waitPingbacksAnswered(ctx context.Context, sc *scenario, dup, late []*taskRun) {
	want := map[*taskRun]int{}
	for _, tr := range dup {
		want[tr] = 2
	}
	for _, tr := range late {
		want[tr] = 1
	}
	sc.waitSim(ctx, "late and duplicate pingbacks answered", time.Minute, func(m map[string][]sim.Task) string {
		for tr, n := range want {
			ts := m[tr.ID]
			if len(ts) == 0 {
				return tr.ID + ": not submitted"
			}
			answered := 0
			for _, p := range ts[len(ts)-1].Pingbacks {
				if p.HTTPStatus == http.StatusOK {
					answered++
				}
			}
			if answered < n {
				return fmt.Sprintf("%s: %d of %d pingbacks answered", tr.ID, answered, n)
			}
		}
		return ""
	})
}

// callerReset is one caller workflow reset by its team's operator, and the Nexus events its reset run must show.
type callerReset struct {
	tr    *taskRun
	to    resetPoint
	when  string // "running": once the task awaits its (paid) callback; "completed": once the caller has its result
	after []string

	point int64  // the event reset to
	runID string // the reset run
}

// TestE2E_NexusCallerReset: a caller reset replays its operation, which joins the same task — while the task runs,
// and after it completed (answered at once) — so the reset run gets the task's own result and nothing is paid again.
func TestE2E_NexusCallerReset(t *testing.T) {
	s := requireStack(t)
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "nexusreset")
	slow := taskSpec{Kind: "caller reset while its task runs", SolveMS: 6000, CallbackTimeout: 30, Via: captchaflow.ViaCallback}
	async := []string{"NexusOperationScheduled", "NexusOperationStarted", "NexusOperationCompleted"}
	cases := []*callerReset{
		{tr: sc.add(1, slow)[0], to: firstWorkflowTask, when: "running", after: async},
		{tr: sc.add(1, slow)[0], to: after(nexusStarted), when: "running", after: async[2:]},
		{tr: sc.add(1, taskSpec{Kind: "caller reset after its task completed"})[0], to: firstWorkflowTask,
			when: "completed", after: []string{"NexusOperationScheduled", "NexusOperationCompleted"}}, // the task's Result, at once
	}
	sc.started = time.Now()
	runs := make([]client.WorkflowRun, len(cases))
	for i, c := range cases {
		var err error
		runs[i], err = callThroughNexus(ctx, shop, c.tr.ID+"-caller", c.tr.ID, s.input(c.tr.taskSpec))
		require.NoError(t, err)
	}
	for i, c := range cases {
		if c.when == "running" {
			sc.waitStates(ctx, []string{c.tr.ID}, "awaiting the callback", 30*time.Second, awaitingQuietly)
		} else {
			require.NoError(t, runs[i].Get(ctx, nil))
		}
		c.reset(ctx, t, shop, runs[i].GetRunID())
	}
	sc.await(ctx, scenarioTimeout)
	sc.verify(ctx) // one submission each: the reset run's operation joined the task
	for _, c := range cases {
		c.check(ctx, t, shop)
		replayCallers(t, s, shop, c.tr.ID+"-caller") // the reset run
	}
}

// reset resets the caller's run to c.to, as its team's operator would (`temporal workflow reset`).
func (c *callerReset) reset(ctx context.Context, t *testing.T, shop client.Client, runID string) {
	id := c.tr.ID + "-caller"
	c.point = c.to(clientHistory(ctx, t, shop, id, runID))
	require.NotZero(t, c.point, "%s: no reset point in its history", id)
	resp, err := shop.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: devstack.CallerNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason: "e2e: a caller's reset", WorkflowTaskFinishEventId: c.point, RequestId: uuid.NewString()})
	require.NoError(t, err, id)
	c.runID = resp.GetRunId()
}

// check wants the reset run's result to be the task's own, through the Nexus events c.after after the reset point.
func (c *callerReset) check(ctx context.Context, t *testing.T, shop client.Client) {
	id := c.tr.ID + "-caller"
	var got captchaflow.Result
	if assert.NoError(t, shop.GetWorkflow(ctx, id, c.runID).Get(ctx, &got), "%s: the reset run", id) {
		assert.Equal(t, c.tr.Result, got, "%s: the reset caller's result is the task's own", id)
	}
	var names []string
	for _, ev := range clientHistory(ctx, t, shop, id, c.runID).GetEvents() {
		if name := ev.GetEventType().String(); ev.GetEventId() > c.point && strings.HasPrefix(name, "NexusOperation") {
			names = append(names, name)
		}
	}
	assert.Equal(t, c.after, names, "%s: the reset run's Nexus events after event %d", id, c.point)
}

// firstWorkflowTask is the first workflow task's completion: the reset run schedules its operation again.
func firstWorkflowTask(h *historypb.History) int64 {
	return after(func(*historypb.HistoryEvent, string) bool { return true })(h)
}

func nexusStarted(ev *historypb.HistoryEvent, _ string) bool {
	return ev.GetEventType() == enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED
}

// clientHistory is run runID of id, through c (another namespace than the stack's).
func clientHistory(ctx context.Context, t *testing.T, c client.Client, id, runID string) *historypb.History {
	iter := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err, id)
		h.Events = append(h.Events, ev)
	}
	return h
}
