package tests

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/internal/billing"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// The two providers of the routing scenarios (#17): a speaks in.php, b createTask in CapSolver's flavor.
const (
	providerA = "a"
	providerB = "b"
	// routedGiveUp and routedNoSlotBudget are PROVIDER_GIVE_UP's and PROVIDER_NO_SLOT_BUDGET's least values.
	routedGiveUp       = 10 * time.Second
	routedNoSlotBudget = 5 * time.Second
)

// routed is a worker with PROVIDERS_FILE beside the shared stack, on a task queue of its own, calling two provider
// simulators of its own. It shares the stack's Temporal, ingress (through the callback proxy) and webhook receiver.
type routed struct {
	s          *stack
	queue      string
	urlA, urlB string
	simA, simB *devstack.Process
	worker     *devstack.Process
	metrics    string            // the worker's /metrics
	env        map[string]string // the worker's environment
}

// startRouted starts the two simulators and the routed worker; everything stops when the test ends. envA adds to
// a's simulator environment (its solve times: a task's sim_solve_ms is a parameter no createTask provider takes, so
// such a task could not fail over to b).
func startRouted(t *testing.T, s *stack, sc *scenario, envA map[string]string) *routed {
	t.Helper()
	return startRoutedFile(t, s, sc, envA, "", "")
}

