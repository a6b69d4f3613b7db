package tests

// An operator resets a task that holds a PROVIDER_THREADS slot: its reset run replays the grant of the run it was
// reset from, and the semaphore keeps the slot while the workflow ID has a running run. Under a plan of 1 a second
// task must not get the slot while the reset run's submission is still being solved.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

func TestE2E_ResetSlotHolderKeepsItsSlot(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "threads-reset")
	holder := sc.add(1, taskSpec{Kind: "slot holder, reset", SolveMS: 50_000})[0]
	waiter := sc.add(1, taskSpec{Kind: "queued behind it", SolveMS: 1000})[0]
	require.NoError(t, s.simRules(ctx, sc.rules()))

	taskQueue := "captcha-threads-" + sc.prefix
	metricsPort, err := devstack.FreePort()
	require.NoError(t, err)
	env := s.workerEnvOn(taskQueue)
	env["PROVIDER_THREADS"] = "1"
	env["WORKER_METRICS_ADDR"] = loopback(metricsPort)
	w, err := s.startProcess(ctx, "worker-threads-reset", s.bins.Worker, env, "http://"+loopback(metricsPort)+"/healthz")
	require.NoError(t, err)
	semID := activities.ThreadsWorkflowID(taskQueue, "")
	t.Cleanup(func() {
		_ = w.Stop()
		_ = s.c.TerminateWorkflow(context.Background(), semID, "", "test over")
	})

	_, err = captchaflow.Start(ctx, s.c, holder.ID, s.input(holder.taskSpec), captchaflow.StartOptions{TaskQueue: taskQueue})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := s.c.QueryWorkflow(ctx, holder.ID, "", captchaflow.StatusQuery)
		var st captchaflow.Status
		return err == nil && v.Get(&st) == nil && st.ProviderTaskID != ""
	}, 30*time.Second, 100*time.Millisecond, "the holder's submission accepted")
	resetTo(ctx, t, s, holder.ID, true)
	sc.note("reset %s (holding the only slot) to its last workflow task", holder.ID)
	run, err := captchaflow.Start(ctx, s.c, waiter.ID, s.input(waiter.taskSpec), captchaflow.StartOptions{TaskQueue: taskQueue})
	require.NoError(t, err)

	require.NoError(t, s.c.GetWorkflow(ctx, holder.ID, "").Get(ctx, &holder.Result), "the reset run completes")
	require.NoError(t, run.Get(ctx, &waiter.Result))
	assert.False(t, waiter.Result.SubmittedAt.Before(holder.Result.ReceivedAt),
		"the second task submitted at %v, %v before the reset holder's submission was solved",
		waiter.Result.SubmittedAt, holder.Result.ReceivedAt.Sub(waiter.Result.SubmittedAt))
	sc.note("holder solved at %v, the queued task submitted at %v", holder.Result.ReceivedAt, waiter.Result.SubmittedAt)
}

// resetTo resets id's current run to its first (or last) completed workflow task, as an operator's
// `temporal workflow reset --type FirstWorkflowTask` (LastWorkflowTask) does.
func resetTo(ctx context.Context, t *testing.T, s *stack, id string, last bool) {
	desc, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	h, err := s.history(ctx, id)
	require.NoError(t, err)
	var at int64
	for _, ev := range h.Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED && (at == 0 || last) {
			at = ev.GetEventId()
		}
	}
	require.NotZero(t, at)
	_, err = s.resetRun(ctx, id, desc.WorkflowExecution.RunID, at, "e2e: an operator resets "+id)
	require.NoError(t, err)
}
