package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack/downstream"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestPlanBatchCoversEveryScenarioWithValidInputs(t *testing.T) {
	tasks := planBatch(10, "20260101-000000", "http://127.0.0.1:9/hooks/captcha")
	require.Len(t, tasks, 10)

	seenIDs := map[string]bool{}
	seenScenarios := map[string]bool{}
	for _, task := range tasks {
		assert.NoError(t, captchaflow.ValidateWorkflowID(task.ID))
		assert.False(t, seenIDs[task.ID], "duplicate ID %s", task.ID)
		seenIDs[task.ID] = true
		seenScenarios[task.Scenario.Name] = true

		in := task.Input.WithDefaults()
		require.NoError(t, in.Validate(), "task %s", task.ID)
		assert.Equal(t, task.Scenario.Fault, in.Params["sim_fault"])
		_, err := sim.ParseFaultSpec(in.Params["sim_fault"])
		assert.NoError(t, err, "the simulator must accept the fault of %s", task.ID)
		ms, err := strconv.Atoi(in.Params["sim_solve_ms"])
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ms, demoSolveMinMS)
		assert.Less(t, ms, demoSolveMinMS+demoSolveSpreadMS)
		assert.Less(t, ms/1000, in.CallbackTimeoutSeconds, "a solve must fit in the callback wait, or nothing comes via callback")
	}
	assert.Len(t, seenScenarios, len(scenarioOrder())-len(failoverScenarios), "a batch of 10 shows every troubled scenario")
	assert.Equal(t, "demo-20260101-000000-001", tasks[0].ID)
}

// plannedFaults counts the batch's tasks whose sim_fault satisfies each named predicate.
func plannedFaults(t *testing.T, tasks []demoTask, preds map[string]func(sim.FaultSpec) bool) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, task := range tasks {
		spec, err := sim.ParseFaultSpec(task.Input.Params["sim_fault"])
		require.NoError(t, err)
		for name, pred := range preds {
			if pred(spec) {
				counts[name]++
			}
		}
	}
	return counts
}

// issue9Faults are the odd provider answers issue #9 taught captchaflow to survive, as the simulator injects them.
var issue9Faults = map[string]func(sim.FaultSpec) bool{
	// An unsolvable first solve whose pingback carries code=ERROR_CAPTCHA_UNSOLVABLE.
	"error-code pingback": func(f sim.FaultSpec) bool { return f.Unsolvable > 0 && f.UnsolvablePingback },
	// in.php answers ERROR_NO_SLOT_AVAILABLE: retried within the submission.
	"in.php transient": func(f sim.FaultSpec) bool {
		return f.FailSubmit > 0 && f.SubmitError == sim.ErrorNoSlotAvailable && f.Unsolvable == 0
	},
	// in.php answers ERROR_CAPTCHA_UNSOLVABLE: a counted submission, then a backoff and another one.
	"in.php resubmit": func(f sim.FaultSpec) bool {
		return f.FailSubmit > 0 && f.SubmitError == sim.ErrorCaptchaUnsolvable && f.Unsolvable == 0
	},
}

func TestBatchPlansTheIssue9Scenarios(t *testing.T) {
	for _, n := range []int{10, 50} {
		tasks := planBatch(n, "20260101-000000", "http://127.0.0.1:9/hooks/captcha")
		counts := plannedFaults(t, tasks, issue9Faults)
		for name := range issue9Faults {
			assert.GreaterOrEqual(t, counts[name], n/len(scenarioCycle), "a batch of %d plans %q in every cycle", n, name)
		}
		for _, task := range tasks {
			spec, err := sim.ParseFaultSpec(task.Input.Params["sim_fault"])
			require.NoError(t, err)
			if spec.FailSubmit > 0 && spec.SubmitError == sim.ErrorCaptchaUnsolvable || spec.Unsolvable > 0 {
				// One refusal or unsolvable answer uses a submission; the task must still have one left.
				assert.Greater(t, task.Input.MaxSubmits, max(spec.FailSubmit, spec.Unsolvable),
					"%s (%s) must be able to complete", task.ID, task.Scenario.Name)
			}
		}
	}
	// Each lands in a row of its own, so the summary shows it apart from the others.
	rows := map[string]string{}
	for _, sc := range scenarioCycle {
		spec, err := sim.ParseFaultSpec(sc.Fault)
		require.NoError(t, err)
		for name, pred := range issue9Faults {
			if pred(spec) {
				if prev, ok := rows[name]; ok {
					assert.Equal(t, prev, sc.Name, "%s spread over two rows", name)
				}
				rows[name] = sc.Name
			}
		}
	}
	assert.Len(t, rows, len(issue9Faults))
	for name, row := range rows {
		for other, otherRow := range rows {
			if name != other {
				assert.NotEqual(t, row, otherRow, "%s and %s share a row", name, other)
			}
		}
	}
}

