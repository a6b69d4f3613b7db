package tests

// The rolling upgrade an operator does (#21 item 2), on the real dev server and simulator: the worker and the
// ingress of the previous release (the commit previous-release names, built from a git worktree of it) carry tasks
// in every in-flight state; then each is replaced by this build. Two lanes run side by side, one per order of
// deploy, each on a task queue of its own with its own worker, ingresses and load balancer. The ingresses sit
// behind the balancer as in production: the new one is started, the balancer switched to it, the old one stopped
// with SIGTERM, so no pingback meets a closed port (a provider does not retry one). The worker is stopped with
// SIGTERM, then the new one started. Every task must end with its own provider task's code, delivered once, after
// exactly one provider submission. The processes are driven only through their environment, HTTP and Temporal, so
// the previous release's binaries take the same settings as this build's.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// previousReleaseFile names, in one line, the commit of the release a rolling upgrade starts from.
const previousReleaseFile = "previous-release"

const (
	upgradeThreads        = 8      // PROVIDER_THREADS: exactly the slot holders below, so the queued tasks wait
	upgradeLongSolveMS    = 40_000 // still solving when both components have been replaced
	upgradeWindowSolveMS  = 18_000 // pingback due after the first deploy, awaited before the second
	upgradeCallbackWait   = 60     // callback_timeout_seconds of the tasks that wait for their pingback
	upgradeLostAnswerWait = 90     // lost_answer_wait_seconds: longer than the lost submission's solve
)

// upgradeKind is one in-flight state: its tasks, what being in it means, and how many must still be in it when
// the second component is replaced.
type upgradeKind struct {
	spec     taskSpec
	n        int
	failHook bool // notify_url answers 503 until both components are replaced
	window   bool // its tasks finish between the two deploys
	stage    int  // kinds start in stages, each once the earlier ones are in their states (the window's clock last)
	atSecond int
	in       func(wfState, captchaflow.Status) bool
	tasks    []*taskRun
}

func upgradeKinds() []*upgradeKind {
	// The status query's phase: the CaptchaPhase search attribute is not upserted for every phase.
	phase := func(p captchaflow.Phase) func(wfState, captchaflow.Status) bool {
		return func(_ wfState, q captchaflow.Status) bool { return q.Phase == p }
	}
	awaiting := func(_ wfState, q captchaflow.Status) bool {
		return q.Phase == captchaflow.PhaseAwaitingCallback && q.ProviderTaskID != ""
	}
	lostAnswer := func(_ wfState, q captchaflow.Status) bool {
		return len(q.Submissions) == 1 && q.Submissions[0].State == "answer_lost"
	}
	retryingDelivery := func(st wfState, q captchaflow.Status) bool {
		return q.Phase == captchaflow.PhaseDelivering && len(st.Pending) == 1 && st.Pending[0].GetAttempt() >= 2
	}
	return []*upgradeKind{
		// Solved and delivering first: every later kind holds or waits for a slot.
		{spec: taskSpec{Kind: "retrying its delivery (notify_url 503)", CallbackTimeout: upgradeCallbackWait,
			Via: captchaflow.ViaCallback}, n: 2, failHook: true, atSecond: 2, in: retryingDelivery},
		{spec: taskSpec{Kind: "awaiting its callback", SolveMS: upgradeLongSolveMS, CallbackTimeout: upgradeCallbackWait,
			Via: captchaflow.ViaCallback}, n: 2, stage: 1, atSecond: 2, in: awaiting},
		{spec: taskSpec{Kind: "awaiting its callback, due between the deploys", SolveMS: upgradeWindowSolveMS,
			CallbackTimeout: upgradeCallbackWait, Via: captchaflow.ViaCallback}, n: 2, stage: 2, window: true, in: awaiting},
		{spec: taskSpec{Kind: "polling (pingback dropped)", Faults: sim.FaultDropPingback, SolveMS: upgradeLongSolveMS,
			Via: captchaflow.ViaPoll}, n: 2, stage: 1, atSecond: 2, in: phase(captchaflow.PhasePolling)},
		{spec: taskSpec{Kind: "in a lost-answer wait", Faults: sim.FaultSubmitLost, SolveMS: upgradeLongSolveMS,
			CallbackTimeout: upgradeCallbackWait, Via: captchaflow.ViaCallback}, n: 2, stage: 1, atSecond: 2, in: lostAnswer},
		// Queued behind the eight holders above. The slots that free before the second deploy (the window tasks', and
		// any a holder gives back early) admit some of them; the polling and waiting holders keep the rest queued.
		{spec: taskSpec{Kind: "queued for a slot", CallbackTimeout: upgradeCallbackWait, Via: captchaflow.ViaCallback},
			n: upgradeThreads, stage: 3, atSecond: 1, in: phase(captchaflow.PhaseQueued)},
	}
}

