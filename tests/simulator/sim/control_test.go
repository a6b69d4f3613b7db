package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestHealthz(t *testing.T) {
	h := startSim(t, testConfig())
	assert.JSONEq(t, `{"status":"ok"}`, h.call("/healthz", nil))
}

func TestTaskListingFiltersByPingbackPath(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	a1 := h.submit(rc.url("chaos-a"), url.Values{"sim_fault": {"drop_pingback"}})
	a2 := h.submit(rc.url("chaos-a"), nil)
	b := h.submit(rc.url("chaos-b"), nil)
	h.submit("", nil)

	var list sim.TaskList
	h.getJSON("/_sim/tasks?pingback_path=/callback/chaos-a", &list)
	require.Len(t, list.Tasks, 2)
	assert.Equal(t, []string{a1, a2}, []string{list.Tasks[0].ID, list.Tasks[1].ID})
	assert.Equal(t, "userrecaptcha", list.Tasks[0].Method)
	assert.False(t, list.Tasks[0].SubmittedAt.IsZero())

	h.getJSON("/_sim/tasks?pingback_path_prefix=/callback/chaos-", &list)
	assert.Len(t, list.Tasks, 3)
	assert.Equal(t, b, list.Tasks[2].ID)

	h.getJSON("/_sim/tasks", &list)
	assert.Len(t, list.Tasks, 4)
}

func TestResetClearsTasksAndCountersButNotIDs(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	before := h.submit(rc.url("wf-reset"), url.Values{"sim_solve_ms": {"5000"}})
	h.call("/in.php", url.Values{"key": {"bad"}})
	h.result(before)

	resp, err := http.Post(h.srv.URL+"/_sim/reset", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	st := h.stats()
	assert.Zero(t, st.Submissions.Accepted)
	assert.Zero(t, st.Submissions.Rejected)
	assert.Empty(t, st.ResCalls)
	assert.Empty(t, st.Tasks)
	assert.Equal(t, sim.ErrorWrongCaptchaID, h.result(before))

	after := h.submit("", nil)
	assert.Greater(t, after, before, "ids keep increasing so stale clients never read a new task")
}

func TestThousandsOfConcurrentTasksAllDeliver(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const tasks = 2000
	cfg := testConfig()
	cfg.SolveMin, cfg.SolveMax = 0, 200*time.Millisecond
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)

	var wg sync.WaitGroup
	ids := make(chan string, tasks)
	sem := make(chan struct{}, 32)
	for i := range tasks {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			resp, err := http.Get(h.srv.URL + "/in.php?" + recaptchaParams(rc.url(fmt.Sprintf("wf-%d", i)), nil).Encode())
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			id, ok := cutOK(string(body))
			assert.True(t, ok, string(body))
			ids <- id
		})
	}
	wg.Wait()
	close(ids)
	unique := map[string]bool{}
	for id := range ids {
		unique[id] = true
	}
	assert.Len(t, unique, tasks)
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Succeeded == tasks }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, tasks, rc.count())
}
