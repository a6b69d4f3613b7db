package tests

// The scenarios run in this order (Go runs tests in source order): the server restart and the big mixed batch
// come last. Tests named *Core* (happy path, worker killed, server restarted) are the ones to run against an
// external cluster: go test ./tests/ -run Core with E2E_TEMPORAL_ADDRESS (and E2E_TEMPORAL_RESTART_CMD).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
	"github.com/captchaflow/captchaflow/workflows"
)

const scenarioTimeout = 3 * time.Minute

// TestE2E_Core_HappyPath: nothing goes wrong; every result comes by callback. An operator can find a task by the
// provider's ID through the CaptchaTaskId search attribute.
func TestE2E_Core_HappyPath(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "happy")
	sc.add(10, taskSpec{Kind: "no fault", Via: captchaflow.ViaCallback})
	sc.start(ctx)
	sc.await(ctx, scenarioTimeout)
	sc.verify(ctx)

	tr := sc.tasks[0]
	query := fmt.Sprintf("%s = '%s'", captchaflow.TaskIDKey.GetName(), tr.Result.ProviderTaskID)
	eventually(t, "ListWorkflow "+query, 20*time.Second, 200*time.Millisecond, func() string {
		resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return err.Error()
		}
		var found []string
		for _, e := range resp.GetExecutions() {
			found = append(found, e.GetExecution().GetWorkflowId())
		}
		if len(found) != 1 || found[0] != tr.ID {
			return fmt.Sprintf("found %v, want [%s]", found, tr.ID)
		}
		return ""
	})
	raw := storedHistory(ctx, t, s.c, tr.ID) // as stored: the suites run encrypted, on both servers
	assert.Contains(t, raw, codec.EncodingEncrypted)
	assert.NotContains(t, raw, tr.Result.Code, "the code in plaintext")
	replayLive(t, s, sc.ids()[:3]...)
}

