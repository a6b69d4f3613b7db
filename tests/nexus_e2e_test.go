package tests

// Issue 39 on the dev server: a caller team's workflow in namespace shop solves tasks through the captchaflow
// Nexus endpoint, with no client of captchaflow's namespace.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/sync/errgroup"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

const callerQueue = "shop-callers"

// shopClient is a client of the caller namespace with a worker hosting SolveViaNexus, as the caller team runs it.
func shopClient(t *testing.T, s *stack) client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := s.dialAs(ctx, roleAdmin, s.namespace) // on a server that authorizes, only its admin sets up
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, devstack.SetUpNexus(ctx, admin, s.namespace, captchaflow.DefaultTaskQueue))
	shop, err := s.dialAs(ctx, roleShop, devstack.CallerNamespace) // with the codec: its results are encrypted
	require.NoError(t, err)
	t.Cleanup(shop.Close)
	w := worker.New(shop, callerQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
	w.RegisterWorkflow(reportViaNexus)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return shop
}

// reportViaNexus is a caller's workflow sending a verdict through the endpoint (the synchronous operation).
func reportViaNexus(ctx workflow.Context, req captchaflow.ReportRequest) (captchaflow.ReportResult, error) {
	c := workflow.NewNexusClient(captchaflow.NexusEndpoint, captchaflow.NexusServiceName)
	var res captchaflow.ReportResult
	err := c.ExecuteOperation(ctx, captchaflow.OperationReport, req, workflow.NexusOperationOptions{}).Get(ctx, &res)
	return res, err
}

func callThroughNexus(ctx context.Context, shop client.Client, callerID, taskID string, in captchaflow.Input) (client.WorkflowRun, error) {
	return shop.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: callerID, TaskQueue: callerQueue},
		captchaflow.NexusCallerWorkflowType, captchaflow.NexusCall{SolveRequest: captchaflow.SolveRequest{TaskID: taskID, Input: in}})
}

// TestE2E_NexusSolve: six tasks through the endpoint, each called by two caller workflows at once and by a third
// after it was solved; every caller's result is the task's own, and each task was submitted to the provider once.
func TestE2E_NexusSolve(t *testing.T) {
	s := requireStack(t)
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "nexus")
	trs := sc.add(6, taskSpec{Kind: "through nexus", SolveMS: 1500})
	wants := nexusMetrics(s, map[string]float64{"solve started": 12, "solve completed": 6, "report completed": 1,
		"report " + captchaflow.FailureVerdictConflict: 1, "finished completed": 6})
	before, err := metricsSnapshot(ctx, wants)
	require.NoError(t, err)
	started := time.Now()
	results := make([][3]captchaflow.Result, len(trs))
	var g errgroup.Group
	for i, tr := range trs {
		for k := range 2 { // two callers (a retry, a second team's workflow) with the same task ID
			g.Go(func() error {
				run, err := callThroughNexus(ctx, shop, tr.ID+"-caller-"+strconv.Itoa(k), tr.ID, s.input(tr.taskSpec))
				return errors.Join(err, run.Get(ctx, &results[i][k]))
			})
		}
	}
	require.NoError(t, g.Wait())
	took := time.Since(started)
	for i, tr := range trs {
		run, err := callThroughNexus(ctx, shop, tr.ID+"-caller-late", tr.ID, s.input(tr.taskSpec)) // the task has completed
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, &results[i][2]))
		var own captchaflow.Result
		require.NoError(t, s.c.GetWorkflow(ctx, tr.ID, "").Get(ctx, &own))
		for k := range 3 {
			assert.Equal(t, own, results[i][k], "%s: caller %d's result is the task's own", tr.ID, k)
		}
		tasks, err := s.simTasks(ctx, "/callback/"+tr.ID)
		require.NoError(t, err)
		assert.Len(t, tasks, 1, "%s: three callers, one submission (paid once)", tr.ID)
	}
	reportThroughNexus(ctx, t, shop, trs[0].ID, results[0][0].ProviderTaskID)
	assert.Equal(t, []string{"NexusOperationScheduled", "NexusOperationStarted", "NexusOperationCompleted"},
		nexusEvents(ctx, t, shop, trs[0].ID+"-caller-0"))
	metricsMoved(ctx, t, wants, before)
	t.Logf("%d tasks × 2 concurrent callers solved through the endpoint in %s (%d started directly, same solve time: %s); "+
		"a third caller each after completion", len(trs), took.Round(time.Millisecond), len(trs), solveDirectly(ctx, t, s, sc, len(trs)))
}

