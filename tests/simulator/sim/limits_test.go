package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func limitConfig(limit int, window, ban time.Duration, resultRate int) sim.Config {
	cfg := testConfig()
	cfg.APIKeys = []string{testKey, otherKey}
	cfg.SubmitLimit, cfg.SubmitWindow, cfg.SubmitBan, cfg.ResultRate = limit, window, ban, resultRate
	return cfg
}

func TestLimitsAreOffByDefaultAndReadFromTheEnvironment(t *testing.T) {
	cfg := sim.DefaultConfig()
	assert.Zero(t, cfg.SubmitLimit, "no in.php limit unless asked for")
	assert.Zero(t, cfg.ResultRate, "no res.php budget unless asked for")
	assert.Equal(t, 3*time.Second, cfg.SubmitWindow)
	assert.Equal(t, 10*time.Second, cfg.SubmitBan)

	t.Setenv("SIM_SUBMIT_LIMIT", "60")
	t.Setenv("SIM_SUBMIT_WINDOW", "2s")
	t.Setenv("SIM_SUBMIT_BAN", "5s")
	t.Setenv("SIM_RESULT_RATE", "50")
	cfg, err := sim.ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, 60, cfg.SubmitLimit)
	assert.Equal(t, 2*time.Second, cfg.SubmitWindow)
	assert.Equal(t, 5*time.Second, cfg.SubmitBan)
	assert.Equal(t, 50, cfg.ResultRate)

	bad := limitConfig(-1, 0, -time.Second, -1)
	err = bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"submit limit", "submit window", "submit ban", "result rate"} {
		assert.Contains(t, err.Error(), want)
	}
}

// The in.php rule: the (N+1)th request within W answers MAX_USER_TURN and bars the key for B; every in.php request
// during the bar answers MAX_USER_TURN too without extending it; then the key is served again.
func TestSubmitLimitBarsTheKeyForTheBan(t *testing.T) {
	h := startSim(t, limitConfig(5, time.Second, 400*time.Millisecond, 0))
	for range 5 {
		h.submit("", nil)
	}
	barredAt := time.Now()
	assert.Equal(t, sim.MaxUserTurn, h.call("/in.php", recaptchaParams("", nil)), "the 6th within the window")
	other := recaptchaParams("", nil)
	other.Set("key", otherKey)
	assert.True(t, strings.HasPrefix(h.call("/in.php", other), "OK|"), "the bar is per key")

	// Requests during the bar are refused and do not extend it.
	for time.Since(barredAt) < 300*time.Millisecond {
		assert.Equal(t, sim.MaxUserTurn, h.call("/in.php", recaptchaParams("", nil)))
		time.Sleep(20 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		return strings.HasPrefix(h.call("/in.php", recaptchaParams("", nil)), "OK|")
	}, time.Second, 20*time.Millisecond, "served again once the bar has passed")
	assert.Less(t, time.Since(barredAt), 700*time.Millisecond, "the bar was not extended by the requests during it")

	st := h.stats()
	lim := st.Limits
	assert.EqualValues(t, 1, lim.Bans)
	assert.Positive(t, lim.SubmitRefused)
	assert.Equal(t, lim.SubmitRefused, st.Submissions.RejectedByCode[sim.MaxUserTurn], "refusals are rejections too")
	assert.EqualValues(t, 5+1+1, st.Submissions.Accepted)
	assert.Equal(t, lim.SubmitRequests, st.Submissions.Accepted+lim.SubmitRefused)
	assert.GreaterOrEqual(t, lim.PeakSubmitsInWindow, 6, "the peak counts every request of one key within a window, refused ones too")
}

