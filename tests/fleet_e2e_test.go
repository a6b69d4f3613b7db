package tests

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"

	"github.com/captchaflow/captchaflow/providers"

	"github.com/captchaflow/captchaflow/activities"
	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
)

// The fleet scenarios (issue 31): several worker processes on one provider account, which holds them to its
// documented limits (the simulator's account limits). Their sizes come from the environment, small by default for
// CI; the figures use E2E_FLEET_TASKS=600 and E2E_FLEET_OUTAGE_TASKS=600 E2E_FLEET_OUTAGE_SOLVE=40s.
const (
	envFleetTasks        = "E2E_FLEET_TASKS"        // burst: tasks started at once (default 150)
	envFleetSolve        = "E2E_FLEET_SOLVE"        // burst: the solve time (default 5s)
	envFleetDeadline     = "E2E_FLEET_DEADLINE"     // burst: each task's deadline (default 120s)
	envFleetOutageTasks  = "E2E_FLEET_OUTAGE_TASKS" // outage: tasks started at once (default 150)
	envFleetOutageSolve  = "E2E_FLEET_OUTAGE_SOLVE" // outage: the solve time (default 25s)
	envFleetResultBudget = "E2E_FLEET_RESULT_RATE"  // outage: the account's res.php budget per second (default 50)
	envFleetStrict       = "E2E_FLEET_STRICT"       // burst: 1 = requests refused during a bar count towards the window

	// 2captcha's in.php rule: more than 60 requests within 3 s answer MAX_USER_TURN and bar the account for 10 s.
	fleetSubmitLimit  = 60
	fleetSubmitWindow = 3 * time.Second
	fleetSubmitBan    = 10 * time.Second
	fleetWorkers      = 2
)

// fleetSubmitsPerSecond is 2captcha's documented pace: a worker on 2captcha's hosts takes it by default, one on the
// simulator's loopback address is told it (CAPTCHAAI_SUBMITS_PER_SECOND), as a 2captcha account it stands for.
var fleetSubmitsPerSecond = providers.InPHPRates.Submits

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	require.Positive(t, d, name)
	return d
}

// fleet is one provider account (a simulator process with its limits) and several worker processes on a task
// queue of their own, configured by CAPTCHAAI_* only, as a new user would. They share the stack's Temporal,
// ingress (through the callback proxy) and webhook receiver.
type fleet struct {
	s       *stack
	queue   string
	simURL  string
	sim     *devstack.Process
	workers []*devstack.Process
	metrics []string // each worker's metrics address
}

// startFleet starts the simulator (simEnv plus simExtra) and n workers (workerEnvOn plus workerExtra); everything
// stops when the test ends.
func startFleet(t *testing.T, s *stack, sc *scenario, n int, simExtra, workerExtra map[string]string) *fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ports := make([]int, 1+n)
	for i := range ports {
		var err error
		ports[i], err = devstack.FreePort()
		require.NoError(t, err)
	}
	f := &fleet{s: s, queue: "fleet-" + sc.prefix, simURL: "http://" + loopback(ports[0])}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append([]*devstack.Process{f.sim}, f.workers...) {
				if p != nil {
					t.Logf("--- last 20 lines of %s ---\n%s", p.LogPath(), p.Tail(20))
				}
			}
		}
		for _, p := range append(f.workers, f.sim) {
			if p != nil {
				_ = p.Stop()
			}
		}
	})
	var err error
	f.sim, err = s.startProcess(ctx, "sim-"+sc.name, s.bins.Simulator, mergeMaps(simEnv(ports[0], 7_000), simExtra), f.simURL+"/healthz")
	require.NoError(t, err)
	for i := range n {
		env := s.workerEnvOn(f.queue)
		env["CAPTCHAAI_BASE_URL"] = f.simURL
		env["CAPTCHAAI_SUBMITS_PER_SECOND"] = strconv.FormatFloat(fleetSubmitsPerSecond, 'g', -1, 64)
		env["WORKER_METRICS_ADDR"] = loopback(ports[1+i])
		w, err := s.startProcess(ctx, fmt.Sprintf("worker-%s-%d", sc.name, i+1), s.bins.Worker, mergeMaps(env, workerExtra),
			"http://"+loopback(ports[1+i])+"/healthz")
		if w != nil {
			f.workers, f.metrics = append(f.workers, w), append(f.metrics, loopback(ports[1+i]))
		}
		require.NoError(t, err)
	}
	return f
}

