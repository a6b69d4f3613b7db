package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func fault(spec string) url.Values { return url.Values{"sim_fault": {spec}} }

func TestDropPingbackSolvesButNeverCalls(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	id := h.submit(rc.url("wf-drop"), fault("drop_pingback"))

	h.waitResult(id, "OK|"+sim.CodeFor(id))
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Dropped == 1 }, waitFor, pollEvery)
	task := h.task(id)
	assert.Equal(t, []string{sim.FaultDropPingback}, task.Faults)
	require.Len(t, task.Pingbacks, 1)
	assert.Equal(t, sim.OutcomeDropped, task.Pingbacks[0].Outcome)
	assert.Zero(t, rc.count())
	assert.Zero(t, h.stats().Pingbacks.Sent)
}

func TestDuplicatePingbackIsSentTwice(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	id := h.submit(rc.url("wf-dup"), fault("duplicate_pingback"))

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Sent == 2 }, waitFor, pollEvery)
	got := rc.received()
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1])
	assert.Equal(t, sim.CodeFor(id), got[1].Get("code"))
	assert.Equal(t, sim.PingbackStats{Sent: 2, Succeeded: 2, Duplicated: 1}, h.stats().Pingbacks)
	kinds := []sim.PingbackKind{h.task(id).Pingbacks[0].Kind, h.task(id).Pingbacks[1].Kind}
	assert.Equal(t, []sim.PingbackKind{sim.PingbackFirst, sim.PingbackDuplicate}, kinds)
}

func TestLatePingbackArrivesAfterResPHPHasTheCode(t *testing.T) {
	cfg := testConfig()
	cfg.LateDelay = 400 * time.Millisecond
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)
	id := h.submit(rc.url("wf-late"), url.Values{"sim_fault": {"late_pingback"}, "sim_solve_ms": {"0"}})

	h.waitResult(id, "OK|"+sim.CodeFor(id))
	assert.Zero(t, rc.count(), "the pingback is held back while res.php already answers")
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Sent == 1 }, waitFor, pollEvery)
	assert.Equal(t, sim.CodeFor(id), rc.received()[0].Get("code"))

	task := h.task(id)
	require.Len(t, task.Pingbacks, 1)
	assert.Equal(t, sim.PingbackLate, task.Pingbacks[0].Kind)
	assert.GreaterOrEqual(t, task.Pingbacks[0].At.Sub(*task.SolvedAt), cfg.LateDelay)
	assert.Equal(t, sim.PingbackStats{Sent: 1, Succeeded: 1, Late: 1}, h.stats().Pingbacks)
}

func TestHangPingbackStallsUntilTheReceiverTimesOut(t *testing.T) {
	h := startSim(t, testConfig())
	var handled atomic.Int32
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		handled.Add(1)
	}))
	target.Config.ReadHeaderTimeout = 100 * time.Millisecond
	target.Start()
	t.Cleanup(target.Close)
	id := h.submit(target.URL+"/callback/wf-hang?t=tok", fault("hang_pingback"))

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Hung == 1 }, waitFor, pollEvery)
	attempt := h.task(id).Pingbacks[0]
	assert.Equal(t, sim.PingbackHang, attempt.Kind)
	assert.Equal(t, sim.OutcomeHung, attempt.Outcome)
	assert.True(t, attempt.TargetClosed, "the receiver's read timeout ended the stall: %s", attempt.Error)
	assert.Less(t, attempt.DurationMS, testConfig().HangFor.Milliseconds())
	assert.Zero(t, handled.Load(), "the code never arrives through a hung pingback")
	assert.Zero(t, h.stats().Pingbacks.Sent)
	assert.Equal(t, "OK|"+sim.CodeFor(id), h.result(id))
}

func TestHangPingbackIsBoundedByHangFor(t *testing.T) {
	cfg := testConfig()
	cfg.HangFor = 150 * time.Millisecond
	h := startSim(t, cfg)
	target := startReceiver(t, http.StatusOK) // no read timeout at all
	id := h.submit(target.url("wf-hang"), fault("hang_pingback"))

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Hung == 1 }, waitFor, pollEvery)
	attempt := h.task(id).Pingbacks[0]
	assert.False(t, attempt.TargetClosed)
	assert.GreaterOrEqual(t, attempt.DurationMS, cfg.HangFor.Milliseconds())
	assert.Zero(t, target.count())
}

func TestUnsolvableAppliesToTheFirstNSubmissionsOfAPingbackURL(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	pingback := rc.url("wf-unsolvable")

	first := h.submit(pingback, fault("unsolvable=2"))
	h.waitResult(first, sim.ErrorCaptchaUnsolvable)
	second := h.submit(pingback, fault("unsolvable=2"))
	h.waitResult(second, sim.ErrorCaptchaUnsolvable)
	third := h.submit(pingback, fault("unsolvable=2"))
	h.waitResult(third, "OK|"+sim.CodeFor(third))

	require.Eventually(t, func() bool { return rc.count() == 1 }, waitFor, pollEvery)
	assert.Equal(t, third, rc.received()[0].Get("id"), "unsolvable tasks send no pingback")
	assert.Equal(t, sim.StatusUnsolvable, h.task(first).Status)
	assert.Empty(t, h.task(first).Code)
	assert.Equal(t, []string{sim.FaultUnsolvable}, h.task(second).Faults)
	assert.Empty(t, h.task(third).Faults)

	// Another workflow's URL has its own count.
	other := h.submit(rc.url("wf-other"), fault("unsolvable"))
	h.waitResult(other, sim.ErrorCaptchaUnsolvable)
}