// The stricter reading: requests during the bar count towards the window, so hammering through it renews the bar.
func TestSubmitCountBarredRenewsTheBar(t *testing.T) {
	cfg := limitConfig(3, 300*time.Millisecond, 200*time.Millisecond, 0)
	cfg.SubmitCountBarred = true
	h := startSim(t, cfg)
	for range 3 {
		h.submit("", nil)
	}
	barredAt := time.Now()
	for time.Since(barredAt) < 600*time.Millisecond {
		assert.Equal(t, sim.MaxUserTurn, h.call("/in.php", recaptchaParams("", nil)), "renewed while the client keeps sending")
		time.Sleep(20 * time.Millisecond)
	}
	assert.Greater(t, h.stats().Limits.Bans, int64(1))
	time.Sleep(350 * time.Millisecond) // the window empties, then the bar ends
	require.Eventually(t, func() bool {
		return strings.HasPrefix(h.call("/in.php", recaptchaParams("", nil)), "OK|")
	}, time.Second, 100*time.Millisecond, "served again once the client paused")
}

func TestSubmitLimitIsASlidingWindow(t *testing.T) {
	h := startSim(t, limitConfig(4, 300*time.Millisecond, time.Second, 0))
	for range 4 {
		h.submit("", nil)
	}
	time.Sleep(350 * time.Millisecond)
	for range 4 {
		h.submit("", nil) // the first four have left the window
	}
	st := h.stats().Limits
	assert.Zero(t, st.SubmitRefused)
	assert.Equal(t, 4, st.PeakSubmitsInWindow)
	assert.EqualValues(t, 8, st.SubmitRequests)
}

// The peak is measured with the rule off too: it is what a test reads to see whether a client kept to a limit.
func TestPeakIsMeasuredWithTheRuleOff(t *testing.T) {
	h := startSim(t, limitConfig(0, time.Second, time.Second, 0))
	for range 9 {
		h.submit("", nil)
	}
	st := h.stats().Limits
	assert.Equal(t, 9, st.PeakSubmitsInWindow)
	assert.Zero(t, st.SubmitRefused)
}

func TestResultRateRefusesBeyondTheBudget(t *testing.T) {
	h := startSim(t, limitConfig(0, time.Second, time.Second, 5))
	id := h.submit("", url.Values{"sim_solve_ms": {"10000"}})
	var answers []string
	for range 8 {
		answers = append(answers, h.result(id))
	}
	assert.Equal(t, []string{sim.CaptchaNotReady, sim.CaptchaNotReady, sim.CaptchaNotReady, sim.CaptchaNotReady, sim.CaptchaNotReady,
		sim.ErrorTooMuchRequests, sim.ErrorTooMuchRequests, sim.ErrorTooMuchRequests}, answers)
	// getbalance is not a result request.
	assert.NotEqual(t, sim.ErrorTooMuchRequests, h.call("/res.php", url.Values{"key": {testKey}, "action": {"getbalance"}}))
	// Another key has a budget of its own.
	assert.Equal(t, sim.ErrorWrongCaptchaID, h.call("/res.php", url.Values{"key": {otherKey}, "action": {"get"}, "id": {id}}))
	time.Sleep(1050 * time.Millisecond)
	assert.Equal(t, sim.CaptchaNotReady, h.result(id), "the window slid on")

	st := h.stats()
	assert.EqualValues(t, 3, st.Limits.ResultRefused)
	assert.EqualValues(t, 10, st.Limits.ResultRequests)
	assert.Equal(t, 8, st.Limits.PeakResultsPerSecond, "refused requests included")
	assert.EqualValues(t, 10, st.ResCalls["get"], "refused result requests are res.php calls too")
	assert.EqualValues(t, 6, h.task(id).ResGetCount, "a refused request does not reach its task")
}

