package tests

// The provider-threads semaphore replaced under 200 queued requesters (issues #14 §3 and #16): the requesters are
// probes (bench/admission) running the task side of the slot protocol as SolveCaptcha does — ask, wait for the grant,
// re-ask every SlotReaskInterval, release — against two real worker processes with PROVIDER_THREADS=4 that run the
// semaphore and AcquireSlot. Mid-batch the semaphore is terminated and one of the workers SIGKILLed, its
// replacement is cancelled, and later reset. Every probe must get its slot (none stranded), never more than 4
// held at once (from the probes' own hold times), and the semaphore's history must replay.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/bench/admission"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

const (
	admissionPlan   = 4
	admissionProbes = 200
)

func TestE2E_SemaphoreReplacedUnderLoadStrandsNobody(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	slotQueue := "captcha-admission-" + s.runID
	semID := activities.ThreadsWorkflowID(slotQueue)
	workers := startSlotWorkers(ctx, t, s, slotQueue, 2)
	t.Cleanup(func() { _ = s.c.TerminateWorkflow(context.Background(), semID, "", "test over") })
	runs := startSlotProbes(ctx, t, s, slotQueue)
	view := func() activities.SlotsView {
		var v activities.SlotsView
		if q, err := s.c.QueryWorkflow(ctx, semID, "", activities.SlotsQuery); err == nil {
			_ = q.Get(&v)
		}
		return v
	}
	var first activities.SlotsView
	require.Eventually(t, func() bool { first = view(); return first.Queued >= admissionProbes/2 }, time.Minute, 100*time.Millisecond,
		"the probes queue behind %d slots", admissionPlan)

	require.NoError(t, s.c.TerminateWorkflow(ctx, semID, "", "e2e: an operator terminates the semaphore mid-batch"))
	workers[0].p.Kill()
	var second activities.SlotsView
	require.Eventually(t, func() bool { second = view(); return second.Epoch != "" && second.Epoch != first.Epoch },
		90*time.Second, 500*time.Millisecond, "a replacement within a minute, started by the probes' re-asks")
	assert.NotNil(t, second.FencedUntil, "the replacement grants nothing until the holders re-asserted")
	require.NoError(t, restart(ctx, workers[0].p, workers[0].ready))

	require.NoError(t, s.c.CancelWorkflow(ctx, semID, ""))
	require.Eventually(t, func() bool { v := view(); return v.Epoch == second.Epoch && v.Queued+v.InUse > 0 },
		30*time.Second, 200*time.Millisecond, "a cancelled semaphore continues with its queue, same instance")

	time.Sleep(5 * time.Second) // some grants after the fence, then the reset
	resetToFirstTask(ctx, t, s, semID)
	require.Eventually(t, func() bool { v := view(); return v.Epoch != "" && v.Epoch != second.Epoch },
		90*time.Second, 500*time.Millisecond, "a reset semaphore takes a new epoch on the next re-ask")

	results := awaitProbes(ctx, t, runs)
	peak := admission.PeakHeld(results)
	assert.LessOrEqual(t, peak, admissionPlan, "never more slots held than the plan, across every replacement")
	rereg, stray := 0, 0
	for _, r := range results {
		rereg += r.Reregistered
		stray += r.Stray
	}
	assert.Positive(t, rereg, "requesters re-registered with the replacements")
	t.Logf("%d probes admitted; peak %d held (plan %d); %d re-registrations, %d stray grants given back", len(results),
		peak, admissionPlan, rereg, stray)
	replayLive(t, s, semID)
	var metrics string
	for _, w := range workers {
		m, err := scrape(ctx, strings.TrimSuffix(w.ready, "/healthz")+"/metrics")
		require.NoError(t, err)
		metrics += m
	}
	for _, name := range []string{"captchaflow_provider_slots_in_use", "captchaflow_provider_slots_plan",
		"captchaflow_provider_slots_queued", "captchaflow_provider_slots_oldest_wait_seconds"} {
		assert.Contains(t, metrics, name, "operators read it from the worker running the semaphore")
	}
	checkPlanIsOneValue(ctx, t, s, slotQueue)
}