// TestE2E_NexusFailuresAndCancel: a task's typed failure reaches the caller with its type, and a caller's
// cancellation cancels the task.
func TestE2E_NexusFailuresAndCancel(t *testing.T) {
	s := requireStack(t)
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "nexusfail")
	trs := sc.add(4, taskSpec{Kind: "nexus failure or cancel"})
	wants := nexusMetrics(s, map[string]float64{"solve started": 3, "solve " + captchaflow.FailureInvalidInput: 1,
		"finished " + captchaflow.FailureDeadlineExceeded: 1, "finished cancelled": 2})
	before, err := metricsSnapshot(ctx, wants)
	require.NoError(t, err)

	bad := s.input(trs[0].taskSpec)
	bad.Params["key"] = "not-allowed"
	doomed := s.input(trs[1].taskSpec)
	doomed.DeadlineSeconds, doomed.Params["sim_solve_ms"] = 3, "30000" // no answer within the deadline
	for _, c := range []struct {
		id, want string
		in       captchaflow.Input
	}{{trs[0].ID, captchaflow.FailureInvalidInput, bad}, {trs[1].ID, captchaflow.FailureDeadlineExceeded, doomed}} {
		run, err := callThroughNexus(ctx, shop, c.id+"-caller", c.id, c.in)
		require.NoError(t, err)
		err = run.Get(ctx, nil)
		var nexusErr *temporal.NexusOperationError
		require.ErrorAs(t, err, &nexusErr, "%s", c.id)
		assert.Equal(t, c.want, captchaflow.FailureType(err), "%s: %v", c.id, err)
	}

	slow := s.input(trs[2].taskSpec)
	slow.CallbackTimeoutSeconds, slow.Params["sim_solve_ms"] = 60, "60000"
	cancelThroughNexus(ctx, t, s, shop, trs[2].ID, slow, captchaflow.PhaseAwaitingCallback)
	undeliverable := s.input(trs[3].taskSpec)
	undeliverable.NotifyURL = "http://127.0.0.1:1/hooks/captcha" // refused: the task stays delivering its paid code
	var paid captchaflow.Result
	require.NoError(t, cancelThroughNexus(ctx, t, s, shop, trs[3].ID, undeliverable, captchaflow.PhaseDelivering).Details(&paid))
	assert.NotEmpty(t, paid.Code, "the paid code reaches the caller in the cancellation's details")
	metricsMoved(ctx, t, wants, before)
}

// nexusMetrics are the worker's Nexus series ("solve started": operations; "finished cancelled": the ends of tasks
// solve operations started) and how far each must move.
func nexusMetrics(s *stack, atLeast map[string]float64) []metricWant {
	var wants []metricWant
	for key, n := range atLeast {
		what, outcome, _ := strings.Cut(key, " ")
		w := metricWant{url: s.workerMetricsURL() + "/metrics", name: captchaflow.MetricNexusOperations,
			labels: map[string]string{"nexus_operation": what, "outcome": outcome}, atLeast: n}
		if what == "finished" {
			w.name, w.labels = captchaflow.MetricNexusSolvesFinished, map[string]string{"outcome": outcome}
		}
		wants = append(wants, w)
	}
	return wants
}

// metricsMoved waits until every wanted series has moved from before by at least its atLeast.
func metricsMoved(ctx context.Context, t *testing.T, wants []metricWant, before map[string]float64) {
	t.Helper()
	eventually(t, "metrics", 15*time.Second, 250*time.Millisecond, func() string {
		after, err := metricsSnapshot(ctx, wants)
		if err != nil {
			return err.Error()
		}
		for _, w := range wants {
			if key := w.url + " " + w.String(); after[key]-before[key] < w.atLeast {
				return fmt.Sprintf("%s moved by %g, want at least %g", key, after[key]-before[key], w.atLeast)
			}
		}
		return ""
	})
}