// startAll starts every task of trs at once (as many Start calls in flight as the client allows) with input.
func (f *fleet) startAll(ctx context.Context, sc *scenario, trs []*taskRun, input func(*taskRun) captchaflow.Input) {
	sc.t.Helper()
	sc.started = time.Now()
	errs := parallel(len(trs), 64, func(i int) error {
		_, err := captchaflow.Start(ctx, f.s.c, trs[i].ID, input(trs[i]), captchaflow.StartOptions{TaskQueue: f.queue})
		return err
	})
	for _, err := range errs {
		require.NoError(sc.t, err, "starting the workflows")
	}
}

// fleetFigures is what a fleet scenario measured.
type fleetFigures struct {
	solved, failed, paidTwice, delivered int
	failures                             map[string]int // by failure type
	stats                                sim.Stats
	tasks                                []sim.Task // the provider's tasks of the scenario
}

// check reads the outcome of every task and the account's counters: each solved task has its provider task's code
// and was delivered once; a workflow the provider saw more than one submission for paid twice.
func (f *fleet) check(ctx context.Context, sc *scenario) fleetFigures {
	t := sc.t
	t.Helper()
	ff := fleetFigures{failures: map[string]int{}}
	tasks, err := simTasksAt(ctx, f.simURL, callbackPathPrefix+sc.prefix)
	require.NoError(t, err)
	byWorkflow, methods := map[string]int{}, map[string]string{}
	for _, pt := range tasks {
		byWorkflow[strings.TrimPrefix(pt.PingbackPath, callbackPathPrefix)]++
		methods[pt.ID] = pt.Method
	}
	for id, n := range byWorkflow {
		assert.Contains(t, sc.byID, id, "the provider saw a submission for a workflow this scenario did not start")
		if n > 1 {
			ff.paidTwice++
		}
	}
	for _, tr := range sc.tasks {
		if tr.Err != nil {
			ff.failed++
			ff.failures[cmp.Or(failureType(tr.Err), tr.Err.Error())]++
			continue
		}
		ff.solved++
		assert.Equal(t, sim.AnswerFor(tr.Result.ProviderTaskID, methods[tr.Result.ProviderTaskID]), tr.Result.Code, "%s: wrong code", tr.ID)
		if d, ok := f.s.down.Delivery(tr.ID); ok {
			ff.delivered++
			assert.Equal(t, 1, d.Count, "%s: deliveries", tr.ID)
		}
	}
	ff.stats, err = simStatsAt(ctx, f.simURL)
	require.NoError(t, err)
	ff.tasks = tasks
	return ff
}

// record writes the scenario's figures (tests/out) with its notes.
func (sc *scenario) record(ff fleetFigures) {
	fig := figures{Scenario: sc.name, Tasks: len(sc.tasks), Temporal: "dev server", Delivered: ff.delivered,
		Submissions: int(ff.stats.Submissions.Accepted), WallSeconds: sc.ended.Sub(sc.started).Seconds(), Notes: sc.notes}
	if sc.s.external() {
		fig.Temporal = "external " + sc.s.temporalAddr
	}
	for _, tr := range sc.tasks {
		switch tr.Result.Via {
		case captchaflow.ViaCallback:
			fig.ViaCallback++
		case captchaflow.ViaPoll:
			fig.ViaPoll++
		}
	}
	fig.PingbacksSent, fig.PingbacksFailed = int(ff.stats.Pingbacks.Sent), int(ff.stats.Pingbacks.Failed+ff.stats.Pingbacks.Dropped)
	recordFigures(sc.t, fig)
}

