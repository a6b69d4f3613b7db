package sim_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestPingbackCarriesIDAndCodeAndKeepsTheQuery(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	id := h.submit(rc.url("wf-1"), nil)

	require.Eventually(t, func() bool { return rc.count() == 1 }, waitFor, pollEvery)
	got := rc.received()[0]
	assert.Equal(t, id, got.Get("id"))
	assert.Equal(t, sim.CodeFor(id), got.Get("code"))
	assert.Equal(t, "secret-token-wf-1", got.Get("t"), "the pingback URL's own query survives")
	assert.Equal(t, []string{"/callback/wf-1"}, rc.paths)

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Succeeded == 1 }, waitFor, pollEvery)
	task := h.task(id)
	assert.Equal(t, sim.StatusSolved, task.Status)
	assert.Equal(t, "/callback/wf-1", task.PingbackPath)
	assert.NotContains(t, task.PingbackURL, "secret-token", "the token is redacted in the listing")
	require.Len(t, task.Pingbacks, 1)
	assert.Equal(t, sim.PingbackFirst, task.Pingbacks[0].Kind)
	assert.Equal(t, sim.OutcomeSucceeded, task.Pingbacks[0].Outcome)
	assert.Equal(t, http.StatusOK, task.Pingbacks[0].HTTPStatus)
	assert.Equal(t, sim.PingbackStats{Sent: 1, Succeeded: 1}, h.stats().Pingbacks)
}

func TestFailedPingbacksAreCountedAndNotRetried(t *testing.T) {
	h := startSim(t, testConfig())
	rejecting := startReceiver(t, http.StatusInternalServerError)
	id := h.submit(rejecting.url("wf-500"), nil)

	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL + "/callback/wf-gone?t=secret-token"
	gone.Close()
	goneID := h.submit(goneURL, nil)

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Failed == 2 }, waitFor, pollEvery)
	assert.Equal(t, 1, rejecting.count())
	assert.Equal(t, "OK|"+sim.CodeFor(id), h.result(id), "res.php still has the code")

	failed := h.task(goneID).Pingbacks
	require.Len(t, failed, 1)
	assert.Equal(t, sim.OutcomeFailed, failed[0].Outcome)
	assert.NotEmpty(t, failed[0].Error)
	assert.NotContains(t, failed[0].Error, "secret-token", "errors never carry the URL")
	assert.Equal(t, http.StatusInternalServerError, h.task(id).Pingbacks[0].HTTPStatus)
	assert.Equal(t, sim.PingbackStats{Sent: 2, Failed: 2}, h.stats().Pingbacks)
}

func TestSlowPingbackTargetTimesOut(t *testing.T) {
	cfg := testConfig()
	cfg.PingbackTimeout = 100 * time.Millisecond
	h := startSim(t, cfg)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	id := h.submit(slow.URL+"/callback/wf-slow", nil)

	require.Eventually(t, func() bool { return h.stats().Pingbacks.Failed == 1 }, waitFor, pollEvery)
	attempt := h.task(id).Pingbacks[0]
	assert.Equal(t, sim.OutcomeFailed, attempt.Outcome)
	assert.Less(t, attempt.DurationMS, int64(1000))
}

func TestCloseIsBoundedWhilePingbacksAreInFlight(t *testing.T) {
	cfg := testConfig()
	cfg.HangFor = time.Minute
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	var opened atomic.Int32
	target := httptest.NewUnstartedServer(http.NotFoundHandler())
	target.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			opened.Add(1)
		}
	}
	target.Start()
	t.Cleanup(target.Close)

	h := &harness{t: t, sim: s, srv: srv}
	h.submit(target.URL+"/callback/wf-hang", url.Values{"sim_fault": {"hang_pingback"}, "sim_solve_ms": {"0"}})
	h.submit("", url.Values{"sim_solve_ms": {"60000"}})
	require.Eventually(t, func() bool { return opened.Load() == 1 }, waitFor, pollEvery)

	start := time.Now()
	s.Close()
	assert.Less(t, time.Since(start), cfg.CloseTimeout, "close aborts the stalled connection instead of waiting HangFor")
	s.Close() // idempotent
}