func TestFailSubmitRejectsNTimesPerPingbackURL(t *testing.T) {
	h := startSim(t, testConfig())
	params := recaptchaParams("http://127.0.0.1:1/callback/wf-fail?t=x", fault("fail_submit=2"))
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", params))
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", params))
	_, ok := cutOK(h.call("/in.php", params))
	assert.True(t, ok, "the third submission is accepted")

	otherURL := recaptchaParams("http://127.0.0.1:1/callback/wf-fail-2", fault("fail_submit"))
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", otherURL))

	st := h.stats().Submissions
	assert.EqualValues(t, 1, st.Accepted)
	assert.EqualValues(t, 3, st.RejectedByCode[sim.ErrorNoSlotAvailable])
}

func TestSolveTimeOverride(t *testing.T) {
	cfg := testConfig()
	cfg.SolveMin, cfg.SolveMax = time.Hour, time.Hour
	h := startSim(t, cfg)
	id := h.submit("", url.Values{"sim_solve_ms": {"10"}})
	h.waitResult(id, "OK|"+sim.CodeFor(id))
	assert.EqualValues(t, 10, h.task(id).SolveTimeMS)
}

func TestFaultRulesMatchThePingbackURL(t *testing.T) {
	cfg := testConfig()
	cfg.FaultRules = "/callback/chaos-drop-=>drop_pingback; /callback/chaos-dup-=>duplicate_pingback"
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)

	dropped := h.submit(rc.url("chaos-drop-1"), nil)
	duplicated := h.submit(rc.url("chaos-dup-1"), nil)
	plain := h.submit(rc.url("plain-1"), nil)
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Sent == 3 }, waitFor, pollEvery)
	assert.Equal(t, []string{sim.FaultDropPingback}, h.task(dropped).Faults)
	assert.Equal(t, []string{sim.FaultDuplicatePingback}, h.task(duplicated).Faults)
	assert.Empty(t, h.task(plain).Faults)

	// Rules can be replaced at runtime over HTTP.
	body, err := json.Marshal(sim.FaultRuleList{Rules: []sim.FaultRule{{Pattern: "wf-now-unsolvable", Faults: "unsolvable"}}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, h.srv.URL+"/_sim/rules", bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	readOK(t, resp)
	id := h.submit(rc.url("wf-now-unsolvable"), nil)
	h.waitResult(id, sim.ErrorCaptchaUnsolvable)
	var rules sim.FaultRuleList
	h.getJSON("/_sim/rules", &rules)
	assert.Len(t, rules.Rules, 1)

	req, err = http.NewRequest(http.MethodPut, h.srv.URL+"/_sim/rules", bytes.NewReader([]byte(`{"rules":[{"pattern":"(","faults":"drop_pingback"}]}`)))
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestRateFaultsAreReproducibleWithTheSameSeed(t *testing.T) {
	run := func(seed uint64) []sim.Task {
		cfg := testConfig()
		cfg.Seed = seed
		cfg.SolveMin, cfg.SolveMax = time.Hour, 2*time.Hour // never solve during the test
		cfg.DropRate, cfg.DupRate, cfg.LateRate, cfg.HangRate = 0.2, 0.2, 0.2, 0.2
		cfg.UnsolvableRate = 0.2
		h := startSim(t, cfg)
		for range 40 {
			h.submit("http://127.0.0.1:1/callback/wf", nil)
		}
		return h.sim.Tasks()
	}
	fates := func(tasks []sim.Task) (out []string) {
		for _, task := range tasks {
			out = append(out, task.ID+" "+strconv.FormatInt(task.SolveTimeMS, 10)+" "+strings.Join(task.Faults, ","))
		}
		return out
	}
	a, b, c := fates(run(7)), fates(run(7)), fates(run(8))
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)

	seen := map[string]bool{}
	for _, task := range run(7) {
		for _, f := range task.Faults {
			seen[f] = true
		}
	}
	for _, f := range []string{sim.FaultDropPingback, sim.FaultDuplicatePingback, sim.FaultLatePingback, sim.FaultHangPingback, sim.FaultUnsolvable} {
		assert.True(t, seen[f], "40 tasks at 20%% each should hit %s", f)
	}
}

func TestCertainDropRateDropsEveryPingback(t *testing.T) {
	cfg := testConfig()
	cfg.DropRate = 1
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)
	for i := range 5 {
		h.submit(rc.url("wf-"+string(rune('a'+i))), nil)
	}
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Dropped == 5 }, waitFor, pollEvery)
	assert.Zero(t, rc.count())
}

func TestParseFaultSpec(t *testing.T) {
	spec, err := sim.ParseFaultSpec(" duplicate_pingback , unsolvable=3,fail_submit ,late_pingback")
	require.NoError(t, err)
	assert.Equal(t, sim.FaultSpec{DuplicatePingback: true, LatePingback: true, Unsolvable: 3, FailSubmit: 1}, spec)

	for _, bad := range []string{"nope", "unsolvable=0", "fail_submit=x", "drop_pingback=2"} {
		_, err := sim.ParseFaultSpec(bad)
		assert.Error(t, err, bad)
	}
	_, err = sim.ParseFaultRules("no-arrow")
	assert.Error(t, err)
	_, err = sim.ParseFaultRules("(=>drop_pingback")
	assert.Error(t, err)
}