func TestLimitsControlAPI(t *testing.T) {
	h := startSim(t, limitConfig(0, 3*time.Second, 10*time.Second, 0))
	var doc sim.LimitsDoc
	h.getJSON("/_sim/limits", &doc)
	assert.Equal(t, sim.LimitsDoc{SubmitLimit: 0, SubmitWindowMS: 3000, SubmitBanMS: 10000, ResultRate: 0}, doc)

	put := func(body string) (int, string) {
		req, err := http.NewRequest(http.MethodPut, h.srv.URL+"/_sim/limits", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var raw json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
		return resp.StatusCode, string(raw)
	}
	status, body := put(`{"submit_limit":2,"submit_window_ms":1000,"submit_ban_ms":200,"result_rate":1}`)
	require.Equal(t, http.StatusOK, status, body)
	h.submit("", nil)
	h.submit("", nil)
	assert.Equal(t, sim.MaxUserTurn, h.call("/in.php", recaptchaParams("", nil)))
	status, body = put(`{"submit_limit":-1,"submit_window_ms":1000}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	status, _ = put(`{"submit_limit":1,"bogus":1}`)
	assert.Equal(t, http.StatusBadRequest, status)

	// A change starts afresh: the bar is lifted and the counters restart.
	status, body = put(`{"submit_limit":2,"submit_window_ms":1000,"submit_ban_ms":200}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, sim.LimitStats{SubmitLimit: 2, SubmitWindowMS: 1000, SubmitBanMS: 200}, h.stats().Limits)
	h.submit("", nil)
	assert.EqualValues(t, 1, h.stats().Limits.SubmitRequests)
	// /_sim/reset forgets the counters but keeps the limits.
	resp, err := http.Post(h.srv.URL+"/_sim/reset", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, sim.LimitStats{SubmitLimit: 2, SubmitWindowMS: 1000, SubmitBanMS: 200}, h.stats().Limits)
}

// createTask: the same two rules, answered with each flavor's documented rate-limit refusal.
func TestCreateTaskLimitsPerFlavor(t *testing.T) {
	for _, c := range []struct {
		flavor              providers.Flavor
		submitCode, getCode string
		submitHTTP, getHTTP int
	}{
		{callback.AntiCaptcha, sim.ErrorTooMuchRequests, sim.ErrorTooMuchRequests, http.StatusTooManyRequests, http.StatusTooManyRequests},
		{callback.TwoCaptcha, sim.MaxUserTurn, sim.ErrorTooMuchRequests, http.StatusOK, http.StatusOK},
		// CapMonster's getTaskResult refusal is one task's polls: the client reads it as that task not ready yet.
		{callback.CapMonster, sim.ErrorTooMuchRequests, callback.CodeNotReady, http.StatusOK, http.StatusOK},
		{callback.CapSolver, sim.ErrorRateLimit, sim.ErrorRateLimit, http.StatusBadRequest, http.StatusBadRequest},
	} {
		t.Run(string(c.flavor), func(t *testing.T) {
			cfg := ctConfig(c.flavor)
			cfg.SubmitLimit, cfg.SubmitWindow, cfg.SubmitBan, cfg.ResultRate = 1, time.Second, time.Second, 1
			cfg.SolveMin, cfg.SolveMax = 5*time.Second, 5*time.Second
			h := startSim(t, cfg)
			cl := ctClient(t, h, c.flavor)
			in := kindInputs[servedKind(t, c.flavor)]
			id, _, err := cl.Submit(context.Background(), in.method, in.params, "")
			require.NoError(t, err)
			_, _, err = cl.Submit(context.Background(), in.method, in.params, "")
			assert.Equal(t, c.submitCode, codeOf(err))
			assert.Equal(t, c.submitHTTP, httpStatusOf(err))
			assert.Equal(t, callback.ClassTransient, providers.ClassOf(err), "a rate refusal is retried")

			_, err = cl.Get(context.Background(), id)
			assert.Equal(t, callback.CodeNotReady, codeOf(err))
			_, err = cl.Get(context.Background(), id)
			assert.Equal(t, c.getCode, codeOf(err))
			assert.Equal(t, c.getHTTP, httpStatusOf(err))
			st := h.stats().Limits
			assert.EqualValues(t, 1, st.SubmitRefused)
			assert.EqualValues(t, 1, st.ResultRefused)
		})
	}
}

func httpStatusOf(err error) int {
	var ce *providers.Error
	if !errors.As(err, &ce) || ce.HTTPStatus == 0 {
		return http.StatusOK
	}
	return ce.HTTPStatus
}

// servedKind is a kind the flavor takes.
func servedKind(t *testing.T, flavor providers.Flavor) providers.Kind {
	t.Helper()
	for _, kind := range providers.Kinds {
		in := kindInputs[kind]
		if _, ok := providers.TaskFor(flavor, kind); ok && providers.Supports(flavor, in.method, in.params) == nil {
			return kind
		}
	}
	t.Fatalf("%s takes no kind", flavor)
	return ""
}