// TestE2E_FleetBurst: two workers, one 2captcha-style account with its in.php rule (60 within 3 s, then barred for
// 10 s), N tasks started at once through the Go client, callbacks working, 5 s solves, PROVIDER_THREADS unset and
// the account's documented pace (providers.InPHPRates, 2captcha's hosts' default). Every task is solved, none paid twice,
// the account never sees more than 60 in.php requests within 3 s and refuses at most a few; the batch takes about
// N ÷ the default pace plus the solve.
func TestE2E_FleetBurst(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	n := envInt(t, envFleetTasks, 150)
	solve := envDuration(t, envFleetSolve, 5*time.Second)
	deadline := envDuration(t, envFleetDeadline, 120*time.Second)
	sc := newScenario(t, s, "fleet-burst")
	f := startFleet(t, s, sc, fleetWorkers, map[string]string{
		"SIM_SOLVE_MIN": solve.String(), "SIM_SOLVE_MAX": solve.String(),
		"SIM_SUBMIT_LIMIT": strconv.Itoa(fleetSubmitLimit), "SIM_SUBMIT_WINDOW": fleetSubmitWindow.String(),
		"SIM_SUBMIT_BAN": fleetSubmitBan.String(), "SIM_SUBMIT_COUNT_BARRED": strconv.FormatBool(os.Getenv(envFleetStrict) == "1"),
	}, nil)
	trs := sc.add(n, taskSpec{Kind: "burst"})
	f.startAll(ctx, sc, trs, func(tr *taskRun) captchaflow.Input {
		in := s.input(tr.taskSpec)
		in.CallbackTimeoutSeconds = 60 // callbacks work: the pingback carries every result
		in.DeadlineSeconds = int(deadline.Seconds())
		return in
	})
	sc.awaitOutcomes(ctx, deadline+time.Minute)
	ff := f.check(ctx, sc)

	lim := ff.stats.Limits
	wall := sc.ended.Sub(sc.started)
	ideal := time.Duration(float64(n)/fleetSubmitsPerSecond*float64(time.Second)) + solve
	sc.note("fleet burst: %d workers, %d tasks at once, %s solves, in.php rule %d within %s (bar %s)",
		fleetWorkers, n, solve, fleetSubmitLimit, fleetSubmitWindow, fleetSubmitBan)
	sc.note("fleet burst: solved %d of %d (failed %v), paid twice %d; wall %.1f s against the ideal %.1f s (%d ÷ %g/s + %s); %.1f tasks/s",
		ff.solved, n, ff.failures, ff.paidTwice, wall.Seconds(), ideal.Seconds(), n, fleetSubmitsPerSecond, solve,
		float64(ff.solved)/wall.Seconds())
	sc.note("fleet burst: in.php requests %d, refused %d (MAX_USER_TURN; bars %d), at most %d within %s; res.php get requests %d",
		lim.SubmitRequests, lim.SubmitRefused, lim.Bans, lim.PeakSubmitsInWindow, fleetSubmitWindow, lim.ResultRequests)
	sc.record(ff)

	assert.Equal(t, n, ff.solved, "every task solved: failures %v", ff.failures)
	assert.Zero(t, ff.paidTwice, "paid twice")
	assert.LessOrEqual(t, lim.PeakSubmitsInWindow, fleetSubmitLimit, "in.php requests within any %s", fleetSubmitWindow)
	assert.LessOrEqual(t, lim.SubmitRefused, int64(3), "refusals: a rate refusal slows the fleet, it is not renewed by it")
	assert.Less(t, wall, 2*ideal+10*time.Second, "wall time against the ideal %s", ideal)
}

