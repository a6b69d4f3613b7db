package sim_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// listTasks returns every task the simulator knows.
func (h *harness) listTasks() []sim.Task {
	h.t.Helper()
	var list sim.TaskList
	h.getJSON("/_sim/tasks", &list)
	return list.Tasks
}

// submit_lost: the task is created (and solved and called back) but in.php's answer never comes; the next
// submission for the same pingback URL is answered.
func TestSubmitLostCreatesTheTaskAndDropsTheAnswer(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	params := recaptchaParams(rc.url("wf-lost"), fault("submit_lost"))

	resp, err := http.PostForm(h.srv.URL+"/in.php", params)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err, "the connection closes without an answer")

	tasks := h.listTasks()
	require.Len(t, tasks, 1, "the task exists all the same")
	lost := tasks[0]
	assert.Contains(t, lost.Faults, sim.FaultSubmitLost)
	require.Eventually(t, func() bool { return rc.count() == 1 }, waitFor, pollEvery, "its pingback still comes")
	assert.Equal(t, lost.ID, rc.received()[0].Get("id"))
	assert.Equal(t, sim.CodeFor(lost.ID), rc.received()[0].Get("code"))

	id, ok := cutOK(h.call("/in.php", params))
	require.True(t, ok, "the resubmission is answered")
	assert.NotEqual(t, lost.ID, id)
	st := h.stats().Submissions
	assert.EqualValues(t, 2, st.Accepted)
	assert.EqualValues(t, 1, st.AnswersLost)
}

// submit_stall_ms holds the answer: a client with a shorter timeout gives up (the task exists), a patient one gets it.
func TestSubmitStallHoldsTheAnswer(t *testing.T) {
	h := startSim(t, testConfig())
	params := recaptchaParams("http://127.0.0.1:1/callback/wf-stall", fault("submit_stall_ms=400"))

	impatient := &http.Client{Timeout: 100 * time.Millisecond}
	_, err := impatient.PostForm(h.srv.URL+"/in.php", params)
	require.Error(t, err, "timed out before the answer")
	require.Len(t, h.listTasks(), 1)

	start := time.Now()
	body := h.call("/in.php", params)
	assert.True(t, strings.HasPrefix(body, "OK|"), body)
	assert.Less(t, time.Since(start), 300*time.Millisecond, "only the first submission stalls")

	// With submit_lost the stall ends in a lost answer.
	params = recaptchaParams("http://127.0.0.1:1/callback/wf-stall-lost", fault("submit_lost,submit_stall_ms=100"))
	start = time.Now()
	// POST, as captchaflow submits: net/http retries a GET (idempotent) whose reused connection closed unanswered.
	_, err = http.PostForm(h.srv.URL+"/in.php", params)
	require.Error(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	st := h.stats().Submissions
	assert.EqualValues(t, 3, st.Accepted)
	assert.EqualValues(t, 1, st.AnswersLost)
	assert.EqualValues(t, 2, st.AnswersStalled)
}

func TestParseFaultSpecAnswerFaults(t *testing.T) {
	spec, err := sim.ParseFaultSpec("submit_lost=2,submit_stall_ms=1500")
	require.NoError(t, err)
	assert.Equal(t, sim.FaultSpec{SubmitLost: 2, SubmitStallMS: 1500}, spec)
	for _, bad := range []string{"submit_stall_ms", "submit_stall_ms=0", "submit_lost=x"} {
		_, err := sim.ParseFaultSpec(bad)
		assert.Error(t, err, bad)
	}
	// By rule, as the e2e tests use it.
	cfg := testConfig()
	cfg.FaultRules = "/callback/rule-lost-=>submit_lost"
	h := startSim(t, cfg)
	_, err = http.PostForm(h.srv.URL+"/in.php", recaptchaParams("http://127.0.0.1:1/callback/rule-lost-1", url.Values{}))
	require.Error(t, err)
	assert.EqualValues(t, 1, h.stats().Submissions.AnswersLost)
}

// submit_gateway_error=502: the task is created (and solved and called back), then in.php answers the gateway's 502
// page instead of its id; the next submission for the same pingback URL is answered.
func TestSubmitGatewayErrorCreatesTheTaskAndAnswers5xx(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	params := recaptchaParams(rc.url("wf-gateway"), fault("submit_gateway_error=502"))

	resp, err := http.PostForm(h.srv.URL+"/in.php", params)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Contains(t, string(body), "<html>", "a gateway's page, not an in.php answer")

	tasks := h.listTasks()
	require.Len(t, tasks, 1, "the task exists all the same")
	assert.Contains(t, tasks[0].Faults, sim.FaultSubmitGatewayError)
	require.Eventually(t, func() bool { return rc.count() == 1 }, waitFor, pollEvery, "its pingback still comes")
	assert.Equal(t, tasks[0].ID, rc.received()[0].Get("id"))

	id, ok := cutOK(h.call("/in.php", params))
	require.True(t, ok, "the resubmission is answered")
	assert.NotEqual(t, tasks[0].ID, id)
	st := h.stats().Submissions
	assert.EqualValues(t, 2, st.Accepted)
	assert.EqualValues(t, 1, st.AnswersGatewayError)
	assert.Zero(t, st.AnswersLost)
}

func TestSubmitGatewayErrorWantsA5xx(t *testing.T) {
	for _, bad := range []string{"submit_gateway_error", "submit_gateway_error=404", "submit_gateway_error=600", "submit_gateway_error=x"} {
		_, err := sim.ParseFaultSpec(bad)
		assert.Error(t, err, bad)
	}
	spec, err := sim.ParseFaultSpec("submit_gateway_error=524")
	require.NoError(t, err)
	assert.Equal(t, 524, spec.SubmitGatewayStatus)
}