// switchProxy forwards every request to its current upstream, or answers refuse (when set) itself: the operator's
// load balancer in front of the ingresses, and a notify_url that fails for a while.
type switchProxy struct {
	srv      *httptest.Server
	upstream atomic.Pointer[url.URL]
	refuse   atomic.Int32
}

func newSwitchProxy(t *testing.T, upstream string) *switchProxy {
	p := &switchProxy{}
	p.point(upstream)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(p.upstream.Load()) }}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := int(p.refuse.Load()); status != 0 {
			http.Error(w, "failing on purpose", status)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *switchProxy) point(upstream string) {
	u, _ := url.Parse(upstream)
	p.upstream.Store(u)
}

// previousRelease builds the worker and ingress of the commit previousReleaseFile names (devstack.BuildCommit).
func previousRelease(t *testing.T, binDir string) (worker, ingress string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("rolling upgrade: git unavailable (%v): the previous release cannot be checked out", err)
	}
	raw, err := os.ReadFile(previousReleaseFile)
	require.NoError(t, err, "the previous release's commit")
	commit := strings.TrimSpace(string(raw))
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{40}$`), commit, "%s holds one 40-hex commit", previousReleaseFile)
	// The product is everything but the tooling module and the docs.
	top := git(t, "", "rev-parse", "--show-toplevel")
	if exec.Command("git", "-C", top, "diff", "--quiet", commit, "HEAD", "--", ".", ":(exclude)tests", ":(exclude)docs").Run() == nil {
		t.Logf("previous release %s has HEAD's product code: at 1.0 the previous release is this code; the whole procedure runs anyway", commit[:12])
	}
	started := time.Now()
	bins, err := devstack.BuildCommit(context.Background(), commit, binDir)
	require.NoError(t, err, "the previous release")
	t.Logf("previous release %s: worker and ingress built from a worktree in %s", commit[:12], time.Since(started).Round(time.Millisecond))
	return bins.Worker, bins.Ingress
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s:\n%s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestE2E_RollingUpgrade: lane ingress-first replaces the ingress and then the worker, lane worker-first the other
// way round; between the two deploys each waits for its window tasks' pingbacks, which thus cross the mixed pair.
func TestE2E_RollingUpgrade(t *testing.T) {
	oldWorker, oldIngress := previousRelease(t, t.TempDir())
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lanes := []*upgradeLane{
		newUpgradeLane(t, s, "ingress-first", true, oldWorker, oldIngress),
		newUpgradeLane(t, s, "worker-first", false, oldWorker, oldIngress),
	}
	require.NoError(t, s.simRules(ctx, append(lanes[0].sc.rules(), lanes[1].sc.rules()...)))
	t.Run("lanes", func(t *testing.T) {
		for _, l := range lanes {
			t.Run(l.name, func(t *testing.T) {
				t.Parallel()
				l.sc.t = t
				l.run(ctx)
			})
		}
	})
}

// upgradeLane is one rolling upgrade: a task queue, its worker, its ingress behind lb, its tasks.
type upgradeLane struct {
	s                 *stack
	sc                *scenario
	name, taskQueue   string
	ingressFirst      bool
	kinds             []*upgradeKind
	lb, hook          *switchProxy
	worker, ingress   *devstack.Process
	procs             []*devstack.Process // every process the lane started, for the cleanup
	workerMetricsPort int
	oldWorker         string
	oldIngress        string
	plain             client.Client // the previous release cannot decrypt: tasks start in plaintext
	decryptOnly       string        // the current build's keys file until every process runs it
}

// newUpgradeLane prepares a lane (its scenario resets the simulator, so every lane is made before any starts).
func newUpgradeLane(t *testing.T, s *stack, name string, ingressFirst bool, oldWorker, oldIngress string) *upgradeLane {
	sc := newScenario(t, s, "rolling-upgrade-"+name)
	l := &upgradeLane{s: s, sc: sc, name: name, taskQueue: "captcha-upgrade-" + name + "-" + s.runID,
		ingressFirst: ingressFirst, kinds: upgradeKinds(), oldWorker: oldWorker, oldIngress: oldIngress}
	for _, k := range l.kinds {
		k.tasks = sc.add(k.n, k.spec)
	}
	l.hook = newSwitchProxy(t, s.notifyURL())
	l.lb = newSwitchProxy(t, "http://127.0.0.1:1")
	var err error
	l.workerMetricsPort, err = devstack.FreePort()
	require.NoError(t, err)
	key, err := os.ReadFile(s.keysFile)
	require.NoError(t, err)
	l.decryptOnly = filepath.Join(t.TempDir(), "keys-decrypt-only")
	require.NoError(t, os.WriteFile(l.decryptOnly, append([]byte("-\n"), key...), 0o600))
	l.plain, err = client.Dial(client.Options{HostPort: s.temporalAddr, Namespace: s.namespace, Logger: devstack.QuietSDKLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { l.cleanup(t); l.plain.Close() })
	return l
}

func (l *upgradeLane) run(ctx context.Context) {
	t := l.sc.t
	l.startWorker(ctx, l.oldWorker, "previous")
	l.startIngress(ctx, l.oldIngress, "previous")
	l.hook.refuse.Store(http.StatusServiceUnavailable)
	l.sc.started = time.Now()
	var first string
	for stage := range 4 {
		for _, k := range l.kinds {
			if k.stage == stage {
				l.start(ctx, k.tasks)
			}
		}
		first = l.waitInState(ctx, fmt.Sprintf("stage %d in its states", stage), func(k *upgradeKind) int {
			if k.stage > stage {
				return 0
			}
			return k.n
		})
	}
	l.sc.note("at the first deploy, on the previous release: %s", first)

	deployedFirst := l.deploy(ctx, l.ingressFirst)
	// Their pingbacks are due within the solve time; a pair that cannot take one would leave them to the poll, later.
	windowCtx, cancelWindow := context.WithTimeout(ctx, upgradeWindowSolveMS*time.Millisecond+20*time.Second)
	defer cancelWindow()
	for _, k := range l.kinds {
		if k.window {
			for _, tr := range k.tasks {
				tr.Result, tr.Err = l.s.awaitResult(windowCtx, tr.ID)
				require.NoError(t, tr.Err, "%s (%s): not finished by its pingback through the mixed pair", tr.ID, tr.Kind)
				require.Equal(t, captchaflow.ViaCallback, tr.Result.Via, "%s (%s): the mixed pair did not take its pingback", tr.ID, tr.Kind)
			}
		}
	}
	second, others := l.inState(ctx)
	for _, k := range l.kinds {
		require.GreaterOrEqual(t, second[k], k.atSecond, "%s: tasks still %s at the second deploy (solves of %d ms "+
			"outlast both deploys unless the machine is very slow):\n%s", l.name, k.spec.Kind, upgradeLongSolveMS, others)
	}
	l.sc.note("at the second deploy: %s", l.describe(second))
	l.deploy(ctx, !l.ingressFirst)
	l.hook.refuse.Store(0)
	l.sc.awaitAll(ctx, 2*time.Minute)
	l.check(ctx, deployedFirst)
}

// deploy replaces the ingress or the worker by this build and returns when the new one serves.
func (l *upgradeLane) deploy(ctx context.Context, ingress bool) time.Time {
	began := time.Now()
	what := "worker"
	if ingress {
		what = "ingress"
		old := l.ingress
		l.startIngress(ctx, l.s.bins.Ingress, "current")
		require.NoError(l.sc.t, old.Stop(), "the previous ingress exits on SIGTERM")
	} else {
		require.NoError(l.sc.t, l.worker.Stop(), "the previous worker exits on SIGTERM")
		l.startWorker(ctx, l.s.bins.Worker, "current")
	}
	l.sc.note("%s replaced by the current build in %s", what, time.Since(began).Round(time.Millisecond))
	return time.Now()
}

func (l *upgradeLane) startWorker(ctx context.Context, bin, build string) {
	env := l.env(l.s.workerEnvOn(l.taskQueue), build)
	env["PROVIDER_THREADS"] = strconv.Itoa(upgradeThreads)
	env["CALLBACK_BASE_URL"] = l.lb.srv.URL
	env["WORKER_METRICS_ADDR"] = loopback(l.workerMetricsPort)
	p, err := l.s.startProcess(ctx, "upgrade-"+l.name+"-worker-"+build, bin, env,
		"http://"+loopback(l.workerMetricsPort)+"/healthz")
	l.worker = p
	l.procs = append(l.procs, p)
	require.NoError(l.sc.t, err, "starting the %s worker", build)
}

// env is the documented order of switching encryption on: the current build first decrypts only, so everything it
// writes the previous release still reads.
func (l *upgradeLane) env(env map[string]string, build string) map[string]string {
	env["CAPTCHAFLOW_KEYS_FILE"] = l.decryptOnly
	if build == "previous" {
		delete(env, "CAPTCHAFLOW_KEYS_FILE") // a setting it predates
	}
	return env
}

// startIngress starts an ingress on fresh ports and points the load balancer at it once it is ready.
func (l *upgradeLane) startIngress(ctx context.Context, bin, build string) {
	port, err := devstack.FreePort()
	require.NoError(l.sc.t, err)
	metricsPort, err := devstack.FreePort()
	require.NoError(l.sc.t, err)
	p, err := l.s.startProcess(ctx, "upgrade-"+l.name+"-ingress-"+build, bin,
		l.env(l.s.ingressEnv(port, metricsPort, l.s.temporalAddr, ingressSignalTimeout), build), "http://"+loopback(port)+"/readyz")
	l.ingress = p
	l.procs = append(l.procs, p)
	require.NoError(l.sc.t, err, "starting the %s ingress", build)
	l.lb.point("http://" + loopback(port))
}

// start starts trs on the lane's task queue, notify_url behind the failing hook for a kind that wants it.
func (l *upgradeLane) start(ctx context.Context, trs []*taskRun) {
	for _, tr := range trs {
		in := l.s.input(tr.taskSpec)
		in.LostAnswerWaitSeconds = upgradeLostAnswerWait
		if l.kindOf(tr).failHook {
			in.NotifyURL = l.hook.srv.URL + "/hooks/captcha"
		}
		_, err := captchaflow.Start(ctx, l.plain, tr.ID, in, captchaflow.StartOptions{TaskQueue: l.taskQueue})
		require.NoError(l.sc.t, err, tr.ID)
	}
}

func (l *upgradeLane) kindOf(tr *taskRun) *upgradeKind {
	for _, k := range l.kinds {
		for _, o := range k.tasks {
			if o == tr {
				return k
			}
		}
	}
	panic("task of no kind: " + tr.ID)
}

// inState counts, per kind, the tasks in their state now (the status query and Temporal's pending activities),
// and describes the others. The tasks are asked side by side: a loaded worker answers a query in a second or more.
func (l *upgradeLane) inState(ctx context.Context) (map[*upgradeKind]int, string) {
	trs, kinds := []*taskRun{}, []*upgradeKind{}
	for _, k := range l.kinds {
		for _, tr := range k.tasks {
			trs, kinds = append(trs, tr), append(kinds, k)
		}
	}
	in := make([]bool, len(trs))
	others := make([]string, len(trs))
	parallel(len(trs), 8, func(i int) error {
		st, err := l.s.state(ctx, trs[i].ID)
		var q captchaflow.Status
		if err == nil && st.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var v converter.EncodedValue
			if v, err = l.s.c.QueryWorkflow(qctx, trs[i].ID, "", captchaflow.StatusQuery); err == nil {
				err = v.Get(&q)
			}
			cancel()
		}
		if in[i] = err == nil && kinds[i].in(st, q); !in[i] {
			attempts := []int32{}
			for _, a := range st.Pending {
				attempts = append(attempts, a.GetAttempt())
			}
			others[i] = fmt.Sprintf("%s (%s): %s phase %q, submissions %+v, pending attempts %v, err %v",
				trs[i].ID, kinds[i].spec.Kind, st.Status, q.Phase, q.Submissions, attempts, err)
		}
		return nil
	})
	n := map[*upgradeKind]int{}
	var desc []string
	for i := range trs {
		if in[i] {
			n[kinds[i]]++
		} else {
			desc = append(desc, others[i])
		}
	}
	return n, strings.Join(desc, "\n")
}

// waitInState polls until every kind has at least want(kind) tasks in its state, at once.
func (l *upgradeLane) waitInState(ctx context.Context, what string, want func(*upgradeKind) int) string {
	var desc string
	eventually(l.sc.t, l.name+": "+what, 45*time.Second, 150*time.Millisecond, func() string {
		n, others := l.inState(ctx)
		desc = l.describe(n)
		for _, k := range l.kinds {
			if n[k] < want(k) {
				return desc + "\n" + others
			}
		}
		return ""
	})
	return desc
}

func (l *upgradeLane) describe(n map[*upgradeKind]int) string {
	var parts []string
	total := 0
	for _, k := range l.kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k.spec.Kind))
		total += n[k]
	}
	return fmt.Sprintf("%d tasks in flight: %s", total, strings.Join(parts, ", "))
}

// check holds the lane to the suite's invariants (verify: own code, one delivery, the intended submissions), then to
// exactly one paid submission per task, and replays every finished history on this build.
func (l *upgradeLane) check(ctx context.Context, deployedFirst time.Time) {
	t := l.sc.t
	window, due := 0, 0
	provider := l.sc.simTasksByWorkflow(ctx)
	for _, k := range l.kinds {
		for _, tr := range k.tasks {
			pts := provider[tr.ID]
			if !assert.Len(t, pts, 1, "%s (%s): paid submissions", tr.ID, tr.Kind) || !k.window {
				continue
			}
			due++
			if a, ok := lastAttempt(pts[0]); ok && a.At.After(deployedFirst) {
				window++
			}
		}
	}
	l.sc.note("pingbacks due between the deploys that came after the first one, through the mixed pair: %d of %d", window, due)
	f := l.sc.verify(ctx)
	assert.Equal(t, len(l.sc.tasks), f.Delivered, "delivered")
	assert.Equal(t, len(l.sc.tasks), f.Submissions, "provider submissions")
	var ids []string
	for _, k := range l.kinds {
		ids = append(ids, k.tasks[0].ID)
	}
	replayLive(t, l.s, ids...)
}

// cleanup stops the lane's processes and terminates what still runs on its task queue (its semaphore, a task a
// failed run left).
func (l *upgradeLane) cleanup(t *testing.T) {
	for _, p := range l.procs {
		if p == nil {
			continue
		}
		if t.Failed() {
			t.Logf("--- last 25 lines of %s ---\n%s", p.LogPath(), p.Tail(25))
		}
		_ = p.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := l.s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: l.s.namespace,
		Query: fmt.Sprintf("TaskQueue = %q AND ExecutionStatus = 'Running'", l.taskQueue)})
	if err != nil {
		return
	}
	for _, e := range resp.GetExecutions() {
		_ = l.s.c.TerminateWorkflow(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), "rolling upgrade test over")
	}
}