// TestE2E_FleetCallbackOutage: two workers, every callback dropped, long solves (the 40 s; 25 s by
// default), and the account's res.php budget on (50 a second); a quarter of the tasks are FunCaptcha, whose tokens
// hold res.php's batch separator. Every task is solved by polling, within the budget: no refusal, and few res.php
// requests per task (today's polls cost 6.8 a task at 40 s).
func TestE2E_FleetCallbackOutage(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	n := envInt(t, envFleetOutageTasks, 150)
	solve := envDuration(t, envFleetOutageSolve, 25*time.Second)
	budget := envInt(t, envFleetResultBudget, 50)
	sc := newScenario(t, s, "fleet-outage")
	f := startFleet(t, s, sc, fleetWorkers, map[string]string{
		"SIM_SOLVE_MIN": solve.String(), "SIM_SOLVE_MAX": solve.String(), "SIM_DROP_RATE": "1",
		"SIM_RESULT_RATE": strconv.Itoa(budget),
	}, map[string]string{
		// Half the budget: the server lets a burst of ⌈rate⌉ through besides a second's refill, so one second can see
		// twice the rate.
		"CAPTCHAAI_RESULTS_PER_SECOND": strconv.Itoa(budget / 2),
	})
	trs := sc.add(n, taskSpec{Kind: "callback outage", Via: captchaflow.ViaPoll})
	funCaptcha := map[*taskRun]bool{}
	for i := 0; i < n; i += 4 {
		funCaptcha[trs[i]] = true
	}
	deadline := solve + 2*time.Minute
	f.startAll(ctx, sc, trs, func(tr *taskRun) captchaflow.Input {
		in := s.input(tr.taskSpec)
		if funCaptcha[tr] {
			in.Method, in.Params = "funcaptcha", captchaflow.Params{"publickey": "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC", "pageurl": in.Params["pageurl"]}
		}
		in.CallbackTimeoutSeconds = 10 // then polling every 5 s, the product's default
		in.PollIntervalSeconds = 5
		in.DeadlineSeconds = int(deadline.Seconds())
		return in
	})
	sc.awaitOutcomes(ctx, deadline+time.Minute)
	ff := f.check(ctx, sc)

	lim := ff.stats.Limits
	perTask, funPolls := float64(lim.ResultRequests)/float64(n), int64(0)
	for _, pt := range ff.tasks {
		if pt.Method == "funcaptcha" { // never batched: each of its lookups is a request of its own
			funPolls += pt.ResGetCount
		}
	}
	perBare := float64(lim.ResultRequests-funPolls) / float64(n-len(funCaptcha))
	sc.note("fleet outage: %d workers, %d tasks at once (%d FunCaptcha), %s solves, every callback dropped, res.php budget %d/s (workers paced at %d/s)",
		fleetWorkers, n, len(funCaptcha), solve, budget, budget/2)
	sc.note("fleet outage: solved %d of %d (failed %v), paid twice %d; wall %.1f s",
		ff.solved, n, ff.failures, ff.paidTwice, sc.ended.Sub(sc.started).Seconds())
	sc.note("fleet outage: res.php get requests %d (%.2f per task; FunCaptcha's %d, %.2f per FunCaptcha task; the rest %.2f per task), refused %d (ERROR_TOO_MUCH_REQUESTS), at most %d within a second; in.php requests %d",
		lim.ResultRequests, perTask, funPolls, float64(funPolls)/float64(len(funCaptcha)), perBare, lim.ResultRefused, lim.PeakResultsPerSecond, lim.SubmitRequests)
	sc.record(ff)

	assert.Equal(t, n, ff.solved, "every task solved: failures %v", ff.failures)
	assert.Zero(t, ff.paidTwice, "paid twice")
	assert.Zero(t, lim.ResultRefused, "res.php refusals")
	assert.LessOrEqual(t, perTask, 2.0, "res.php requests per task")
	assert.LessOrEqual(t, perBare, 1.5, "res.php requests per batchable task, FunCaptcha's polls beside them")
}

