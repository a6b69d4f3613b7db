package tests

// The chaos scenario with real tasks: 200 SolveCaptcha workflows on a task queue of their own, one worker with
// PROVIDER_THREADS=chaosPlan running them and their semaphore, the simulator capped at the same number of threads
// (as the provider sells them). Once the batch is queued the semaphore is terminated and the worker SIGKILLed and
// restarted (the first chaosPlan tasks solve slowly, so they hold every thread across it and the rest of the batch
// is queued). Every task must still deliver exactly once with its code (none lost, none stuck) and no provider task
// may be paid twice. The replacement, started by the first re-ask, does not know the old holders until they
// re-assert: it may over-grant by at most the plan, counted in captchaflow_provider_slots_over_plan_total, and the
// provider's ERROR_NO_SLOT_AVAILABLE answers to those requests cost a retry, never a payment.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/workflows"
)

const (
	chaosPlan    = 10   // PROVIDER_THREADS and the simulator's cap
	chaosTasks   = 200  // the batch
	chaosSolveMS = 1500 // short solves: the batch is 20 rounds of the plan
	// chaosHoldMS: the first chaosPlan tasks solve this long, so the rest of the batch is queued behind them when
	// the chaos strikes and they hold their threads across it (re-asserting them to the replacement).
	chaosHoldMS = 30000
	// chaosDeadlineSeconds: the tasks' own deadline, above the harness's 240 s, so a slow shared machine shows as
	// a slow batch rather than as deadline failures.
	chaosDeadlineSeconds = 420
)

func TestE2E_ThreadsChaos_SemaphoreTerminatedWorkerKilled200RealTasks(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := testContext(t, 7*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "threads-chaos")
	sc.allowCrashRepeats = true // a Submit or Deliver in flight at the SIGKILL is lost with the worker
	sc.add(chaosPlan, taskSpec{Kind: "holding a provider thread across the chaos", SolveMS: chaosHoldMS})
	sc.add(chaosTasks-chaosPlan, taskSpec{Kind: "queued for a provider thread", SolveMS: chaosSolveMS})
	require.NoError(t, s.simDo(ctx, http.MethodPut, "/_sim/threads", `{"threads":`+strconv.Itoa(chaosPlan)+`}`, http.StatusOK))
	t.Cleanup(func() {
		_ = s.simDo(context.Background(), http.MethodPut, "/_sim/threads", `{"threads":0}`, http.StatusOK)
	})

	taskQueue := "captcha-threads-chaos-" + s.runID
	semID := activities.ThreadsWorkflowID(taskQueue, "")
	w, ready := startPlanWorker(ctx, t, s, taskQueue, chaosPlan)
	t.Cleanup(func() { _ = s.c.TerminateWorkflow(context.Background(), semID, "", "test over") })
	require.NoError(t, s.simRules(ctx, sc.rules()))
	require.NoError(t, startOnQueue(ctx, sc, taskQueue))
	watch := watchSemaphore(ctx, s, semID)

	var first activities.SemaphoreState
	eventually(t, "the batch queued behind the plan", 2*time.Minute, 200*time.Millisecond, func() string {
		var err error
		if first, err = watch.view(); err == nil && len(first.Holders) == chaosPlan && len(first.Queue) >= chaosTasks*3/4 {
			return ""
		}
		return fmt.Sprintf("semaphore: %d held, %d queued (query: %v)", len(first.Holders), len(first.Queue), err)
	})
	firstRun := runOf(ctx, t, s, semID)
	require.NoError(t, s.c.TerminateWorkflow(ctx, semID, "", "e2e: the semaphore terminated mid-batch"))
	w.Kill()
	chaosAt := time.Now()
	sc.note("terminated the semaphore (%d held, %d queued) and SIGKILLed the PROVIDER_THREADS=%d worker",
		len(first.Holders), len(first.Queue), chaosPlan)
	require.NoError(t, restart(ctx, w, ready))

	sc.await(ctx, time.Until(deadlineOf(ctx))-time.Minute) // a minute left to verify
	sc.note("batch after the chaos: %.1f s (whole batch %.1f s)", sc.ended.Sub(chaosAt).Seconds(), sc.ended.Sub(sc.started).Seconds())
	checkNothingStuck(ctx, t, watch)
	watch.stop()
	assert.NotEqual(t, firstRun, runOf(ctx, t, s, semID), "a replacement semaphore served the rest of the batch")
	sc.verify(ctx)
	checkThreadsChaosFigures(ctx, t, sc, watch, ready)
	replayLive(t, s, semID, sc.tasks[0].ID, sc.tasks[len(sc.tasks)-1].ID)
}

