package tests

// Provider thread admission (issue #10 §1, PROVIDER_THREADS) on the real stack: a worker with PROVIDER_THREADS=2 on a
// task queue of its own; six tasks started at once queue for the two slots. One slot holder is terminated (its
// workflow can never release) and the worker is SIGKILLed while holding slots; after its restart every other task
// completes, never more than two at once in flight, and the semaphore ends with no holder and no queue: no slot
// leaked.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

func TestE2E_ProviderThreadsSlotsSurviveWorkerKillAndTermination(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "provider-threads")
	trs := sc.add(6, taskSpec{Kind: "queued for a slot", SolveMS: 3000})
	require.NoError(t, s.simRules(ctx, sc.rules()))

	taskQueue := "captcha-threads-" + sc.prefix
	metricsPort, err := devstack.FreePort()
	require.NoError(t, err)
	env := s.workerEnvOn(taskQueue)
	env["PROVIDER_THREADS"] = "2"
	env["WORKER_METRICS_ADDR"] = loopback(metricsPort)
	readyURL := "http://" + loopback(metricsPort) + "/healthz"
	w, err := s.startProcess(ctx, "worker-threads", s.bins.Worker, env, readyURL)
	require.NoError(t, err)
	semID := activities.ThreadsWorkflowID(taskQueue, "")
	t.Cleanup(func() {
		_ = w.Stop()
		_ = s.c.TerminateWorkflow(context.Background(), semID, "", "test over")
	})

	slots := func() activities.SemaphoreState {
		v, err := s.c.QueryWorkflow(ctx, semID, "", activities.SlotsQuery)
		if err != nil {
			return activities.SemaphoreState{Plan: -1}
		}
		var st activities.SemaphoreState
		require.NoError(t, v.Get(&st))
		return st
	}
	peak := 0
	watch := func() activities.SemaphoreState {
		st := slots()
		peak = max(peak, len(st.Holders))
		return st
	}

	runs := map[string]func() error{}
	for _, tr := range trs {
		run, err := captchaflow.Start(ctx, s.c, tr.ID, s.input(tr.taskSpec), captchaflow.StartOptions{TaskQueue: taskQueue})
		require.NoError(t, err)
		runs[tr.ID] = func() error { return run.Get(ctx, &tr.Result) }
	}
	var held activities.SemaphoreState
	require.Eventually(t, func() bool {
		held = watch()
		return len(held.Holders) == 2 && len(held.Queue) == 4
	}, 30*time.Second, 50*time.Millisecond, "two slots held and four tasks queued")
	queuedFirst := ""
	for _, tr := range trs {
		if !slices.ContainsFunc(held.Holders, func(h activities.SlotRequest) bool { return h.WorkflowID == tr.ID }) {
			queuedFirst = tr.ID
		}
	}
	v, err := s.c.QueryWorkflow(ctx, queuedFirst, "", captchaflow.StatusQuery)
	require.NoError(t, err)
	var st captchaflow.Status
	require.NoError(t, v.Get(&st))
	assert.Equal(t, captchaflow.PhaseQueued, st.Phase)

	// One holder is terminated: it can never release; the semaphore's reclaim check must take its slot back.
	terminated := held.Holders[0].WorkflowID
	require.NoError(t, s.c.TerminateWorkflow(ctx, terminated, "", "e2e: a holder that never releases"))
	// The worker dies holding the other slot: its task goes on after the restart and releases then.
	w.Kill()
	sc.note("terminated slot holder %s and SIGKILLed the PROVIDER_THREADS=2 worker", terminated)
	time.Sleep(2 * time.Second)
	require.NoError(t, restart(ctx, w, readyURL))

	for id, get := range runs {
		if id == terminated {
			continue
		}
		require.NoError(t, get(), id)
		watch()
	}
	var end activities.SemaphoreState
	require.Eventually(t, func() bool {
		end = watch()
		return end.Plan == 2 && len(end.Holders) == 0 && len(end.Queue) == 0
	}, 90*time.Second, 200*time.Millisecond, "every slot back (the terminated holder's by the reclaim check)")
	assert.LessOrEqual(t, peak, 2, "never more than PROVIDER_THREADS slots held")
	sc.note("5 tasks completed after the kill; semaphore: %d/%d held, %d queued; peak %d", len(end.Holders), end.Plan, len(end.Queue), peak)
	var done []string
	for _, tr := range trs {
		if tr.ID != terminated {
			assert.NotEmpty(t, tr.Result.Code, tr.ID)
			done = append(done, tr.ID)
		}
	}
	// The replayer registers SolveCaptcha without PROVIDER_THREADS, as a worker without the setting would: the
	// recorded change marker alone takes these histories down the slot path. The semaphore's own history too.
	replayLive(t, s, append(done, semID)...)
	recordNew(t, s, map[string]string{"slot-queued-granted-released": queuedFirst})
}
