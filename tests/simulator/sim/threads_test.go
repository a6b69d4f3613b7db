package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

const otherKey = "simulator0dev0key000000000000001"

func threadConfig(threads int) sim.Config {
	cfg := testConfig()
	cfg.Threads = threads
	cfg.APIKeys = []string{testKey, otherKey}
	return cfg
}

func slowSolve() url.Values { return url.Values{"sim_solve_ms": {"10000"}} }

func TestThreadCapRefusesBeyondNAndCountsNoSlotAnswers(t *testing.T) {
	h := startSim(t, threadConfig(3))
	for range 3 {
		h.submit("", slowSolve())
	}
	for range 2 {
		assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("", slowSolve())))
	}
	st := h.stats()
	assert.Equal(t, sim.ThreadStats{Limit: 3, InUse: 3, PeakInUse: 3, NoSlot: 2}, st.Threads)
	assert.EqualValues(t, 3, st.Submissions.Accepted)
	assert.EqualValues(t, 2, st.Submissions.RejectedByCode[sim.ErrorNoSlotAvailable])
	// Refused, not queued: no task was created for the refused requests.
	assert.Len(t, allTasks(h), 3)
}

func TestThreadCapIsPerKey(t *testing.T) {
	h := startSim(t, threadConfig(1))
	h.submit("", slowSolve())
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("", slowSolve())))
	other := recaptchaParams("", slowSolve())
	other.Set("key", otherKey)
	assert.True(t, strings.HasPrefix(h.call("/in.php", other), "OK|"), "another key has threads of its own")
	st := h.stats().Threads
	assert.Equal(t, 2, st.InUse)
	assert.Equal(t, 1, st.PeakInUse)
	assert.EqualValues(t, 1, st.NoSlot)
}

func TestThreadFreesWhenTheTaskIsSolvedOrFoundUnsolvable(t *testing.T) {
	for _, c := range []struct {
		name, fault, want string
	}{
		{"solved", "", "OK|"},
		{"unsolvable", "unsolvable", sim.ErrorCaptchaUnsolvable},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startSim(t, threadConfig(1))
			extra := url.Values{"sim_solve_ms": {"50"}}
			if c.fault != "" {
				extra.Set("sim_fault", c.fault)
			}
			id := h.submit("", extra)
			assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("", slowSolve())))
			require.Eventually(t, func() bool { return strings.HasPrefix(h.result(id), c.want) }, waitFor, pollEvery)
			assert.Equal(t, 0, h.stats().Threads.InUse)
			h.submit("", slowSolve()) // the thread is free again
			assert.EqualValues(t, 1, h.stats().Threads.NoSlot)
		})
	}
}

func TestThreadCapZeroIsUnlimited(t *testing.T) {
	h := startSim(t, threadConfig(0))
	for range 50 {
		h.submit("", slowSolve())
	}
	st := h.stats().Threads
	assert.Equal(t, sim.ThreadStats{Limit: 0, InUse: 50, PeakInUse: 50, NoSlot: 0}, st)
}

// Concurrent submissions never get more than N threads: the check and the claim are one step.
func TestThreadCapHoldsUnderConcurrentSubmissions(t *testing.T) {
	h := startSim(t, threadConfig(4))
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for range 24 {
		wg.Go(func() {
			resp, err := http.Get(h.srv.URL + "/in.php?" + recaptchaParams("", slowSolve()).Encode())
			if !assert.NoError(t, err) {
				return
			}
			body := readOK(t, resp)
			if strings.HasPrefix(body, "OK|") {
				body = "OK"
			}
			mu.Lock()
			answers[body]++
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"OK": 4, sim.ErrorNoSlotAvailable: 20}, answers)
	st := h.stats().Threads
	assert.Equal(t, 4, st.PeakInUse)
	assert.EqualValues(t, 20, st.NoSlot)
}

func TestThreadCapChangesAtRunTime(t *testing.T) {
	h := startSim(t, threadConfig(0))
	h.submit("", slowSolve())
	h.submit("", slowSolve())

	var doc sim.ThreadLimit
	putJSON(t, h.srv.URL+"/_sim/threads", `{"threads":2}`, http.StatusOK, &doc)
	assert.Equal(t, 2, doc.Threads)
	assert.Equal(t, 2, h.sim.Threads())
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("", slowSolve())))
	st := h.stats().Threads
	assert.Equal(t, sim.ThreadStats{Limit: 2, InUse: 2, PeakInUse: 2, NoSlot: 1}, st)

	putJSON(t, h.srv.URL+"/_sim/threads", `{"threads":-1}`, http.StatusBadRequest, nil)
	putJSON(t, h.srv.URL+"/_sim/threads", `{"thread":1}`, http.StatusBadRequest, nil)
	h.getJSON("/_sim/threads", &doc)
	assert.Equal(t, 2, doc.Threads, "a refused document changes nothing")

	require.NoError(t, h.sim.SetThreads(0))
	h.submit("", slowSolve())
}

func TestResetFreesThreadsAndKeepsTheCap(t *testing.T) {
	h := startSim(t, threadConfig(1))
	h.submit("", slowSolve())
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("", slowSolve())))
	h.sim.Reset()
	assert.Equal(t, sim.ThreadStats{Limit: 1}, h.stats().Threads)
	h.submit("", slowSolve())
}

func allTasks(h *harness) []sim.Task {
	h.t.Helper()
	var list sim.TaskList
	h.getJSON("/_sim/tasks", &list)
	return list.Tasks
}

func putJSON(t *testing.T, u, body string, wantStatus int, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewBufferString(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, wantStatus, resp.StatusCode)
	if v != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
}