func runOf(ctx context.Context, t *testing.T, s *stack, id string) string {
	desc, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	return desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// checkNothingStuck: once every task has its result the semaphore holds and queues nothing (releases are
// signals, so they may land a moment after the results).
func checkNothingStuck(ctx context.Context, t *testing.T, watch *semaphoreWatch) {
	eventually(t, "every slot back and nobody queued", time.Minute, 200*time.Millisecond, func() string {
		v, err := watch.view()
		if err == nil && v.Plan == chaosPlan && len(v.Holders) == 0 && len(v.Queue) == 0 {
			return ""
		}
		return fmt.Sprintf("%d held, %d queued, plan %d (query: %v)", len(v.Holders), len(v.Queue), v.Plan, err)
	})
}

// checkThreadsChaosFigures asserts and notes the figures: paid twice, peak threads, the over-grant and its count,
// no-slot answers, asks.
func checkThreadsChaosFigures(ctx context.Context, t *testing.T, sc *scenario, watch *semaphoreWatch, ready string) {
	extraPaid := 0
	for _, tr := range sc.tasks {
		extraPaid += max(0, len(sc.simTasks[tr.ID])-tr.submits())
	}
	assert.Zero(t, extraPaid, "provider tasks paid twice")
	st, err := sc.s.simStats(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.Threads.PeakInUse, chaosPlan, "threads in use at the provider")
	assert.LessOrEqual(t, watch.peak(), 2*chaosPlan, "slots the semaphore counted as held: the over-grant is bounded by the plan")
	overPlan := scrapeSum(ctx, t, strings.TrimSuffix(ready, "/healthz")+"/metrics", workflows.MetricSlotsOverPlan)
	if watch.peak() > chaosPlan {
		assert.Positive(t, overPlan, "the over-grant is counted")
	}
	hs := historiesParallel(ctx, t, sc.s, sc.ids())
	submits := 0
	for _, h := range hs {
		submits += activityCount(h, "Submit")
	}
	sc.note("wall %.1f s; extra paid %d; peak in use %d at the provider (cap %d), %d in the semaphore's view; "+
		"over the plan counted %v; no-slot answers %d; %d Submit activities",
		sc.ended.Sub(sc.started).Seconds(), extraPaid, st.Threads.PeakInUse, chaosPlan, watch.peak(), overPlan, st.Threads.NoSlot, submits)
}

// scrapeSum sums the samples of metric name at url (0 when absent).
func scrapeSum(ctx context.Context, t *testing.T, url, name string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum, _ := metricSum(string(body), name, nil)
	return sum
}

// startPlanWorker starts a worker process with PROVIDER_THREADS=plan on taskQueue and returns it with its ready URL.
func startPlanWorker(ctx context.Context, t *testing.T, s *stack, taskQueue string, plan int) (*devstack.Process, string) {
	port, err := devstack.FreePort()
	require.NoError(t, err)
	env := s.workerEnvOn(taskQueue)
	env["PROVIDER_THREADS"] = strconv.Itoa(plan)
	env["WORKER_METRICS_ADDR"] = loopback(port)
	ready := "http://" + loopback(port) + "/healthz"
	w, err := s.startProcess(ctx, "worker-"+taskQueue, s.bins.Worker, env, ready)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop() })
	return w, ready
}

// startOnQueue starts every task of the scenario on taskQueue, with chaosDeadlineSeconds.
func startOnQueue(ctx context.Context, sc *scenario, taskQueue string) error {
	sc.started = time.Now()
	var errs []error
	for _, err := range parallel(len(sc.tasks), 8, func(i int) error {
		tr := sc.tasks[i]
		in := sc.s.input(tr.taskSpec)
		in.DeadlineSeconds = chaosDeadlineSeconds
		_, err := captchaflow.Start(ctx, sc.s.c, tr.ID, in, captchaflow.StartOptions{TaskQueue: taskQueue})
		return err
	}) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// semaphoreWatch samples the semaphore's query every 250 ms for its peak held slots.
type semaphoreWatch struct {
	s    *stack
	id   string
	mu   sync.Mutex
	max  int
	last activities.SemaphoreState
	err  error // the last query's failure, for the messages
	done chan struct{}
	wg   sync.WaitGroup
}

func watchSemaphore(ctx context.Context, s *stack, id string) *semaphoreWatch {
	w := &semaphoreWatch{s: s, id: id, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample(ctx)
			select {
			case <-tick.C:
			case <-w.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

// sample queries the semaphore once; an absent or terminated semaphore is skipped.
func (w *semaphoreWatch) sample(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	q, err := w.s.c.QueryWorkflow(qctx, w.id, "", activities.SlotsQuery)
	var v activities.SemaphoreState
	if err == nil {
		err = q.Get(&v)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err = err; err != nil {
		return
	}
	w.max = max(w.max, len(v.Holders))
	w.last = v
}

// view samples now and returns the latest answer, and the failure of this query if it failed.
func (w *semaphoreWatch) view() (activities.SemaphoreState, error) {
	w.sample(context.Background())
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.err
}

func (w *semaphoreWatch) peak() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

// stop ends the sampling.
func (w *semaphoreWatch) stop() {
	close(w.done)
	w.wg.Wait()
}

// historiesParallel fetches the histories of ids, eight at a time.
func historiesParallel(ctx context.Context, t *testing.T, s *stack, ids []string) []*historypb.History {
	hs := make([]*historypb.History, len(ids))
	errs := parallel(len(ids), 8, func(i int) (err error) {
		hs[i], err = s.history(ctx, ids[i])
		return err
	})
	for i, err := range errs {
		require.NoError(t, err, ids[i])
	}
	return hs
}

// activityCount counts the activities of one type a history scheduled (retries of one are not counted again).
func activityCount(h *historypb.History, name string) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// testContext is a context ending at the test's deadline (less a margin for cleanup), or after bound.
func testContext(t *testing.T, bound time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(bound)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(end) {
		end = d.Add(-30 * time.Second)
	}
	return context.WithDeadline(context.Background(), end)
}

// deadlineOf is ctx's deadline (every context testContext makes has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