// startRoutedFile is startRouted with head (top-level settings) at the top of PROVIDERS_FILE and extra appended to
// each provider's entry (a's, then b's, split on '|').
func startRoutedFile(t *testing.T, s *stack, sc *scenario, envA map[string]string, head, extra string) *routed {
	t.Helper()
	extraA, extraB, _ := strings.Cut(extra, "|")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ports := make([]int, 3)
	for i := range ports {
		var err error
		ports[i], err = devstack.FreePort()
		require.NoError(t, err)
	}
	r := &routed{s: s, queue: "routed-" + sc.prefix, urlA: "http://" + loopback(ports[0]), urlB: "http://" + loopback(ports[1])}
	t.Cleanup(func() {
		for _, p := range []*devstack.Process{r.worker, r.simA, r.simB} {
			if p != nil {
				_ = p.Stop()
			}
		}
	})
	var err error
	r.simA, err = s.startProcess(ctx, "sim-a-"+sc.name, s.bins.Simulator, mergeMaps(simEnv(ports[0], 5_000), envA), r.urlA+"/healthz")
	require.NoError(t, err)
	envB := simEnv(ports[1], 0)
	envB["SIM_PROTOCOL"], envB["SIM_FLAVOR"] = "createtask", "capsolver"
	r.simB, err = s.startProcess(ctx, "sim-b-"+sc.name, s.bins.Simulator, envB, r.urlB+"/healthz")
	require.NoError(t, err)

	protoA := "inphp" // unless envA makes a a createTask provider
	if envA["SIM_PROTOCOL"] == "createtask" {
		protoA = "createtask, flavor: " + envA["SIM_FLAVOR"]
	}
	file := filepath.Join(s.runDir, "providers-"+sc.name+".yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`%sproviders:
  - {name: %s, protocol: %s, base_url: %q, api_key_env: E2E_PROVIDER_A_KEY%s}
  - {name: %s, protocol: createtask, flavor: capsolver, base_url: %q, api_key_env: E2E_PROVIDER_B_KEY%s}
`, head, providerA, protoA, r.urlA, extraA, providerB, r.urlB, extraB)), 0o600))
	env := s.workerEnv()
	delete(env, "CAPTCHAAI_API_KEY")
	delete(env, "CAPTCHAAI_BASE_URL")
	metrics := "http://" + loopback(ports[2])
	r.metrics = metrics + "/metrics"
	for k, v := range map[string]string{"PROVIDERS_FILE": file, "E2E_PROVIDER_A_KEY": providerKey, "E2E_PROVIDER_B_KEY": providerKey,
		"TASK_QUEUE": r.queue, "WORKER_METRICS_ADDR": loopback(ports[2]), "PROVIDER_BALANCE_INTERVAL": "0",
		"PROVIDER_GIVE_UP": routedGiveUp.String(), "PROVIDER_NO_SLOT_BUDGET": routedNoSlotBudget.String()} {
		env[k] = v
	}
	r.env = env
	r.worker, err = s.startProcess(ctx, "worker-routed-"+sc.name, s.bins.Worker, env, metrics+"/healthz")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*devstack.Process{r.worker, r.simA, r.simB} {
				t.Logf("--- last 20 lines of %s ---\n%s", p.LogPath(), p.Tail(20))
			}
		}
	})
	return r
}

func mergeMaps(base, over map[string]string) map[string]string {
	for k, v := range over {
		base[k] = v
	}
	return base
}

// start starts trs on the routed worker's queue; pinned restricts them to those providers.
func (r *routed) start(ctx context.Context, sc *scenario, trs []*taskRun, pinned ...string) {
	sc.t.Helper()
	if sc.started.IsZero() {
		sc.started = time.Now()
	}
	errs := parallel(len(trs), 8, func(i int) error {
		in := r.s.input(trs[i].taskSpec)
		in.Providers = pinned
		_, err := captchaflow.Start(ctx, r.s.c, trs[i].ID, in, captchaflow.StartOptions{TaskQueue: r.queue})
		return err
	})
	for _, err := range errs {
		require.NoError(sc.t, err, "starting the workflows")
	}
}

// tasks are a simulator's tasks of the scenario, by workflow.
func (r *routed) tasks(t *testing.T, ctx context.Context, base string, sc *scenario) map[string][]sim.Task {
	t.Helper()
	list, err := simTasksAt(ctx, base, callbackPathPrefix+sc.prefix)
	require.NoError(t, err)
	out := map[string][]sim.Task{}
	for _, pt := range list {
		id := strings.TrimPrefix(pt.PingbackPath, callbackPathPrefix)
		out[id] = append(out[id], pt)
	}
	return out
}

// routedFigures are what verifyRouted found.
type routedFigures struct {
	figures
	ByProvider map[string]int
	Abandoned  int // submissions given up at an unreachable provider (each may have been paid)
	LostAnswer int // submissions whose answer was lost and whose callback never came (the one-provider rule)
	ExtraPaid  int // provider tasks beyond one per task, the abandoned ones among them
	Actions    []billing.Actions
}

// verifyRouted checks every task of sc: its result names the provider whose task it came from, with that task's
// code; exactly one signed delivery; at b (whose tasks outlive the test) one paid task per workflow at most, and
// nothing at b for a task answered by a. seenA are a's tasks as last seen (a may be dead by now).
func (r *routed) verifyRouted(ctx context.Context, sc *scenario, seenA map[string][]sim.Task) routedFigures {
	t := sc.t
	t.Helper()
	atB := r.tasks(t, ctx, r.urlB, sc)
	f := routedFigures{figures: figures{Scenario: sc.name, Tasks: len(sc.tasks), Temporal: "dev server"}, ByProvider: map[string]int{}}
	for _, tr := range sc.tasks {
		res := tr.Result
		if !assert.NoError(t, tr.Err, tr.ID) {
			continue
		}
		f.ByProvider[res.Provider]++
		assert.Equal(t, sim.CodeFor(res.ProviderTaskID), res.Code, "%s: the code of the task the result names", tr.ID)
		assert.LessOrEqual(t, len(atB[tr.ID]), 1, "%s: b was paid more than once", tr.ID)
		switch res.Provider {
		case providerA:
			assert.Empty(t, atB[tr.ID], "%s: answered by a, yet submitted to b", tr.ID)
		case providerB:
			if assert.Len(t, atB[tr.ID], 1, tr.ID) {
				assert.Equal(t, atB[tr.ID][0].ID, res.ProviderTaskID, tr.ID)
			}
		default:
			t.Errorf("%s: provider %q in the result", tr.ID, res.Provider)
		}
		st, err := r.s.status(ctx, tr.ID)
		require.NoError(t, err)
		paid := len(atB[tr.ID])
		for _, sub := range st.Submissions {
			switch sub.State {
			case "abandoned":
				f.Abandoned++
			case "answer_lost":
				f.LostAnswer++
			}
			if sub.Provider == providerA && sub.ProviderTaskID != "" {
				paid++
			}
		}
		paid = max(paid, len(seenA[tr.ID])+len(atB[tr.ID]))
		f.ExtraPaid += paid - 1
		f.Submissions += paid
		r.countPath(ctx, sc, tr, &f)
		if d, ok := r.s.down.Delivery(tr.ID); assert.True(t, ok, "%s: nothing delivered", tr.ID) {
			assert.Equal(t, res.Code, d.Payload.Code, tr.ID)
			assert.Equal(t, 1, d.Count, "%s: deliveries", tr.ID)
			f.Delivered++
		}
	}
	f.WallSeconds = sc.ended.Sub(sc.started).Seconds()
	return f
}

// countPath counts the result's path, and the billable actions of a task answered by callback on its first
// submission, accepted at once and never polled.
func (r *routed) countPath(ctx context.Context, sc *scenario, tr *taskRun, f *routedFigures) {
	switch tr.Result.Via {
	case captchaflow.ViaPoll:
		f.ViaPoll++
		return
	case captchaflow.ViaCallback:
		f.ViaCallback++
	}
	if tr.Result.Submits != 1 || tr.Result.Via != captchaflow.ViaCallback {
		return
	}
	h, err := r.s.history(ctx, tr.ID)
	require.NoError(sc.t, err)
	if activitiesScheduled(h, "Poll") > 0 || activityAttempts(h)["Submit"] > 1 || activitiesScheduled(h, "Submit") > 1 {
		// Polled before its callback came, refused busy first, or pinned to a provider whose circuit then turned it
		// away (moved: a second pin and Submit, nothing paid): not the path the baseline measures.
		return
	}
	f.Actions = append(f.Actions, billing.Count(h.GetEvents()))
}

func (f routedFigures) actions() (mean float64, most int) {
	for _, a := range f.Actions {
		mean += float64(a.Total)
		most = max(most, a.Total)
	}
	return mean / math.Max(1, float64(len(f.Actions))), most
}

// defaultPathActions are the most billable actions of a task answered by callback on the one-provider worker (no
// PROVIDERS_FILE), with the same input: what routing must not add to.
func defaultPathActions(t *testing.T, s *stack) int {
	t.Helper()
	baselineOnce.Do(func() { baselineActions = measureDefaultPath(t, s) })
	return baselineActions
}

var (
	baselineOnce    sync.Once
	baselineActions int
)

func measureDefaultPath(t *testing.T, s *stack) int {
	ctx := context.Background()
	sc := newScenario(t, s, "routed-baseline")
	sc.add(3, taskSpec{Kind: "one provider, callback path", Via: captchaflow.ViaCallback})
	sc.start(ctx)
	sc.await(ctx, time.Minute)
	most := 0
	for _, tr := range sc.tasks {
		h, err := s.history(ctx, tr.ID)
		require.NoError(t, err)
		most = max(most, billing.Count(h.GetEvents()).Total)
	}
	return most
}

// record notes the figures and checks the callback path's cost against the one-provider worker's (baseline).
func (f routedFigures) record(sc *scenario, baseline int) {
	mean, most := f.actions()
	sc.note("by provider %v; via callback %d, via poll %d; paid provider tasks %d, extra %d (submissions abandoned at an "+
		"unreachable provider: %d, answers lost: %d); billable actions on the callback path: mean %.2f, max %d over %d tasks; wall %.1f s",
		f.ByProvider, f.ViaCallback, f.ViaPoll, f.Submissions, f.ExtraPaid, f.Abandoned, f.LostAnswer, mean, most, len(f.Actions), f.WallSeconds)
	assert.LessOrEqual(sc.t, f.ExtraPaid, f.Abandoned+f.LostAnswer, "extra paid submissions beyond the documented give-up")
	if len(f.Actions) > 0 {
		sc.note("a callback-path task's billable actions: %+v; one-provider worker, same input: %d", f.Actions[0], baseline)
		assert.LessOrEqual(sc.t, most, baseline, "billable actions of a task answered by callback grew with routing")
	}
	f.Notes = sc.notes
	recordFigures(sc.t, f.figures)
}

// TestE2E_Routing_ProviderKilledMidBatch (#17): 200 tasks go to a (in.php); a's simulator is SIGKILLed mid-batch.
// Tasks a had solved and called back are delivered from a; every other task completes on b (createTask), 0 lost;
// a task's submission open at a is given up after PROVIDER_GIVE_UP and submitted to b (the documented extra cost);
// tasks pinned to a wait for it and complete there once it is back. The same batch on b alone is the baseline.
func TestE2E_Routing_ProviderKilledMidBatch(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	const n = 200
	sc := newScenario(t, s, "routed-a-killed")
	// a's solves spread over 3 s, so some are done and called back at the kill and many are not.
	r := startRouted(t, s, sc, map[string]string{"SIM_SOLVE_MIN": "300ms", "SIM_SOLVE_MAX": "3300ms"})
	batch := sc.add(n, taskSpec{Kind: "a killed mid-batch"})
	pinned := sc.add(1, taskSpec{Kind: "pinned to a while it is down"})
	seenA := r.killAMidBatch(ctx, sc, batch, pinned)

	sc.tasks = batch
	sc.await(ctx, 2*time.Minute)
	lastOfBatch := sc.ended
	for _, tr := range pinned {
		assert.Empty(t, r.tasks(t, ctx, r.urlB, sc)[tr.ID], "%s: pinned to a, sent to b", tr.ID)
		desc, err := s.c.DescribeWorkflow(ctx, tr.ID, "")
		require.NoError(t, err)
		assert.Nil(t, desc.RawResponse.GetWorkflowExecutionInfo().GetCloseTime(), "%s: pinned to a dead provider, yet done", tr.ID)
	}
	require.NoError(t, restart(ctx, r.simA, r.urlA+"/healthz"))
	back := time.Now()
	fb := r.bAlone(t, n) // while the pinned task waits for a's circuit to half-open

	sc.tasks = append(batch, pinned...)
	sc.awaitAll(ctx, 2*time.Minute)
	f := r.verifyRouted(ctx, sc, seenA)
	for id := range calledBack(seenA) {
		assert.Equal(t, providerA, sc.byID[id].Result.Provider, "%s: solved and called back at a before the kill", id)
	}
	for _, tr := range pinned {
		assert.Equal(t, providerA, tr.Result.Provider, tr.ID)
		assert.True(t, tr.Result.ReceivedAt.After(back), "%s: answered before a was back", tr.ID)
	}
	f.WallSeconds = lastOfBatch.Sub(sc.started).Seconds()
	for _, tr := range pinned {
		sc.note("pinned task answered %s after a came back (a back %s after the batch started; its circuit half-opens 30 s after opening)",
			tr.Result.ReceivedAt.Sub(back).Round(time.Millisecond), back.Sub(sc.started).Round(time.Millisecond))
	}
	sc.note("time to the last result of the batch: %.1f s with a killed vs %.1f s on b alone", f.WallSeconds, fb.WallSeconds)
	f.record(sc, defaultPathActions(t, s))
}

// killAMidBatch starts trs and SIGKILLs a's simulator once a third of them are at a and some called back, then
// starts pinned (restricted to a); it returns a's tasks as last seen.
func (r *routed) killAMidBatch(ctx context.Context, sc *scenario, trs, pinned []*taskRun) map[string][]sim.Task {
	t := sc.t
	started := make(chan struct{})
	go func() { defer close(started); r.start(ctx, sc, trs) }()
	var seenA map[string][]sim.Task
	eventually(t, "a third of the batch submitted to a, some called back", time.Minute, 20*time.Millisecond, func() string {
		seenA = r.tasks(t, ctx, r.urlA, sc)
		if called := calledBack(seenA); len(seenA) < len(trs)/3 || len(called) == 0 {
			return fmt.Sprintf("%d at a, %d called back", len(seenA), len(called))
		}
		return ""
	})
	r.simA.Kill()
	killed := time.Now()
	r.start(ctx, sc, pinned, providerA)
	<-started
	sc.note("a SIGKILLed %s into the batch with %d of %d tasks submitted to it, %d called back",
		killed.Sub(sc.started).Round(time.Millisecond), len(seenA), len(trs), len(calledBack(seenA)))
	return seenA
}

// bAlone runs n tasks pinned to b: the baseline of the batch's time to its last result.
func (r *routed) bAlone(t *testing.T, n int) routedFigures {
	ctx := context.Background()
	sc := newScenario(t, r.s, "routed-b-alone")
	sc.add(n, taskSpec{Kind: "on b alone"})
	r.start(ctx, sc, sc.tasks, providerB)
	sc.await(ctx, 2*time.Minute)
	f := r.verifyRouted(ctx, sc, nil)
	assert.Equal(t, n, f.ByProvider[providerB])
	assert.Zero(t, f.ExtraPaid)
	f.record(sc, defaultPathActions(t, r.s))
	return f
}

// calledBack are the tasks of m whose pingback a answered 200: their results reached the workflow.
func calledBack(m map[string][]sim.Task) map[string]bool {
	out := map[string]bool{}
	for id, pts := range m {
		for _, pt := range pts {
			if slices.ContainsFunc(pt.Pingbacks, func(p sim.PingbackAttempt) bool { return p.HTTPStatus == 200 }) {
				out[id] = true
			}
		}
	}
	return out
}

// TestE2E_Routing_ZeroBalance (#17): a answers ERROR_ZERO_BALANCE; new submissions go to b in the same Submit
// attempt, well within one pacing interval (the wait a one-provider task would take before asking a again).
func TestE2E_Routing_ZeroBalance(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "routed-zero-balance")
	r := startRouted(t, s, sc, nil)
	require.NoError(t, simDoAt(ctx, r.urlA, "PUT", "/_sim/balance", `{"balance":0}`, 200))
	trs := sc.add(20, taskSpec{Kind: "a at zero balance"})
	r.start(ctx, sc, trs)
	sc.await(ctx, time.Minute)
	f := r.verifyRouted(ctx, sc, nil)
	assert.Equal(t, len(trs), f.ByProvider[providerB])
	assert.Empty(t, r.tasks(t, ctx, r.urlA, sc), "a created no task")
	pacing := callback.RetryAfter("ERROR_ZERO_BALANCE")
	var slowest time.Duration
	for _, tr := range trs {
		h, err := s.history(ctx, tr.ID)
		require.NoError(t, err)
		slowest = max(slowest, tr.Result.SubmittedAt.Sub(workflowStartedAt(h)))
	}
	sc.note("a at zero balance: every task submitted to b at most %s after it started (pacing interval %s)",
		slowest.Round(time.Millisecond), pacing)
	assert.Less(t, slowest, pacing*8/10, "on b within one pacing interval (less its jitter)")
	assert.Zero(t, f.ExtraPaid)
	f.record(sc, defaultPathActions(t, s))
}

// TestE2E_Routing_NoSlotOverflow (#17): a has 3 threads, each held 12 s; the other tasks are refused
// ERROR_NO_SLOT_AVAILABLE. Once a has answered no-slot for PROVIDER_NO_SLOT_BUDGET its circuit opens and the overflow
// goes to b, while a's own tasks (polled meanwhile: a poll's answer does not end the no-slot run) finish at a.
func TestE2E_Routing_NoSlotOverflow(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "routed-no-slot")
	const threads = 3
	r := startRouted(t, s, sc, map[string]string{"SIM_THREADS": fmt.Sprint(threads), "SIM_SOLVE_MIN": "12s", "SIM_SOLVE_MAX": "12s"})
	trs := sc.add(15, taskSpec{Kind: "a out of threads"})
	r.start(ctx, sc, trs)
	sc.await(ctx, time.Minute)
	f := r.verifyRouted(ctx, sc, nil)
	atA, atB := r.tasks(t, ctx, r.urlA, sc), r.tasks(t, ctx, r.urlB, sc)
	assert.Len(t, atA, threads, "a took as many tasks as it has threads")
	assert.Equal(t, threads, f.ByProvider[providerA])
	assert.Equal(t, len(trs)-threads, f.ByProvider[providerB], "the overflow went to b")
	first := time.Time{}
	for _, pts := range atB {
		if first.IsZero() || pts[0].SubmittedAt.Before(first) {
			first = pts[0].SubmittedAt
		}
	}
	wait := first.Sub(sc.started)
	sc.note("a at no-slot: first overflow submission to b %s after the batch started (budget %s, no-slot pacing %s)",
		wait.Round(time.Millisecond), routedNoSlotBudget, callback.RetryAfter("ERROR_NO_SLOT_AVAILABLE"))
	assert.GreaterOrEqual(t, wait, routedNoSlotBudget, "b before a's no-slot budget was spent")
	assert.Less(t, wait, routedNoSlotBudget+2*callback.RetryAfter("ERROR_NO_SLOT_AVAILABLE"), "overflow to b too late")
	assert.Zero(t, f.ExtraPaid)
	f.record(sc, defaultPathActions(t, s))
}
