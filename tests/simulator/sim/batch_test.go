package sim_test

import (
	"cmp"
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// 2captcha's action=get&ids=: one request, the answers in the IDs' order joined by "|", each a code (no "OK|"), a
// status word, or the error its ID alone would get.
func TestResGetIDsAnswersEachIDInOrder(t *testing.T) {
	h := startSim(t, testConfig())
	solved, solving := h.submit("", url.Values{"sim_solve_ms": {"0"}}), h.submit("", url.Values{"sim_solve_ms": {"60000"}})
	h.waitResult(solved, "OK|"+sim.CodeFor(solved))
	before := h.stats().ResCalls["get"]

	ids := url.Values{"key": {testKey}, "action": {"get"}, "ids": {solved + ",424242," + solving}}
	want := sim.CodeFor(solved) + "|" + sim.ErrorWrongCaptchaID + "|" + sim.CaptchaNotReady
	assert.Equal(t, want, h.call("/res.php", ids))
	ids.Set("json", "1")
	assert.Equal(t, protocolDoc{Status: 1, Request: want}, decodeDoc(t, h.call("/res.php", ids)))

	assert.EqualValues(t, before+2, h.stats().ResCalls["get"], "a batch is one request")
	assert.EqualValues(t, 2, h.task(solving).ResGetCount, "each ID of a batch counts as its task's lookup")
	assert.Equal(t, sim.ErrorWrongUserKey, h.call("/res.php", url.Values{"key": {"x"}, "action": {"get"}, "ids": {solved}}))
}

// The product's client against the simulator: 300 polls of a bare-coded method at once cost a handful of res.php requests, each answer
// reaching its own caller; without batching they cost 300.
func TestClientBatchesPollsAgainstSimulator(t *testing.T) {
	h := startSim(t, testConfig())
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = h.submit("", url.Values{"sim_solve_ms": {"0"}})
	}
	h.waitResult(ids[len(ids)-1], "OK|"+sim.CodeFor(ids[len(ids)-1]))
	for _, batching := range []time.Duration{50 * time.Millisecond, -1} {
		c, err := providers.NewInPHP(h.srv.URL, testKey, providers.WithResultBatching(batching))
		require.NoError(t, err)
		before := h.stats().ResCalls["get"]
		ctx := providers.ForMethod(context.Background(), "userrecaptcha")
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				code, err := c.Get(ctx, id)
				assert.NoError(t, err)
				assert.Equal(t, sim.CodeFor(id), code)
			})
		}
		wg.Wait()
		requests := h.stats().ResCalls["get"] - before
		t.Logf("batching %v: %d polls, %d res.php requests", batching, len(ids), requests)
		if batching < 0 {
			assert.EqualValues(t, len(ids), requests)
		} else {
			assert.LessOrEqual(t, requests, int64(6))
		}
	}
}

// FunCaptcha tokens hold "|", res.php's ids= separator: in a mix, each FunCaptcha poll is its own request with its
// whole token, and the reCAPTCHA polls beside them still share a handful.
func TestClientBatchesAroundFunCaptchaTokens(t *testing.T) {
	h := startSim(t, testConfig())
	methods := map[string]string{}
	for i := range 300 {
		extra := url.Values{"sim_solve_ms": {"0"}}
		if i%3 == 0 {
			extra.Set("method", "funcaptcha")
			extra.Set("publickey", "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC")
		}
		id := h.submit("", extra)
		methods[id] = cmp.Or(extra.Get("method"), "userrecaptcha")
	}
	for id, method := range methods {
		h.waitResult(id, "OK|"+sim.AnswerFor(id, method))
	}
	c, err := providers.NewInPHP(h.srv.URL, testKey, providers.WithResultBatching(50*time.Millisecond))
	require.NoError(t, err)
	before := h.stats().ResCalls["get"]
	var wg sync.WaitGroup
	for id, method := range methods {
		wg.Go(func() {
			code, err := c.Get(providers.ForMethod(context.Background(), method), id)
			assert.NoError(t, err)
			assert.Equal(t, sim.AnswerFor(id, method), code)
		})
	}
	wg.Wait()
	requests := h.stats().ResCalls["get"] - before
	t.Logf("300 polls, a third FunCaptcha: %d res.php requests", requests)
	assert.Contains(t, sim.AnswerFor("1", "funcaptcha"), "|", "a FunCaptcha token holds the separator")
	assert.LessOrEqual(t, requests, int64(100+6))
}