func TestResubmitBackoffKeepsTheBatchShort(t *testing.T) {
	// An in.php refusal waits resubmitBackoff (5 s) before the next submission, which then solves; a task that
	// polled (the callback wait, then a resubmission and its solve) is the slowest there is, and the refusal must
	// not outlast it.
	const resubmitBackoff = 5 * time.Second
	slowestSolve := time.Duration(demoSolveMinMS+demoSolveSpreadMS) * time.Millisecond
	polled := demoCallbackTimeoutSeconds*time.Second + slowestSolve
	assert.Less(t, resubmitBackoff+slowestSolve, polled)
}

func TestLateAndHangingPingbacksOutlastTheCallbackWait(t *testing.T) {
	late, err := time.ParseDuration(demoSimulatorEnv["SIM_LATE_DELAY"])
	require.NoError(t, err)
	assert.Greater(t, late, demoCallbackTimeoutSeconds*time.Second, "a late pingback must come after the workflow gave up waiting")
	_, err = time.ParseDuration(demoSimulatorEnv["SIM_HANG_FOR"])
	require.NoError(t, err)
}

func TestTallyCountsEachStateOnce(t *testing.T) {
	var c tally
	c.add(nil, false)                                                                            // running
	c.add(nil, true)                                                                             // not started
	c.add(&outcome{Result: captchaflow.Result{Via: captchaflow.ViaCallback, Submits: 1}}, false) // callback
	c.add(&outcome{Result: captchaflow.Result{Via: captchaflow.ViaPoll, Submits: 2}}, false)     // poll, resubmitted
	c.add(&outcome{FailReason: captchaflow.FailureUnsolvable}, false)                            // failed
	assert.Equal(t, tally{Total: 5, Running: 1, NotStarted: 1, Callback: 1, Poll: 1, Resubmitted: 1, Failed: 1}, c)
	assert.Equal(t, 3, c.finished())
	assert.Equal(t, "   12s  running   1 | done   2 (callback 1, poll 1) | failed 1", progressLine(12, c))
}

func TestSnapshotCountsTheIssue9ScenariosAsResubmittedOrNot(t *testing.T) {
	tasks := planBatch(len(scenarioCycle), "20260101-000000", "http://127.0.0.1:9/hooks/captcha")
	tr := newTracker(tasks)
	for _, task := range tasks {
		// What the workflow returns for each scenario: every unsolvable answer (pingback, poll or in.php) costs a
		// submission, a busy in.php does not.
		spec, err := sim.ParseFaultSpec(task.Input.Params["sim_fault"])
		require.NoError(t, err)
		submits := 1 + spec.Unsolvable
		if spec.SubmitError == sim.ErrorCaptchaUnsolvable {
			submits += spec.FailSubmit
		}
		tr.outcomes[task.ID] = &outcome{Result: captchaflow.Result{Via: captchaflow.ViaCallback, Submits: submits}}
	}
	total, byScenario := tr.snapshot()
	assert.Equal(t, len(tasks), total.Callback)
	assert.Equal(t, 1, byScenario["error-code pingback"].Resubmitted)
	assert.Equal(t, 1, byScenario["in.php says unsolvable"].Resubmitted)
	assert.Equal(t, 0, byScenario["in.php busy twice"].Resubmitted)
	assert.Equal(t, 1, byScenario["in.php busy twice"].Total)
	assert.Equal(t, 3, total.Resubmitted, "unsolvable, error-code pingback, in.php says unsolvable")
	assert.Len(t, tr.results(), len(tasks))
}

