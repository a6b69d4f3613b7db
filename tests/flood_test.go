package tests

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// Flood sizes and the shipped ingress limits they are checked against (ingressEnv sets none of these, so the
// ingress runs with its defaults: INGRESS_CALLBACK_BURST 4, INGRESS_CALLBACK_REFILL 30s).
const (
	floodEach        = 1000 // untokened forged, tokened wrong id, tokened exact repeats
	floodConcurrency = 32
	floodSourceIPs   = 8 // the untokened flood leaves from 127.0.1.1–8, so it also gets past the per-client limit
	shippedBurst     = 4
	timingSamples    = 20
	maxFloodRounds   = 20 // bounds the flood: 60 000 requests at most
)

// TestE2E_CallbackFlood (issue #9): one task waits for its callback (a 20 s solve) while the ingress gets rounds
// of 1 000 forged untokened callbacks naming its provider task, 1 000 tokened callbacks with a wrong provider id
// and 1 000 exact repeats of one tokened callback, 32 at a time, until 10 other tasks have had their real
// pingbacks answered meanwhile (one round takes well under a second). The flooded workflow's history and its res.php requests may grow only by a small
// constant; it still completes with the provider's real code; every real pingback is answered 200. The untokened
// route answers as fast for a known provider task as for an unknown one (no timing oracle).
func TestE2E_CallbackFlood(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "flood")
	// The pingback of the flooded task is likely suppressed by its spent signal budget (the flood took it); the
	// callback timeout just past the solve then lets the poll take the code at once.
	flooded := sc.add(1, taskSpec{Kind: "flooded", SolveMS: 20_000, CallbackTimeout: 21})[0]
	probe := sc.add(1, taskSpec{Kind: "untokened timing probe", SolveMS: 20_000, CallbackTimeout: 21})[0]
	var others []*taskRun
	for i := range 10 {
		others = append(others, sc.add(1, taskSpec{Kind: "real pingback during the flood", SolveMS: 1000 + 50*i, Via: captchaflow.ViaCallback})...)
	}
	require.NoError(t, s.simRules(ctx, sc.rules()))
	sc.startEach(ctx, []*taskRun{flooded, probe}, func(tr *taskRun) captchaflow.Input { return s.input(tr.taskSpec) })
	states := sc.waitStates(ctx, []string{flooded.ID, probe.ID}, "awaiting the callback", 30*time.Second, awaitingQuietly)
	floodedPID, probePID := states[flooded.ID].ProviderTaskID, states[probe.ID].ProviderTaskID
	require.NotEmpty(t, floodedPID)

	ingressMetrics := s.ingressMetricsURL() + "/metrics"
	untokenedTotal := func() float64 {
		text, err := scrape(ctx, ingressMetrics)
		require.NoError(t, err)
		v, _ := metricSum(text, "captchaflow_ingress_callbacks_total", map[string]string{"route": "untokened"})
		return v
	}
	metricsBefore, err := scrape(ctx, ingressMetrics)
	require.NoError(t, err)
	untokenedBefore := untokenedTotal()

	// Timing: the untokened route's answer for the probe's (known, running) provider task and for unknown IDs,
	// alternated, each from an address of its own so that neither meets the per-client limit.
	known, unknown := clientFrom("127.0.0.2", 1), clientFrom("127.0.0.3", 1)
	var knownMS, unknownMS []float64
	unknownBase, _ := strconv.ParseInt(floodedPID, 10, 64)
	for i := range timingSamples {
		q := url.Values{"id": {probePID}, "code": {fmt.Sprintf("PROBE-%02d", i)}}
		status, d, err := getStatus(ctx, known, s.ingressURL()+"/callback?"+q.Encode())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "untokened, known provider task")
		knownMS = append(knownMS, float64(d.Microseconds())/1000)
		q = url.Values{"id": {strconv.FormatInt(unknownBase+5_000_000+int64(i), 10)}, "code": {fmt.Sprintf("PROBE-%02d", i)}}
		status, d, err = getStatus(ctx, unknown, s.ingressURL()+"/callback?"+q.Encode())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "untokened, unknown provider task")
		unknownMS = append(unknownMS, float64(d.Microseconds())/1000)
	}
	knownP50, unknownP50 := percentile(knownMS, 50), percentile(unknownMS, 50)
	sc.note("untokened answer, median of %d: known provider task %.2f ms, unknown %.2f ms (max %.2f / %.2f ms)",
		timingSamples, knownP50, unknownP50, percentile(knownMS, 100), percentile(unknownMS, 100))
	assert.Less(t, knownP50, 100.0, "untokened answer for a known task")
	assert.Less(t, unknownP50, 100.0, "untokened answer for an unknown task")
	assert.Less(t, knownP50-unknownP50, 25.0, "a known task must not be told apart by a slower answer")
	assert.Less(t, unknownP50-knownP50, 25.0, "an unknown task must not be told apart by a slower answer")

	// Before: the flooded workflow's history and res.php requests (the probes above named another task).
	hBefore, err := s.history(ctx, flooded.ID)
	require.NoError(t, err)
	resBefore := sc.simTasksByWorkflow(ctx)[flooded.ID][0].ResGetCount

	// The flood goes in rounds of 1 000 of each kind (fresh wrong ids each round) until every other task's real
	// pingback has been answered, so that they all come while the flood runs: one round takes under a second.
	signed := s.pingbackQuery(ctx, flooded.ID, callbackSecret)
	tokened := func(id, code string) string {
		q := maps.Clone(signed)
		q.Set("id", id)
		q.Set("code", code)
		return s.ingressURL() + callbackPathPrefix + flooded.ID + "?" + q.Encode()
	}
	type req struct {
		kind, url string
		src       int // index into clients
	}
	round := func(r int) []req {
		var reqs []req
		for i := range floodEach {
			wrong := strconv.FormatInt(unknownBase+1+int64(r*floodEach+i), 10)
			reqs = append(reqs,
				req{"untokened forged", s.ingressURL() + "/callback?" + url.Values{"id": {floodedPID}, "code": {"forged"}}.Encode(), 1 + i%floodSourceIPs},
				req{"tokened wrong id", tokened(wrong, "WRONG-"+wrong), 0},
				req{"tokened exact repeat", tokened(strconv.FormatInt(unknownBase-1, 10), "REPEATED"), 0})
		}
		return reqs
	}
	clients := []*http.Client{clientFrom("127.0.0.1", floodConcurrency)}
	for i := 1; i <= floodSourceIPs; i++ {
		clients = append(clients, clientFrom(fmt.Sprintf("127.0.1.%d", i), floodConcurrency))
	}
	othersAnswered := func() bool {
		m := sc.simTasksByWorkflow(ctx)
		for _, tr := range others {
			if ts := m[tr.ID]; len(ts) == 0 || len(ts[0].Pingbacks) == 0 {
				return false
			}
		}
		return true
	}
	var mu sync.Mutex
	statuses := map[string]map[int]int{}
	// The other tasks are submitted first; their solves (1–1.5 s) end while the flood runs.
	sc.startEach(ctx, others, func(tr *taskRun) captchaflow.Input { return s.input(tr.taskSpec) })
	eventually(t, "the other tasks submitted", 30*time.Second, 20*time.Millisecond, func() string {
		m := sc.simTasksByWorkflow(ctx)
		for _, tr := range others {
			if len(m[tr.ID]) == 0 {
				return tr.ID + " not submitted yet"
			}
		}
		return ""
	})
	floodStart := time.Now()
	rounds := 0
	for rounds < maxFloodRounds && (rounds == 0 || !othersAnswered()) {
		reqs := round(rounds)
		rounds++
		errs := parallel(len(reqs), floodConcurrency, func(i int) error {
			r := reqs[i]
			status, _, err := getStatus(ctx, clients[r.src], r.url)
			mu.Lock()
			defer mu.Unlock()
			if statuses[r.kind] == nil {
				statuses[r.kind] = map[int]int{}
			}
			statuses[r.kind][status]++
			return err
		})
		for _, err := range errs {
			require.NoError(t, err, "a flood request failed at the transport")
		}
	}
	floodEnd := time.Now()
	require.True(t, othersAnswered(), "the other tasks' pingbacks did not all come within %d flood rounds", maxFloodRounds)
	perKind := rounds * floodEach
	sc.note("flood of %d requests in %d round(s) of 3×%d (%d at a time) took %s: untokened forged %s; tokened wrong id %s; tokened exact repeat %s",
		3*perKind, rounds, floodEach, floodConcurrency, floodEnd.Sub(floodStart).Round(time.Millisecond),
		statusCounts(statuses["untokened forged"]), statusCounts(statuses["tokened wrong id"]), statusCounts(statuses["tokened exact repeat"]))
	assert.Equal(t, map[int]int{200: perKind}, statuses["tokened wrong id"], "a well-signed callback is answered 200, signalled or not")
	assert.Equal(t, map[int]int{200: perKind}, statuses["tokened exact repeat"])
	for status := range statuses["untokened forged"] {
		assert.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, status, "untokened flood: only 200 or 429")
	}

	// After: every untokened callback processed (the background queue counts each when done), then the workflow
	// quiet again (no confirmation running).
	sent := float64(2*timingSamples + perKind)
	eventually(t, "every untokened callback processed", 30*time.Second, 100*time.Millisecond, func() string {
		if got := untokenedTotal() - untokenedBefore; got < sent {
			return fmt.Sprintf("%g of %g counted", got, sent)
		}
		return ""
	})
	sc.waitStates(ctx, []string{flooded.ID}, "flooded task quiet after the flood", 20*time.Second, awaitingQuietly)
	hAfter, err := s.history(ctx, flooded.ID)
	require.NoError(t, err)
	ptAfter := sc.simTasksByWorkflow(ctx)[flooded.ID][0]
	resAfter := ptAfter.ResGetCount
	metricsAfter, err := scrape(ctx, ingressMetrics)
	require.NoError(t, err)
	require.Equal(t, sim.StatusSolving, ptAfter.Status, "the after-flood figures must be taken before the flooded task is solved")
	sc.note("flood start → every untokened callback processed and the workflow quiet: %s", time.Since(floodStart).Round(time.Millisecond))

	sigBefore := eventCount(hBefore, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	sigAfter := eventCount(hAfter, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	pollBefore, pollAfter := activitiesScheduled(hBefore, "Poll"), activitiesScheduled(hAfter, "Poll")
	evBefore, evAfter := len(hBefore.GetEvents()), len(hAfter.GetEvents())
	authSignals := 0
	for _, cb := range signals(t, hAfter) {
		if cb.Authenticated {
			authSignals++
		}
	}
	untokened := len(untokenedDeliveries(t, hAfter)) // unauthenticated signals, or accepted untokened updates
	sc.note("flooded workflow during the flood: signals %d → %d (%d authenticated), untokened callbacks taken %d, Poll (res.php confirmation) activities %d → %d, history events %d → %d",
		sigBefore, sigAfter, authSignals, untokened, pollBefore, pollAfter, evBefore, evAfter)
	sc.note("flooded task's res.php requests during the flood: %d → %d", resBefore, resAfter)
	// Signal budgets: INGRESS_CALLBACK_BURST per workflow (tokened) and per provider task (untokened), plus what
	// refilled (one per 30 s) during the flood.
	assert.LessOrEqual(t, sigAfter-sigBefore, 2*shippedBurst+2, "signals added by the flood")
	assert.LessOrEqual(t, authSignals, shippedBurst+1, "tokened signals: the workflow's budget")
	assert.LessOrEqual(t, untokened, shippedBurst+1, "untokened callbacks: the provider task's budget")
	assert.LessOrEqual(t, pollAfter-pollBefore, 2, "res.php confirmations: at most 2 per submission")
	assert.LessOrEqual(t, evAfter-evBefore, 60, "history events added by the flood")
	assert.LessOrEqual(t, resAfter-resBefore, int64(2), "res.php requests the flood caused")
	for _, o := range []struct{ route, outcome string }{
		{"tokened", "signalled"}, {"tokened", "suppressed"}, {"tokened", "duplicate"},
		{"untokened", "signalled"}, {"untokened", "suppressed"}, {"untokened", "duplicate"}, {"untokened", "rate_limited"}, {"untokened", "late_or_unknown"},
	} {
		labels := map[string]string{"route": o.route, "outcome": o.outcome}
		b, _ := metricSum(metricsBefore, "captchaflow_ingress_callbacks_total", labels)
		a, _ := metricSum(metricsAfter, "captchaflow_ingress_callbacks_total", labels)
		sc.note("ingress callbacks %s/%s: +%g", o.route, o.outcome, a-b)
	}

	sc.await(ctx, time.Minute)
	provider := sc.simTasksByWorkflow(ctx)
	assert.Equal(t, sim.CodeFor(flooded.Result.ProviderTaskID), flooded.Result.Code, "the flooded task's real code")
	assert.Equal(t, floodedPID, flooded.Result.ProviderTaskID)
	sc.note("flooded task completed via %s with the provider's code (its own pingback: %s)", flooded.Result.Via, describePingbacks(provider[flooded.ID]))

	// The other tasks' real pingbacks: all answered 200, all results by callback.
	var answerMS []float64
	during := 0
	for _, tr := range others {
		pts := provider[tr.ID]
		require.Len(t, pts, 1, tr.ID)
		for _, p := range pts[0].Pingbacks {
			assert.Equal(t, http.StatusOK, p.HTTPStatus, "%s: real pingback (%s)", tr.ID, p.Error)
			answerMS = append(answerMS, float64(p.DurationMS))
			if !p.At.Before(floodStart) && p.At.Before(floodEnd) {
				during++
			}
		}
	}
	p99 := percentile(answerMS, 99)
	sc.note("%d real pingbacks of the other tasks (%d sent while the flood ran): all 200; answer time p50 %.0f ms, p99 %.0f ms (simulator, ms resolution)",
		len(answerMS), during, percentile(answerMS, 50), p99)
	assert.Less(t, p99, 2000.0, "real pingbacks answered promptly under the flood")
	assert.GreaterOrEqual(t, during, len(answerMS)/2, "most real pingbacks came while the flood ran")
	f := sc.verify(ctx) // every task: its real code, delivered once; records the figures and notes
	assert.Equal(t, len(sc.tasks), f.Delivered)
	replayLive(t, s, flooded.ID, probe.ID)
}

// describePingbacks summarises a provider task's pingback attempts for a note.
func describePingbacks(pts []sim.Task) string {
	if len(pts) == 0 || len(pts[len(pts)-1].Pingbacks) == 0 {
		return "none"
	}
	p := pts[len(pts)-1].Pingbacks[0]
	return fmt.Sprintf("%s, HTTP %d", p.Outcome, p.HTTPStatus)
}
