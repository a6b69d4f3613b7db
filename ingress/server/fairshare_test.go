package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/internal/config"
)

// floodShare sends, over one minute of a test clock, `flooders` clients' untokened callbacks at floodRate each and the
// provider's own at providerRate, interleaved in time, and returns how many of the provider's were admitted (not
// 429) out of how many it sent. providerPhase shifts the provider's callbacks by that many 10 ms ticks: at 0 they
// come in the same instant as a flooder's, just after it (the flooder that times its requests to win the race), at
// 8 in ticks of their own (the flooders use residues 0 and 5–9 of ten).
func floodShare(t *testing.T, e *testEnv, flooders int, floodRate, providerRate float64, providerPhase int) (admitted, sent int) {
	t.Helper()
	clock := useTestClock(e)
	const tick = 10 * time.Millisecond
	due := func(rate float64, step int) bool {
		every := int(time.Second / tick / time.Duration(rate))
		return every > 0 && step%every == 0
	}
	for step := range int(time.Minute / tick) {
		for f := range flooders {
			if due(floodRate, step+f) { // offset, so the flooders are not in lockstep
				rec := e.getFrom(t, fmt.Sprintf("/callback?id=%d&code=flood", 8_000_000+step*10+f),
					fmt.Sprintf("203.0.113.%d:4000", 10+f), nil)
				require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, rec.Code, rec.Body.String())
			}
		}
		if due(providerRate, step+providerPhase) {
			sent++
			rec := e.getFrom(t, fmt.Sprintf("/callback?id=%d&code=real", 7_300_000_000+step), "198.51.100.7:443", nil)
			require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, rec.Code, rec.Body.String())
			if rec.Code == http.StatusOK {
				admitted++
			}
		}
		clock.advance(tick)
	}
	return admitted, sent
}

// shippedLimits gives e's server the shipped untokened limits, with a queue big enough that only the rate decides.
func shippedLimits(t *testing.T) func(*config.Ingress) {
	t.Setenv("CALLBACK_SECRET", testSecret)
	defaults, err := config.LoadIngress()
	require.NoError(t, err)
	return func(c *config.Ingress) {
		c.UntokenedRate, c.UntokenedRatePerIP = defaults.UntokenedRate, defaults.UntokenedRatePerIP
		c.UntokenedQueue, c.UntokenedWorkers = 100_000, 8
	}
}

// TestSixFloodingClientsDoNotStarveTheProvider (#15 §3c): six clients flooding untokened callbacks, at the
// per-client cap (10/s) or far over it (100/s), and the provider's own, for a minute of a test clock, with the
// shipped limits (50/s in all, 10/s per client). Each active source gets a fair share of the global budget, so the
// provider keeps a seventh of it (≈ 7.1/s) however the requests are timed. Before the fair share, who got the
// global budget's tokens was decided by timing: with flooders whose requests land just before the provider's, the
// provider got 8 %, 11 % and 15 % of its callbacks admitted at 10, 5 and 1 per second, and 1 of 300 against
// flooders at 100/s; with its callbacks in instants of their own, all of them (so a provider above its share, at
// 10/s, now gets 71–75 % during such a flood instead of what timing gave it).
func TestSixFloodingClientsDoNotStarveTheProvider(t *testing.T) {
	for _, tc := range []struct {
		floodRate, providerRate float64
		wantShare               float64 // at least, whatever the phase
	}{
		// Under its share the provider gets all of it, but for one callback at the start while the flooders' first
		// bursts (the per-client burst each) drain the global one.
		{floodRate: 10, providerRate: 10, wantShare: 0.7}, // its fair share: 50/7 ≈ 7.1 of 10 per second
		{floodRate: 10, providerRate: 5, wantShare: 0.99},
		{floodRate: 10, providerRate: 1, wantShare: 0.98},
		{floodRate: 100, providerRate: 5, wantShare: 0.99},
	} {
		for _, phase := range []int{0, 8} {
			t.Run(fmt.Sprintf("flood %g per s, provider %g per s, phase %d", tc.floodRate, tc.providerRate, phase), func(t *testing.T) {
				e := newTestEnv(t, shippedLimits(t))
				findsWaitingTask(e)
				admitted, sent := floodShare(t, e, 6, tc.floodRate, tc.providerRate, phase)
				share := float64(admitted) / float64(sent)
				t.Logf("six clients at %g/s + the provider at %g/s (phase %d) for a minute: provider %d of %d admitted (%.0f%%)",
					tc.floodRate, tc.providerRate, phase, admitted, sent, 100*share)
				assert.GreaterOrEqual(t, share, tc.wantShare)
			})
		}
	}
}

// TestFairShareFollowsTheActiveSources: the share is the global rate over the sources seen within
// activeSourceWindow, capped by the per-client rate; a source that went quiet stops counting.
func TestFairShareFollowsTheActiveSources(t *testing.T) {
	l := newClientRateLimit(50, 10)
	now := time.Now()
	assert.EqualValues(t, 10, l.limiterFor("198.51.100.7", now).Limit(), "alone: the per-client cap")
	for i := range 9 {
		l.allow(fmt.Sprintf("203.0.113.%d", i), now)
	}
	assert.Equal(t, 10, l.activeSources(now))
	assert.EqualValues(t, 5, l.limiterFor("198.51.100.7", now).Limit(), "ten sources share 50/s")

	later := now.Add(activeSourceWindow - time.Second)
	assert.EqualValues(t, 5, l.limiterFor("198.51.100.7", later).Limit(), "the others are still active")
	later = now.Add(activeSourceWindow + time.Second)
	assert.Equal(t, 1, l.activeSources(later), "the quiet ones no longer count")
	assert.EqualValues(t, 10, l.limiterFor("198.51.100.7", later).Limit())
}

// activeSources is how many client networks count toward the fair share at now.
func (l *clientRateLimit) activeSources(now time.Time) int {
	l.clients.mu.Lock()
	defer l.clients.mu.Unlock()
	return l.clients.keys.live(now)
}