// TestE2E_NaiveFailureModes: the four ways a callback is lost when the design trusts it alone. Each must end with
// the result from polling res.php, delivered once.
func TestE2E_NaiveFailureModes(t *testing.T) {
	s := requireStack(t)
	const n = 5
	ctx := context.Background()

	t.Run("IngressDown", func(t *testing.T) {
		sc := newScenario(t, s, "ingress-down")
		trs := sc.add(n, taskSpec{Kind: "ingress down", Via: captchaflow.ViaPoll})
		s.front.Stop()
		sc.note("callback proxy disabled: every pingback gets connection refused")
		sc.start(ctx)
		provider := sc.everyFirstPingbackFailed(ctx, trs, 20*time.Second)
		for _, tr := range trs {
			assert.Contains(t, provider[tr.ID][0].Pingbacks[0].Error, "connection refused", tr.ID)
		}
		sc.await(ctx, scenarioTimeout)
		sc.verify(ctx)
	})

	t.Run("Ingress5xx", func(t *testing.T) {
		sc := newScenario(t, s, "ingress-5xx")
		trs := sc.add(n, taskSpec{Kind: "ingress answers 503", Via: captchaflow.ViaPoll})
		require.NoError(t, s.startIngressB(ctx))
		require.NoError(t, s.setFrontUpstream(loopback(s.ingressBPort)))
		sc.note("callbacks routed to a second real ingress whose Temporal is unreachable: it answers 503")
		sc.start(ctx)
		provider := sc.everyFirstPingbackFailed(ctx, trs, 20*time.Second)
		for _, tr := range trs {
			assert.Equal(t, http.StatusServiceUnavailable, provider[tr.ID][0].Pingbacks[0].HTTPStatus, tr.ID)
		}
		sc.await(ctx, scenarioTimeout)
		sc.verify(ctx)
	})

	t.Run("HangingConnection", func(t *testing.T) {
		sc := newScenario(t, s, "ingress-hangs")
		trs := sc.add(n, taskSpec{Kind: "connection hangs", Via: captchaflow.ViaPoll})
		remove, err := addToxic(s.front, `{"name":"hang","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
		require.NoError(t, err)
		defer remove()
		sc.note("toxiproxy timeout toxic: pingback requests are swallowed, the connection stays open until the simulator's %s timeout", simPingbackTimeout)
		sc.start(ctx)
		sc.await(ctx, scenarioTimeout)
		provider := sc.everyFirstPingbackFailed(ctx, trs, 20*time.Second)
		for _, tr := range trs {
			p := provider[tr.ID][0].Pingbacks[0]
			assert.Zero(t, p.HTTPStatus, tr.ID)
			assert.GreaterOrEqual(t, p.DurationMS, (simPingbackTimeout - 100*time.Millisecond).Milliseconds(), "%s: %s", tr.ID, p.Error)
		}
		sc.verify(ctx)
	})

	t.Run("HandlerCrashAfterAccept", func(t *testing.T) {
		sc := newScenario(t, s, "ingress-crash")
		trs := sc.add(n, taskSpec{Kind: "ingress killed mid-signal", Via: captchaflow.ViaPoll})
		// The signals leave the ingress but never reach Temporal: a tap on the ingress→Temporal leg swallows them
		// and tells which workflows' callbacks the ingress has accepted and is signalling.
		tap, toxic := newTap("crash-"+s.runID, sc.idPattern(), true)
		remove, err := addToxic(s.tleg, toxic)
		require.NoError(t, err)
		sc.start(ctx)
		eventually(t, "the ingress signalling every task", 30*time.Second, 20*time.Millisecond, func() string {
			if seen := tap.Seen(); len(seen) < n {
				return fmt.Sprintf("%d of %d signals in flight", len(seen), n)
			}
			return ""
		})
		s.ingress.Kill()
		remove()
		sc.note("ingress SIGKILLed with %d callbacks accepted and their signals in flight", n)
		provider := sc.everyFirstPingbackFailed(ctx, trs, 20*time.Second)
		for _, tr := range trs {
			assert.Zero(t, provider[tr.ID][0].Pingbacks[0].HTTPStatus, "%s: the provider got no answer", tr.ID)
		}
		require.NoError(t, s.restartIngress(ctx))
		sc.await(ctx, scenarioTimeout)
		sc.verify(ctx)
		for id, h := range histories(t, s, sc.ids()) {
			assert.Empty(t, signals(t, h), "%s: no signal may have reached the workflow", id)
		}
	})
}

// TestE2E_CallbackAnomalies: duplicate, late, stale (wrong provider id) and forged callbacks, and the untokened
// route, all at once; then the worker's and the ingress's /metrics must show the domain metrics moving.
func TestE2E_CallbackAnomalies(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "anomalies")
	dup := sc.add(3, taskSpec{Kind: "duplicate pingback", Faults: "duplicate_pingback", Via: captchaflow.ViaCallback})
	late := sc.add(3, taskSpec{Kind: "late pingback", Faults: "late_pingback", Via: captchaflow.ViaPoll})
	// A signed callback naming another provider task makes the task ask res.php: by callback (confirmed) or by the
	// poll when the provider was not done yet; either way the code is the provider's, never the callback's.
	wrong := sc.add(2, taskSpec{Kind: "wrong provider id", Faults: "drop_pingback", CallbackTimeout: 5})
	forged := sc.add(2, taskSpec{Kind: "forged token", Faults: "drop_pingback", CallbackTimeout: 5, Via: captchaflow.ViaPoll})
	uForged := sc.add(2, taskSpec{Kind: "untokened, forged code", Faults: "drop_pingback", SolveMS: 100, CallbackTimeout: 15, Via: captchaflow.ViaCallback})
	uReal := sc.add(2, taskSpec{Kind: "untokened, real code", Faults: "drop_pingback", SolveMS: 100, CallbackTimeout: 15, Via: captchaflow.ViaCallback})

	wants := anomalyMetrics(s)
	before, err := metricsSnapshot(ctx, wants)
	require.NoError(t, err)

	sc.start(ctx)
	for _, tr := range wrong {
		st := sc.waitStates(ctx, []string{tr.ID}, "awaiting the callback", 30*time.Second, awaitingQuietly)[tr.ID]
		status, body := s.sendTokened(ctx, tr.ID, staleProviderID(st.ProviderTaskID), "FORGED-"+tr.ID, callbackSecret)
		assert.Equal(t, http.StatusOK, status, "a well-signed callback is accepted: %s", body)
	}
	for _, tr := range forged {
		st := sc.waitStates(ctx, []string{tr.ID}, "awaiting the callback", 30*time.Second, awaitingQuietly)[tr.ID]
		status, body := s.sendTokened(ctx, tr.ID, st.ProviderTaskID, "FORGED-"+tr.ID, "not-the-callback-secret")
		assert.Equal(t, http.StatusForbidden, status, body)
	}
	for _, tr := range uForged {
		s.sendUntokenedWhenSolved(t, sc, tr, "FORGED-"+tr.ID)
	}
	for _, tr := range uReal {
		s.sendUntokenedWhenSolved(t, sc, tr, "")
	}
	sc.await(ctx, scenarioTimeout)

	// Wait for the late pingbacks (after the poll won) and the duplicates to be sent and answered.
	m := sc.waitSim(ctx, "late and duplicate pingbacks answered", 30*time.Second, func(m map[string][]sim.Task) string {
		for _, tr := range append(append([]*taskRun{}, late...), dup...) {
			if ts := m[tr.ID]; len(ts) != 1 || len(ts[0].Pingbacks) < map[bool]int{true: 2, false: 1}[tr.Faults == "duplicate_pingback"] {
				return tr.ID + ": pingbacks not all sent yet"
			}
		}
		return ""
	})
	for _, tr := range late {
		p := m[tr.ID][0].Pingbacks[0]
		assert.Equal(t, sim.PingbackLate, p.Kind, tr.ID)
		assert.Equal(t, http.StatusOK, p.HTTPStatus, "%s: a late callback is acknowledged (nothing to retry)", tr.ID)
		assert.True(t, p.At.After(tr.Result.ReceivedAt), "%s: the late pingback came after the poll's result", tr.ID)
	}
	for _, tr := range dup {
		for _, p := range m[tr.ID][0].Pingbacks {
			assert.Equal(t, http.StatusOK, p.HTTPStatus, "%s: %s pingback", tr.ID, p.Kind)
		}
	}
	sc.verify(ctx) // after the late pingbacks: still exactly one delivery each

	hs := histories(t, s, sc.ids())
	for _, tr := range wrong {
		cbs := signals(t, hs[tr.ID])
		if assert.Len(t, cbs, 1, tr.ID) {
			assert.NotEqual(t, tr.Result.ProviderTaskID, cbs[0].ProviderTaskID)
			assert.True(t, cbs[0].Authenticated, "the stale callback was authenticated and still ignored")
		}
		assert.NotEqual(t, "FORGED-"+tr.ID, tr.Result.Code)
	}
	for _, tr := range forged {
		assert.Empty(t, signals(t, hs[tr.ID]), "%s: a forged callback must not reach the workflow", tr.ID)
	}
	for _, tr := range append(append([]*taskRun{}, uForged...), uReal...) {
		assert.Len(t, untokenedDeliveries(t, hs[tr.ID]), 1, "%s: one untokened callback reached the workflow", tr.ID)
		for _, cb := range signals(t, hs[tr.ID]) {
			assert.False(t, cb.Authenticated, "%s: its pingback was dropped: no tokened callback", tr.ID)
		}
		pt := sc.simTasks[tr.ID][0]
		assert.Equal(t, int64(1), pt.ResGetCount, "%s: exactly one res.php call confirms an untokened callback", tr.ID)
		assert.Equal(t, pt.Code, tr.Result.Code, "%s: the delivered code is the provider's, never the callback's", tr.ID)
	}
	for _, tr := range dup {
		assert.LessOrEqual(t, len(signals(t, hs[tr.ID])), 2, tr.ID)
	}

	// "curl /metrics shows the domain metrics": the counters moved by at least what this batch did.
	eventually(t, "domain metrics", 15*time.Second, 250*time.Millisecond, func() string {
		after, err := metricsSnapshot(ctx, wants)
		if err != nil {
			return err.Error()
		}
		for _, w := range wants {
			key := w.url + " " + w.String()
			if got := after[key] - before[key]; got < w.atLeast {
				return fmt.Sprintf("%s moved by %g, want at least %g", key, got, w.atLeast)
			}
		}
		return ""
	})
	replayLive(t, s, dup[0].ID, late[0].ID, wrong[0].ID, forged[0].ID, uForged[0].ID, uReal[0].ID)
}

func anomalyMetrics(s *stack) []metricWant {
	w, i := s.workerMetricsURL()+"/metrics", s.ingressMetricsURL()+"/metrics"
	return []metricWant{
		{url: w, name: workflows.MetricTasksFinished, labels: map[string]string{"outcome": "callback"}, atLeast: 7},
		// The late and forged tasks end by the poll; the wrong-id ones either way (see TestE2E_CallbackAnomalies).
		{url: w, name: workflows.MetricTasksFinished, labels: map[string]string{"outcome": "poll"}, atLeast: 5},
		{url: w, name: workflows.MetricFallbackPollsStarts, atLeast: 5},
		{url: w, name: activities.MetricDeliveries, labels: map[string]string{"result": "ok"}, atLeast: 14},
		{url: i, name: "captchaflow_ingress_callbacks_total", labels: map[string]string{"route": "tokened", "outcome": "signalled"}, atLeast: 5},
		{url: i, name: "captchaflow_ingress_callbacks_total", labels: map[string]string{"route": "tokened", "outcome": "forged"}, atLeast: 2},
		{url: i, name: "captchaflow_ingress_callbacks_total", labels: map[string]string{"route": "tokened", "outcome": "late_or_unknown"}, atLeast: 3},
		{url: i, name: "captchaflow_ingress_callbacks_total", labels: map[string]string{"route": "untokened", "outcome": "signalled"}, atLeast: 4},
	}
}

// TestE2E_Core_WorkerKilled: the worker is SIGKILLed while every task waits for its callback; the callbacks
// arrive while it is dead (the ingress signals Temporal, which keeps them); a new worker finishes every task.
func TestE2E_Core_WorkerKilled(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "worker-killed")
	sc.allowCrashRepeats = true
	// The solve outlasts waitStates, which checks each task once: under load an early task's callback could
	// otherwise come before the kill and its Deliver run into it.
	trs := sc.add(10, taskSpec{Kind: "worker killed while awaiting", SolveMS: 6000, CallbackTimeout: 30})
	sc.start(ctx)
	sc.waitStates(ctx, sc.ids(), "awaiting callbacks with no activity running", 30*time.Second, awaitingQuietly)
	s.worker.Kill()
	killed := time.Now()
	sc.waitSim(ctx, "callbacks accepted while the worker is dead", 20*time.Second, func(m map[string][]sim.Task) string {
		for _, tr := range trs {
			a, ok := lastAttempt(m[tr.ID][0])
			if !ok {
				return tr.ID + ": no pingback yet"
			}
			if a.Outcome != sim.OutcomeSucceeded {
				return fmt.Sprintf("%s: pingback %s: %s", tr.ID, a.Outcome, a.Error)
			}
		}
		return ""
	})
	require.NoError(t, s.restartWorker(ctx))
	sc.note("worker SIGKILLed with %d tasks awaiting callbacks; all %d callbacks accepted while it was dead; restarted after %s",
		len(trs), len(trs), time.Since(killed).Round(time.Millisecond))
	sc.await(ctx, scenarioTimeout)
	f := sc.verify(ctx)
	assert.Zero(t, f.RepeatsAfterKill, "no activity was running at the kill")
	replayLive(t, s, sc.ids()[:3]...)
}

// TestE2E_DownstreamOutage: notify_url refuses connections for a while; the Deliver activity's retries (the
// durable dead-letter queue) deliver each result exactly once when it is back.
func TestE2E_DownstreamOutage(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "downstream-down")
	sc.add(8, taskSpec{Kind: "notify_url down"})
	require.NoError(t, s.down.Down())
	down := time.Now()
	sc.start(ctx)
	states := sc.waitStates(ctx, sc.ids(), "deliveries failing and retried", time.Minute, deliveryRetried(3))
	for id, st := range states {
		for _, pa := range st.Pending {
			if pa.GetActivityType().GetName() == "Deliver" {
				assert.Contains(t, s.failureMessage(pa.GetLastFailure()), "connection refused", id)
			}
		}
	}
	require.NoError(t, s.down.Up())
	sc.note("notify_url refused connections for %s, until every delivery had failed at least twice", time.Since(down).Round(time.Millisecond))
	sc.await(ctx, scenarioTimeout)
	sc.verify(ctx)
	for id, h := range histories(t, s, sc.ids()) {
		assert.GreaterOrEqual(t, activityAttempts(h)["Deliver"], int32(3), id)
	}
	replayLive(t, s, sc.ids()[:2]...)
}

// TestE2E_Core_ServerRestart: Temporal is stopped and started again on the same state while every task waits for
// its callback; the pingbacks that come meanwhile fail; every task completes after the restart.
func TestE2E_Core_ServerRestart(t *testing.T) {
	s := requireStack(t)
	if s.external() && s.restartCmd == "" {
		t.Skipf("external Temporal without %s: cannot restart it", envExternalRestart)
	}
	ctx := context.Background()
	sc := newScenario(t, s, "server-restart")
	// Pingbacks while the server is down: the dev server is stopped first and kept down until they are all tried,
	// so they only need to come after its graceful stop; an external restart is one command of a few seconds.
	solve := 5000
	if s.external() {
		solve = 1500
	}
	trs := sc.add(10, taskSpec{Kind: "server restarted while awaiting", SolveMS: solve})
	sc.allowCrashRepeats = true // a Deliver whose completion the stopping server lost is retried (at least once)
	sc.start(ctx)
	sc.waitStates(ctx, sc.ids(), "awaiting callbacks with no activity running", 30*time.Second, awaitingQuietly)
	stopped := time.Now()
	if s.external() {
		// One command restarts it; the pingbacks fail if they come while it is down.
		require.NoError(t, s.restartTemporal(ctx))
	} else {
		// Stopped gracefully, and kept down until every pingback has been tried; then up again on the same SQLite
		// file. A pingback made once the server was down must have failed (the ingress cannot signal).
		require.NoError(t, s.temporal.Stop())
		down := time.Now()
		provider := sc.waitSim(ctx, "every pingback tried", 30*time.Second, func(m map[string][]sim.Task) string {
			for _, tr := range trs {
				if _, ok := lastAttempt(m[tr.ID][0]); !ok {
					return tr.ID + ": no pingback yet"
				}
			}
			return ""
		})
		failed := 0
		for _, tr := range trs {
			p := provider[tr.ID][0].Pingbacks[0]
			if p.At.After(down) {
				assert.Equal(t, sim.OutcomeFailed, p.Outcome, "%s: a pingback while Temporal was down", tr.ID)
			}
			if p.Outcome == sim.OutcomeFailed {
				failed++
			}
		}
		sc.note("graceful stop took %s; %d of %d pingbacks came while Temporal was down and failed", down.Sub(stopped).Round(time.Millisecond), failed, len(trs))
		require.NoError(t, s.restartTemporal(ctx))
	}
	sc.note("Temporal down for %s (same state kept) while %d tasks awaited callbacks", time.Since(stopped).Round(time.Millisecond), len(sc.tasks))
	sc.await(ctx, scenarioTimeout)
	f := sc.verify(ctx)
	t.Logf("%d of %d pingbacks failed while Temporal was down; %d results by callback, %d by poll",
		f.PingbacksFailed, f.PingbacksSent, f.ViaCallback, f.ViaPoll)
	replayLive(t, s, sc.ids()[:3]...)
}

// TestE2E_MixedBatch: 200 tasks with seeded random per-task faults (dropped, duplicated, late and hung pingbacks,
// unsolvable first submissions with and without an unsolvable pingback, refused submissions, lost in.php answers,
// a gateway's 502 after the task was created), plus an ingress outage, a worker SIGKILL and a downstream outage
// during the run. All 200 must be delivered, each once, with the right code, and every history must replay.
func TestE2E_MixedBatch(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "mixed")
	sc.allowCrashRepeats = true
	const n = 200
	rng := rand.New(rand.NewPCG(20240611, 7))
	kinds := []struct {
		weight int
		spec   taskSpec
	}{
		{30, taskSpec{Kind: "no fault"}},
		{14, taskSpec{Kind: "dropped pingback", Faults: "drop_pingback", Via: captchaflow.ViaPoll}},
		{14, taskSpec{Kind: "duplicate pingback", Faults: "duplicate_pingback"}},
		{10, taskSpec{Kind: "late pingback", Faults: "late_pingback"}},
		{10, taskSpec{Kind: "hung pingback", Faults: "hang_pingback", Via: captchaflow.ViaPoll}},
		{12, taskSpec{Kind: "unsolvable once", Faults: "unsolvable=1", Submits: 2}},
		{10, taskSpec{Kind: "in.php refused twice", Faults: "fail_submit=2"}},
		{6, taskSpec{Kind: "in.php answer lost", Faults: "submit_lost", Via: captchaflow.ViaCallback}},
		{5, taskSpec{Kind: "gateway 502 after create", Faults: "submit_gateway_error=502", Via: captchaflow.ViaCallback}},
		{5, taskSpec{Kind: "unsolvable pingback", Faults: "unsolvable_pingback=1", Submits: 2}},
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	counts := map[string]int{}
	for range n {
		r := rng.IntN(total)
		for _, k := range kinds {
			if r < k.weight {
				sc.add(1, k.spec)
				counts[k.spec.Kind]++
				break
			}
			r -= k.weight
		}
	}
	sc.note("faults (seeded): %v", counts)
	require.NoError(t, s.simRules(ctx, sc.rules()))

	// notify_url refuses connections from the start until 30 tasks are retrying their delivery (at most 20 s).
	require.NoError(t, s.down.Down())
	downstreamBack := make(chan string, 1)
	go func() {
		downSince := time.Now()
		var retrying int64
		for time.Since(downSince) < 20*time.Second {
			resp, err := s.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Query: fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", captchaflow.PhaseKey.GetName(), captchaflow.PhaseDelivering),
			})
			if err == nil && resp.GetCount() >= 30 {
				retrying = resp.GetCount()
				break
			}
			time.Sleep(250 * time.Millisecond) // poll interval of a bounded wait
		}
		err := s.down.Up()
		downstreamBack <- fmt.Sprintf("notify_url refused connections for %s (%d tasks retrying delivery when it came back; up: %v)",
			time.Since(downSince).Round(time.Millisecond), retrying, err)
	}()

	startErr := make(chan error, 1)
	go func() { startErr <- sc.startWorkflows(ctx) }()

	submitted := func() int {
		tasks, err := s.simTasks(ctx, callbackPathPrefix+sc.prefix)
		if err != nil {
			return 0
		}
		return len(tasks)
	}
	atLeast := func(k int) func() string {
		return func() string {
			if got := submitted(); got < k {
				return fmt.Sprintf("%d submissions so far", got)
			}
			return ""
		}
	}

	// Ingress outage while tasks 60..110 are being solved.
	eventually(t, "60 submissions", 2*time.Minute, 50*time.Millisecond, atLeast(60))
	s.ingress.Kill()
	outage := time.Now()
	eventually(t, "110 submissions", 2*time.Minute, 50*time.Millisecond, atLeast(110))
	require.NoError(t, s.restartIngress(ctx))
	sc.note("ingress SIGKILLed from submission 60 to 110 (%s)", time.Since(outage).Round(time.Millisecond))

	// Worker SIGKILL once 160 are submitted, whatever it is doing; restarted at once.
	eventually(t, "160 submissions", 2*time.Minute, 50*time.Millisecond, atLeast(160))
	s.worker.Kill()
	require.NoError(t, s.restartWorker(ctx))
	sc.note("worker SIGKILLed at submission 160 and restarted")

	require.NoError(t, <-startErr, "starting the workflows")
	sc.note("%s", <-downstreamBack)
	require.NoError(t, s.down.Up())

	sc.await(ctx, 6*time.Minute)
	f := sc.verify(ctx)
	assert.Equal(t, n, f.Delivered, "delivered")
	// Every task's history, written across the worker's SIGKILL, replays on today's code (a worker restart
	// replays them from history exactly so).
	replayLive(t, s, sc.ids()...)
}