// TestE2E_FleetPauseHeals: an account that allows far less than the pace (10 in.php requests within 3 s) refuses the
// fleet; each refusal pauses the account's queue for every worker, and the worker that kept running brings the
// pace back after one of the two is killed mid-pause. Every task is solved, none paid twice or failed for it, the
// refusals are counted, and once the account is quiet the queue's keeper has cleared its limit (the pollers' configured rate again).
func TestE2E_FleetPauseHeals(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	const n, limit = 40, 10
	sc := newScenario(t, s, "fleet-heal")
	f := startFleet(t, s, sc, fleetWorkers, map[string]string{"SIM_SOLVE_MIN": "1s", "SIM_SOLVE_MAX": "1s",
		"SIM_SUBMIT_LIMIT": strconv.Itoa(limit), "SIM_SUBMIT_WINDOW": fleetSubmitWindow.String(), "SIM_SUBMIT_BAN": "5s"}, nil)
	trs := sc.add(n, taskSpec{Kind: "paused"})
	f.startAll(ctx, sc, trs, func(tr *taskRun) captchaflow.Input {
		in := s.input(tr.taskSpec)
		in.DeadlineSeconds = 240
		return in
	})
	eventually(t, "the account's first bar", time.Minute, 100*time.Millisecond, func() string {
		if st, err := simStatsAt(ctx, f.simURL); err != nil || st.Limits.Bans == 0 {
			return fmt.Sprint("no bar yet ", err)
		}
		return ""
	})
	f.workers[0].Kill() // mid-pause: the survivor must bring the pace back
	sc.note("worker 1 killed after the first bar")
	sc.awaitOutcomes(ctx, 5*time.Minute)
	ff := f.check(ctx, sc)
	lim := ff.stats.Limits
	refusals := scrapeSum(ctx, t, "http://"+f.metrics[1]+"/metrics", activities.MetricRateRefusals)
	sc.note("fleet heal: solved %d of %d (failed %v), paid twice %d; in.php requests %d, refused %d, bars %d; the survivor counted %v refusals; wall %.1f s",
		ff.solved, n, ff.failures, ff.paidTwice, lim.SubmitRequests, lim.SubmitRefused, lim.Bans, refusals, sc.ended.Sub(sc.started).Seconds())
	sc.record(ff)
	assert.Equal(t, n, ff.solved, "every task solved: failures %v", ff.failures)
	assert.Zero(t, ff.paidTwice, "paid twice")
	assert.Positive(t, lim.SubmitRefused, "the account refused the fleet")
	assert.Positive(t, refusals, "refusals counted in %s", activities.MetricRateRefusals)
	queue := activities.ProviderQueue(f.queue, "", activities.SubmitQueue)
	eventually(t, "the submit queue back at its configured rate", time.Minute, 500*time.Millisecond, func() string {
		if got, err := queueLimit(ctx, s, queue); err != nil || got != "none" { // the pollers' configured rate again
			return fmt.Sprint(queue, " at ", got, err)
		}
		return ""
	})
}

// TestE2E_FleetPacesWhatRefuses: an account with no configured rate (a provider that documents none) is paced from its
// first refusal on by its queue's keeper, which clears its limit once the account is quiet; an operator's limit set
// on the queue before the burst stays theirs through every refusal. Every task is solved, none paid twice.
func TestE2E_FleetPacesWhatRefuses(t *testing.T) {
	s := requireStack(t)
	for _, operator := range []bool{false, true} {
		t.Run(map[bool]string{false: "unconfigured", true: "operator"}[operator], func(t *testing.T) {
			ctx := context.Background()
			const n, operatorRate = 40, 5
			sc := newScenario(t, s, "fleet-learn-"+strconv.FormatBool(operator))
			f := startFleet(t, s, sc, fleetWorkers, map[string]string{"SIM_SOLVE_MIN": "1s", "SIM_SOLVE_MAX": "1s",
				"SIM_SUBMIT_LIMIT": "10", "SIM_SUBMIT_WINDOW": fleetSubmitWindow.String(), "SIM_SUBMIT_BAN": "5s"},
				map[string]string{"CAPTCHAAI_SUBMITS_PER_SECOND": "0"})
			queue := activities.ProviderQueue(f.queue, "", activities.SubmitQueue)
			if operator {
				_, err := s.c.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{Namespace: s.namespace,
					TaskQueue: queue, TaskQueueType: enums.TASK_QUEUE_TYPE_ACTIVITY, UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
						RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: operatorRate}, Reason: "incident 42"}})
				require.NoError(t, err)
			}
			f.startAll(ctx, sc, sc.add(n, taskSpec{Kind: "paused"}), func(tr *taskRun) captchaflow.Input {
				in := s.input(tr.taskSpec)
				in.DeadlineSeconds = 240
				return in
			})
			sc.awaitOutcomes(ctx, 5*time.Minute)
			ff := f.check(ctx, sc)
			sc.note("fleet learn (operator %v): solved %d of %d (failed %v), paid twice %d; in.php requests %d, refused %d",
				operator, ff.solved, n, ff.failures, ff.paidTwice, ff.stats.Limits.SubmitRequests, ff.stats.Limits.SubmitRefused)
			sc.record(ff)
			assert.Equal(t, n, ff.solved, "every task solved: failures %v", ff.failures)
			assert.Zero(t, ff.paidTwice, "paid twice")
			require.Positive(t, ff.stats.Limits.SubmitRefused, "the account refused the fleet")
			_, err := s.c.DescribeWorkflow(ctx, activities.PaceKeeperID(queue), "")
			require.NoError(t, err, "the refusals started the queue's keeper")
			want := "none" // cleared: an unconfigured account is not paced once quiet
			if operator {
				want = fmt.Sprintf("%d/s (\"incident 42\")", operatorRate)
			}
			eventually(t, "the queue's limit "+want, 2*time.Minute, 500*time.Millisecond, func() string {
				if got, err := queueLimit(ctx, s, queue); err != nil || got != want {
					return fmt.Sprint(got, err)
				}
				return ""
			})
		})
	}
}

