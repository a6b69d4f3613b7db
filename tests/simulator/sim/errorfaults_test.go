package sim_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestUnsolvablePingbackCallsBackWithTheErrorCode(t *testing.T) {
	h := startSim(t, testConfig())
	rc := startReceiver(t, http.StatusOK)
	pingback := rc.url("wf-unsolvable-pingback")

	first := h.submit(pingback, fault("unsolvable_pingback"))
	h.waitResult(first, sim.ErrorCaptchaUnsolvable)
	// The simulator records the attempt after the receiver has answered it.
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Succeeded == 1 }, waitFor, pollEvery)
	got := rc.received()[0]
	assert.Equal(t, first, got.Get("id"))
	assert.Equal(t, sim.ErrorCaptchaUnsolvable, got.Get("code"), "2captcha-style: the pingback carries the error code")
	assert.Equal(t, "secret-token-wf-unsolvable-pingback", got.Get("t"), "the pingback URL's own query is kept")
	task := h.task(first)
	assert.Equal(t, sim.StatusUnsolvable, task.Status)
	assert.Equal(t, []string{sim.FaultUnsolvablePingback}, task.Faults)
	require.Len(t, task.Pingbacks, 1)
	assert.Equal(t, sim.OutcomeSucceeded, task.Pingbacks[0].Outcome)

	// The resubmission under the same pingback URL is solved, and calls back with its code.
	second := h.submit(pingback, fault("unsolvable_pingback"))
	h.waitResult(second, "OK|"+sim.CodeFor(second))
	require.Eventually(t, func() bool { return h.stats().Pingbacks.Succeeded == 2 }, waitFor, pollEvery)
	assert.Equal(t, sim.CodeFor(second), rc.received()[1].Get("code"))
}

func TestUnsolvableSendsNoPingbackByDefault(t *testing.T) {
	cfg := testConfig()
	require.False(t, cfg.UnsolvablePingback, "off unless asked for")
	cfg.UnsolvableRate = 1
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)
	drawn := h.submit(rc.url("wf-drawn"), nil)
	byFault := h.submit(rc.url("wf-fault"), fault("unsolvable"))
	h.waitResult(drawn, sim.ErrorCaptchaUnsolvable)
	h.waitResult(byFault, sim.ErrorCaptchaUnsolvable)
	assert.Zero(t, rc.count())
	assert.Zero(t, h.stats().Pingbacks.Sent)
}

func TestUnsolvablePingbackPerRun(t *testing.T) {
	cfg := testConfig()
	cfg.UnsolvablePingback = true // SIM_UNSOLVABLE_PINGBACK=true
	cfg.UnsolvableRate = 1
	h := startSim(t, cfg)
	rc := startReceiver(t, http.StatusOK)
	drawn := h.submit(rc.url("wf-drawn"), nil)
	byFault := h.submit(rc.url("wf-fault"), fault("unsolvable"))
	require.Eventually(t, func() bool { return rc.count() == 2 }, waitFor, pollEvery)
	for _, got := range rc.received() {
		assert.Equal(t, sim.ErrorCaptchaUnsolvable, got.Get("code"))
		assert.Contains(t, []string{drawn, byFault}, got.Get("id"))
	}
	assert.Equal(t, []string{sim.FaultUnsolvablePingback}, h.task(drawn).Faults)
}

func TestSubmitErrorAnswersEachClassOnDemand(t *testing.T) {
	h := startSim(t, testConfig())
	for _, c := range []struct{ spec, want string }{
		{"submit_error=transient", sim.ErrorNoSlotAvailable},
		{"submit_error=resubmit", sim.ErrorCaptchaUnsolvable},
		{"submit_error=config", sim.ErrorWrongUserKey},
		{"submit_error=unknown", sim.ErrorSimulatedUnknown},
		{"submit_error=ERROR_PAGEURL", sim.ErrorPageURL},
		{"submit_error=ERROR_ZERO_BALANCE", sim.ErrorZeroBalance},
	} {
		t.Run(c.spec, func(t *testing.T) {
			params := recaptchaParams("http://127.0.0.1:1/callback/wf-"+c.want+"?t=x", fault(c.spec))
			assert.Equal(t, c.want, h.call("/in.php", params), "plain text")
			params.Set("json", "1")
			var doc struct {
				Status    int    `json:"status"`
				Request   string `json:"request"`
				ErrorText string `json:"error_text"`
			}
			require.NoError(t, json.Unmarshal([]byte(h.call("/in.php", recaptchaParams("http://127.0.0.1:1/callback/wf-json-"+c.want, url.Values{
				"sim_fault": {c.spec}, "json": {"1"},
			}))), &doc))
			assert.Equal(t, 0, doc.Status)
			assert.Equal(t, c.want, doc.Request)

			params.Del("json")
			_, ok := cutOK(h.call("/in.php", params))
			assert.True(t, ok, "submit_error alone rejects the first submission of a pingback URL only")
		})
	}
	assert.EqualValues(t, 2, h.stats().Submissions.RejectedByCode[sim.ErrorWrongUserKey])
	assert.EqualValues(t, 2, h.stats().Submissions.RejectedByCode[sim.ErrorSimulatedUnknown])
}

func TestSubmitErrorWithFailSubmitCount(t *testing.T) {
	cfg := testConfig()
	cfg.FaultRules = "/callback/config-=>submit_error=config,fail_submit=2"
	h := startSim(t, cfg)
	params := recaptchaParams("http://127.0.0.1:1/callback/config-1", nil)
	assert.Equal(t, sim.ErrorWrongUserKey, h.call("/in.php", params))
	assert.Equal(t, sim.ErrorWrongUserKey, h.call("/in.php", params))
	_, ok := cutOK(h.call("/in.php", params))
	assert.True(t, ok, "the third submission is accepted")

	// Without submit_error, fail_submit keeps answering ERROR_NO_SLOT_AVAILABLE.
	assert.Equal(t, sim.ErrorNoSlotAvailable, h.call("/in.php", recaptchaParams("http://127.0.0.1:1/callback/busy", fault("fail_submit"))))
}

func TestParseFaultSpecErrorClassesAndUnsolvablePingback(t *testing.T) {
	spec, err := sim.ParseFaultSpec("unsolvable_pingback=2, submit_error=config")
	require.NoError(t, err)
	assert.Equal(t, sim.FaultSpec{Unsolvable: 2, UnsolvablePingback: true, FailSubmit: 1, SubmitError: sim.ErrorWrongUserKey}, spec)

	spec, err = sim.ParseFaultSpec("submit_error=ERROR_BAD_DUPLICATES,fail_submit=3")
	require.NoError(t, err)
	assert.Equal(t, sim.FaultSpec{FailSubmit: 3, SubmitError: "ERROR_BAD_DUPLICATES"}, spec)

	for _, bad := range []string{"submit_error", "submit_error=", "submit_error=nope", "submit_error=error_lower",
		"submit_error=ERROR WITH SPACE", "unsolvable_pingback=0", "unsolvable_pingback=x"} {
		_, err := sim.ParseFaultSpec(bad)
		assert.Error(t, err, bad)
	}
	_, err = sim.ParseFaultRules("x=>submit_error=bogus")
	assert.Error(t, err)
}