// checkPlanIsOneValue: a worker whose PROVIDER_THREADS disagrees with the running plan refuses to start (exit 2,
// naming both values); `worker -set-provider-threads` changes the plan, after which that worker starts.
func checkPlanIsOneValue(ctx context.Context, t *testing.T, s *stack, slotQueue string) {
	env := s.workerEnvOn(slotQueue)
	env["PROVIDER_THREADS"] = fmt.Sprint(admissionPlan + 1)
	env["WORKER_METRICS_ADDR"] = "" // no listener: it must not get that far
	run := func(name string, env map[string]string, args ...string) (*devstack.Process, error) {
		p, err := devstack.StartProcess(devstack.ProcessSpec{Name: name, Path: s.bins.Worker, Args: args,
			Env: devstack.MergeEnv(env), LogPath: filepath.Join(s.runDir, name+".log"), StopTimeout: 5 * time.Second})
		require.NoError(t, err)
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
			_ = p.Stop()
			t.Fatalf("%s did not exit", name)
		}
		return p, p.Wait()
	}
	p, err := run("worker-other-plan", env)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "a worker with another plan must not start")
	assert.Equal(t, 2, exit.ExitCode(), "a configuration error")
	assert.Contains(t, p.Tail(5), fmt.Sprintf("PROVIDER_THREADS=%d disagrees with the plan of %d threads", admissionPlan+1, admissionPlan))

	p, err = run("worker-set-plan", env, "-set-provider-threads", fmt.Sprint(admissionPlan+1))
	require.NoError(t, err, p.Tail(5))
	assert.Contains(t, p.Tail(5), fmt.Sprintf("plan of task queue %s: %d threads", slotQueue, admissionPlan+1))
	q, err := s.c.QueryWorkflow(ctx, activities.ThreadsWorkflowID(slotQueue), "", activities.SlotsQuery)
	require.NoError(t, err)
	var v activities.SlotsView
	require.NoError(t, q.Get(&v))
	assert.Equal(t, admissionPlan+1, v.Threads)
}

type slotWorker struct {
	p     *devstack.Process
	ready string
}

// startSlotWorkers starts n worker processes with PROVIDER_THREADS on slotQueue.
func startSlotWorkers(ctx context.Context, t *testing.T, s *stack, slotQueue string, n int) []slotWorker {
	var procs []slotWorker
	for i := range n {
		port, err := devstack.FreePort()
		require.NoError(t, err)
		env := s.workerEnvOn(slotQueue)
		env["PROVIDER_THREADS"] = fmt.Sprint(admissionPlan)
		env["WORKER_METRICS_ADDR"] = loopback(port)
		ready := "http://" + loopback(port) + "/healthz"
		p, err := s.startProcess(ctx, fmt.Sprintf("worker-slots-%d", i), s.bins.Worker, env, ready)
		require.NoError(t, err, "slot worker %d", i)
		t.Cleanup(func() { _ = p.Stop() })
		procs = append(procs, slotWorker{p, ready})
	}
	return procs
}

func startSlotProbes(ctx context.Context, t *testing.T, s *stack, slotQueue string) []client.WorkflowRun {
	probeQueue := slotQueue + "-probes"
	w := worker.New(s.c, probeQueue, worker.Options{})
	admission.Register(w, &activities.Activities{}, s.c)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	var runs []client.WorkflowRun
	for i := range admissionProbes {
		run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%03d", probeQueue, i), TaskQueue: probeQueue},
			admission.ProbeWorkflowType, admission.ProbeInput{Admissions: 1, Hold: 500 * time.Millisecond, SlotQueue: slotQueue})
		require.NoError(t, err)
		runs = append(runs, run)
	}
	return runs
}

func awaitProbes(ctx context.Context, t *testing.T, runs []client.WorkflowRun) []admission.ProbeResult {
	var results []admission.ProbeResult
	for _, run := range runs {
		var r admission.ProbeResult
		require.NoError(t, run.Get(ctx, &r), "probe %s stranded or failed", run.GetID())
		require.Len(t, r.Holds, 1, run.GetID())
		results = append(results, r)
	}
	return results
}

// resetToFirstTask resets the semaphore's current run to its first completed workflow task, as an operator's
// `temporal workflow reset --type FirstWorkflowTask` does.
func resetToFirstTask(ctx context.Context, t *testing.T, s *stack, id string) {
	resetTo(ctx, t, s, id, false)
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