// cancelThroughNexus cancels a caller once its task is in phase, and checks both end cancelled.
func cancelThroughNexus(ctx context.Context, t *testing.T, s *stack, shop client.Client, taskID string, in captchaflow.Input,
	phase captchaflow.Phase) *temporal.CanceledError {
	run, err := callThroughNexus(ctx, shop, taskID+"-caller", taskID, in)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var st captchaflow.Status
		v, err := s.c.QueryWorkflow(ctx, taskID, "", captchaflow.StatusQuery)
		return err == nil && v.Get(&st) == nil && st.Phase == phase
	}, 30*time.Second, 100*time.Millisecond, "the task never reached %s", phase)
	require.NoError(t, shop.CancelWorkflow(ctx, run.GetID(), ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, run.Get(ctx, nil), &canceled, "the caller ends cancelled")
	require.Eventually(t, func() bool {
		d, err := s.c.DescribeWorkflow(ctx, taskID, "")
		return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CANCELED
	}, 30*time.Second, 100*time.Millisecond, "the caller's cancellation cancels the task")
	return canceled
}

// TestE2E_NexusStarter: `starter --via nexus --namespace shop` solves one task from a shell through the endpoint.
func TestE2E_NexusStarter(t *testing.T) {
	s := requireStack(t)
	shopClient(t, s) // the endpoint and namespace, on an external server too
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := newScenario(t, s, "nexusstarter").add(1, taskSpec{Kind: "starter via nexus"})[0]
	in := s.input(tr.taskSpec)
	cmd := exec.CommandContext(ctx, s.bins.Starter, "--via", "nexus", "--namespace", devstack.CallerNamespace, "--id", tr.ID,
		"--method", in.Method, "--param", "googlekey="+in.Params["googlekey"], "--param", "pageurl="+in.Params["pageurl"],
		"--input", `{"callback_timeout_seconds":2,"poll_interval_seconds":1}`)
	cmd.Env = append(append(os.Environ(), "TEMPORAL_ADDRESS="+s.temporalAddr, "TEMPORAL_NAMESPACE="+s.namespace,
		"CAPTCHAFLOW_KEYS_FILE="+s.keysFile), envLines(s.clientEnv(roleShop))...) // the caller team's credential
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var got, own captchaflow.Result
	require.NoError(t, json.Unmarshal(out, &got))
	require.NoError(t, s.c.GetWorkflow(ctx, tr.ID, "").Get(ctx, &own))
	assert.Equal(t, own.Code, got.Code)
	assert.NotEmpty(t, got.Code)
}

// reportThroughNexus reports the task bad through the endpoint, then good, which fails VerdictConflict.
func reportThroughNexus(ctx context.Context, t *testing.T, shop client.Client, taskID, providerTaskID string) {
	for i, verdict := range []captchaflow.Verdict{captchaflow.VerdictBad, captchaflow.VerdictGood} { // the second conflicts
		run, err := shop.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: taskID + "-report-" + strconv.Itoa(i), TaskQueue: callerQueue},
			reportViaNexus, captchaflow.ReportRequest{TaskID: taskID, Verdict: verdict})
		require.NoError(t, err)
		var rep captchaflow.ReportResult
		err = run.Get(ctx, &rep)
		if i == 0 {
			require.NoError(t, err)
			assert.Equal(t, captchaflow.VerdictBad, rep.Verdict)
			assert.Equal(t, providerTaskID, rep.ProviderTaskID)
		} else {
			assert.Equal(t, captchaflow.FailureVerdictConflict, captchaflow.FailureType(err), "%v", err)
		}
	}
}

// nexusEvents are the Nexus events of a caller workflow's history.
func nexusEvents(ctx context.Context, t *testing.T, shop client.Client, callerID string) (names []string) {
	hist := shop.GetWorkflowHistory(ctx, callerID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		if name := ev.GetEventType().String(); strings.HasPrefix(name, "NexusOperation") {
			names = append(names, name)
		}
	}
	return names
}

// solveDirectly solves n tasks like the Nexus ones with captchaflow.Solve, for the figure: how long they took.
func solveDirectly(ctx context.Context, t *testing.T, s *stack, sc *scenario, n int) time.Duration {
	started := time.Now()
	var g errgroup.Group
	for _, tr := range sc.add(n, taskSpec{Kind: "direct", SolveMS: 1500}) {
		g.Go(func() error { _, err := captchaflow.Solve(ctx, s.c, tr.ID, s.input(tr.taskSpec)); return err })
	}
	require.NoError(t, g.Wait())
	return time.Since(started).Round(time.Millisecond)
}