// queueLimit is the rate limit set on queue through the API, as "rate/s (reason)", or "none".
func queueLimit(ctx context.Context, s *stack, queue string) (string, error) {
	resp, err := s.c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: s.namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enums.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enums.TASK_QUEUE_TYPE_ACTIVITY,
		ReportConfig: true})
	if limit := resp.GetConfig().GetQueueRateLimit(); err == nil && limit.GetRateLimit() != nil {
		return fmt.Sprintf("%v/s (%q)", limit.GetRateLimit().GetRequestsPerSecond(), limit.GetMetadata().GetReason()), nil
	}
	return "none", err
}

// TestE2E_FleetLanes: two workers on an account paced at 100 a second. Their submit queue's pollers ask the server
// for three quarters of it; once the workers' lanes are open, tasks that come one at a time (a load well within the
// lanes' quarter) run Submit on the fleet's own queue, each naming the lane it took room in, and are solved.
func TestE2E_FleetLanes(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "fleet-lanes")
	f := startFleet(t, s, sc, fleetWorkers, map[string]string{"SIM_SOLVE_MIN": "100ms", "SIM_SOLVE_MAX": "100ms"},
		map[string]string{"CAPTCHAAI_SUBMITS_PER_SECOND": "100"})
	queue := activities.ProviderQueue(f.queue, "", activities.SubmitQueue)
	resp, err := s.c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: s.namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enums.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enums.TASK_QUEUE_TYPE_ACTIVITY})
	require.NoError(t, err)
	require.NotEmpty(t, resp.GetPollers())
	for _, p := range resp.GetPollers() {
		assert.InDelta(t, 100*(1-activities.LaneShare), p.GetRatePerSecond(), 0.01, "%s asks the server for", p.GetIdentity())
	}
	solveNext := func() (ranOn string, req activities.SubmitRequest) { // a task alone, and where its Submit ran
		tr := sc.add(1, taskSpec{Kind: "lane"})[0]
		_, err := captchaflow.Solve(ctx, s.c, tr.ID, s.input(tr.taskSpec), captchaflow.StartOptions{TaskQueue: f.queue})
		require.NoError(t, err, tr.ID)
		h, err := s.runHistory(ctx, tr.ID, "")
		require.NoError(t, err)
		for _, ev := range h.GetEvents() {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "Submit" {
				require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &req))
				return a.GetTaskQueue().GetName(), req
			}
		}
		t.Fatalf("%s scheduled no Submit", tr.ID)
		return "", req
	}
	eventually(t, "a Submit in a worker's lane", time.Minute, 0, func() string {
		if ranOn, _ := solveNext(); ranOn != f.queue {
			return "a Submit ran on " + ranOn
		}
		return ""
	})
	for range 10 {
		ranOn, req := solveNext()
		assert.Equal(t, f.queue, ranOn, "a task alone, its worker's lane open: its Submit on the fleet's own queue")
		assert.Equal(t, queue, req.Lane, "the lane it took room in")
	}
}
