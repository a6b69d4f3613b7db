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
	"github.com/captchaflow/captchaflow/devstack/downstream"
	"github.com/captchaflow/captchaflow/simulator/sim"
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
	assert.Len(t, seenScenarios, len(scenarioOrder()), "a batch of 10 shows every scenario")
	assert.Equal(t, "demo-20260101-000000-001", tasks[0].ID)
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

func TestSummaryShowsLostZeroOnlyWithAnAudit(t *testing.T) {
	base := summary{
		Elapsed:    42 * time.Second,
		Total:      tally{Total: 2, Callback: 1, Poll: 1},
		ByScenario: map[string]tally{"none": {Total: 1, Callback: 1}, "dropped pingback": {Total: 1, Poll: 1}},
		Receiver:   downstream.Stats{Accepted: 2},
	}

	withAudit := base
	withAudit.Audit = &audit{Solved: 2}
	var out strings.Builder
	writeSummary(&out, withAudit)
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