// deliver posts a signed result for id to the receiver, as the worker would.
func deliver(t *testing.T, r *downstream.Receiver, key []byte, id, code string) {
	t.Helper()
	signer, err := standardwebhooks.NewWebhookRaw(key)
	require.NoError(t, err)
	body := []byte(`{"task_id":"` + id + `","code":"` + code + `","via":"callback","submits":1}`)
	ts := time.Now()
	sig, err := signer.Sign(id, ts, body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, r.URL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestAuditFindsSolvedCodesThatNeverArrived(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	r, err := downstream.Start("127.0.0.1:0", "whsec_"+base64.StdEncoding.EncodeToString(key))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	providerTasks := []sim.Task{
		{ID: "1", Status: sim.StatusSolved, Code: "A", PingbackPath: "/callback/delivered"},
		// A resubmission: the first attempt was unsolvable, the second solved and delivered.
		{ID: "2", Status: sim.StatusUnsolvable, PingbackPath: "/callback/resubmitted"},
		{ID: "3", Status: sim.StatusSolved, Code: "B", PingbackPath: "/callback/resubmitted"},
		{ID: "4", Status: sim.StatusSolved, Code: "C", PingbackPath: "/callback/never-delivered"},
		{ID: "5", Status: sim.StatusSolved, Code: "D", PingbackPath: "/callback/wrong-code"},
		{ID: "6", Status: sim.StatusSolving, PingbackPath: "/callback/still-solving"},
		{ID: "7", Status: sim.StatusUnsolvable, PingbackPath: "/callback/given-up"},
	}
	deliver(t, r, key, "delivered", "A")
	deliver(t, r, key, "resubmitted", "B")
	deliver(t, r, key, "wrong-code", "not-D")

	a := auditDeliveries(providerTasks, r)
	assert.Equal(t, 4, a.Solved)
	assert.Equal(t, []string{"never-delivered", "wrong-code"}, a.Lost)
}

func TestAuditResubmitsSortsErrorPingbacksAndCountsRefusals(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	wait := demoCallbackTimeoutSeconds * time.Second
	sent := func(at time.Duration) []sim.PingbackAttempt {
		return []sim.PingbackAttempt{{Kind: sim.PingbackFirst, Outcome: sim.OutcomeSucceeded, At: t0.Add(at), HTTPStatus: 200}}
	}
	providerTasks := []sim.Task{
		// An error-code pingback at 3 s, resubmitted at once: taken as "resubmit".
		{ID: "1", Status: sim.StatusUnsolvable, PingbackPath: "/callback/resubmitted", SubmittedAt: t0, Pingbacks: sent(3 * time.Second)},
		{ID: "2", Status: sim.StatusSolved, Code: "B", PingbackPath: "/callback/resubmitted", SubmittedAt: t0.Add(3100 * time.Millisecond)},
		// An error-code pingback whose "code" became the result.
		{ID: "3", Status: sim.StatusUnsolvable, PingbackPath: "/callback/as-result", SubmittedAt: t0, Pingbacks: sent(3 * time.Second)},
		// An error-code pingback ignored: resubmitted only after the callback wait and a poll.
		{ID: "4", Status: sim.StatusUnsolvable, PingbackPath: "/callback/ignored", SubmittedAt: t0, Pingbacks: sent(3 * time.Second)},
		{ID: "5", Status: sim.StatusSolved, Code: "E", PingbackPath: "/callback/ignored", SubmittedAt: t0.Add(wait + 2*time.Second)},
		// Unsolvable without a pingback (the plain "unsolvable" scenario) and a dropped one: no error-code pingback.
		{ID: "6", Status: sim.StatusUnsolvable, PingbackPath: "/callback/polled", SubmittedAt: t0},
		{ID: "7", Status: sim.StatusSolved, Code: "G", PingbackPath: "/callback/polled", SubmittedAt: t0.Add(wait + time.Second)},
		{ID: "8", Status: sim.StatusUnsolvable, PingbackPath: "/callback/dropped", SubmittedAt: t0,
			Pingbacks: []sim.PingbackAttempt{{Kind: sim.PingbackFirst, Outcome: sim.OutcomeDropped, At: t0}}},
		// in.php refused the first request as unsolvable: one accepted task, two submits.
		{ID: "9", Status: sim.StatusSolved, Code: "I", PingbackPath: "/callback/refused", SubmittedAt: t0.Add(5 * time.Second)},
		// in.php was busy twice: one accepted task, one submit.
		{ID: "10", Status: sim.StatusSolved, Code: "J", PingbackPath: "/callback/busy", SubmittedAt: t0.Add(3 * time.Second)},
	}
	results := map[string]captchaflow.Result{
		"resubmitted": {ProviderTaskID: "2", Code: "B", Submits: 2},
		"as-result":   {ProviderTaskID: "3", Code: sim.ErrorCaptchaUnsolvable, Submits: 1},
		"ignored":     {ProviderTaskID: "5", Code: "E", Submits: 2},
		"polled":      {ProviderTaskID: "7", Code: "G", Submits: 2},
		"refused":     {ProviderTaskID: "9", Code: "I", Submits: 2},
		"busy":        {ProviderTaskID: "10", Code: "J", Submits: 1},
	}
	a := auditResubmits(providerTasks, results, wait)
	assert.Equal(t, resubmitAudit{
		ErrorPingbacks:  3,
		TakenAsResubmit: 1,
		TakenAsResult:   []string{"as-result"},
		Neither:         []string{"ignored"},
		RefusalsCounted: 1,
	}, a)

	// A task still running is neither, not a result.
	delete(results, "as-result")
	a = auditResubmits(providerTasks, results, wait)
	assert.Empty(t, a.TakenAsResult)
	assert.Equal(t, []string{"as-result", "ignored"}, a.Neither)
}

func TestSummaryShowsLostZeroOnlyWithAnAudit(t *testing.T) {
	base := summary{
		Elapsed:    42 * time.Second,
		Total:      tally{Total: 2, Callback: 1, Poll: 1},
		ByScenario: map[string]tally{"none": {Total: 1, Callback: 1}, "dropped pingback": {Total: 1, Poll: 1}},
		Receiver:   downstream.Stats{Accepted: 2},
	}

	withAudit := base
	withAudit.Audit = &audit{Solved: 2, Resubmits: resubmitAudit{ErrorPingbacks: 3, TakenAsResubmit: 3, RefusalsCounted: 2}}
	var out strings.Builder
	writeSummary(&out, withAudit)
	assert.Contains(t, out.String(), "error-code pingbacks 3 (code=ERROR_CAPTCHA_UNSOLVABLE): 3 taken as \"resubmit\", 0 as a result\n")
	assert.Contains(t, out.String(), "in.php refusals      2 counted as submissions")
	assert.NotContains(t, out.String(), "TAKEN AS A RESULT")
	assert.Contains(t, out.String(), "captchaflow demo: 2 tasks in 42s")
	assert.Contains(t, out.String(), "dropped pingback")
	assert.Contains(t, out.String(), "lost                 0 (of 2 tasks the provider solved")
	assert.True(t, withAudit.ok())

	lost := base
	lost.Audit = &audit{Solved: 2, Lost: []string{"demo-x-002"}}
	out.Reset()
	writeSummary(&out, lost)
	assert.Contains(t, out.String(), "LOST                 1 of 2 tasks the provider solved: demo-x-002")
	assert.False(t, lost.ok())

	asResult := withAudit
	asResult.Audit = &audit{Solved: 2, Resubmits: resubmitAudit{ErrorPingbacks: 2, TakenAsResubmit: 1, TakenAsResult: []string{"demo-x-008"}}}
	out.Reset()
	writeSummary(&out, asResult)
	assert.Contains(t, out.String(), "error-code pingbacks 2 (code=ERROR_CAPTCHA_UNSOLVABLE): 1 taken as \"resubmit\", 1 as a result\n")
	assert.Contains(t, out.String(), "TAKEN AS A RESULT: demo-x-008")

	unknown := base
	unknown.AuditError = "simulator unreachable"
	out.Reset()
	writeSummary(&out, unknown)
	assert.Contains(t, out.String(), "lost                 unknown: simulator unreachable")
	assert.False(t, unknown.ok(), "an audit that could not be made is not a pass")

	unfinished := withAudit
	unfinished.Total.Running = 1
	assert.False(t, unfinished.ok(), "unfinished tasks may yet be lost")
}

func TestParseFlags(t *testing.T) {
	s, err := parseFlags([]string{"-tasks", "10", "-exit", "-port", "0"}, &strings.Builder{})
	require.NoError(t, err)
	assert.Equal(t, 10, s.tasks)
	assert.True(t, s.exit)
	assert.Equal(t, 0, s.temporalPort)
	assert.Equal(t, 8233, s.uiPort)

	_, err = parseFlags([]string{"-tasks", "-1"}, &strings.Builder{})
	assert.Error(t, err)
	_, err = parseFlags([]string{"extra"}, &strings.Builder{})
	assert.Error(t, err)
}
