package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
)

// sendEvery GETs target(i) from c every period until ctx ends, and counts the answers by status.
func sendEvery(ctx context.Context, c *http.Client, period time.Duration, target func(i int) string) map[int]int {
	counts := map[int]int{}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 0; ; i++ {
		status, _, err := getStatus(ctx, c, target(i))
		switch {
		case err != nil && ctx.Err() != nil:
			return counts // cut off by the end of the flood, not answered
		case err != nil:
			status = 0
		}
		counts[status]++
		select {
		case <-ctx.Done():
			return counts
		case <-tick.C:
		}
	}
}

// TestE2E_SixClientUntokenedFlood (#15 §3c): six clients send forged untokened callbacks as fast as the per-client
// cap lets them through (asking 200/s each, to take all of the 10/s it allows) to the real ingress, with its shipped
// limits (50/s in all), while the provider sends its own at 5/s from another address — some for tasks that wait for
// them (probe workflows with the untokened update's handler), the rest for tasks that are already done. Each active
// source gets a fair share (50/7 ≈ 7/s), so the provider's callbacks are admitted and every waiting task gets its
// hint, whatever the timing. (Before the fair share the outcome was left to timing: here, where the provider's
// requests land between the flooders' bursts, 94–97 % were admitted; TestSixFloodingClientsDoNotStarveTheProvider
// shows 0–15 % where they land just after a flooder's.)
func TestE2E_SixClientUntokenedFlood(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	queue := startProbeWorker(t, s)
	base := time.Now().UnixNano() % 1_000_000_000
	const waiting = 5
	var ins []probeInput
	for i := range waiting {
		ins = append(ins, probeInput{ProviderTaskID: fmt.Sprint(9_200_000_000 + base*10 + int64(i)),
			Phase: captchaflow.PhaseAwaitingCallback, HandleUpdate: true})
	}
	probes := startProbes(ctx, t, s, queue, ins...)
	untokenedTotal := func() float64 {
		text, err := scrape(ctx, s.ingressMetricsURL()+"/metrics")
		require.NoError(t, err)
		v, _ := metricSum(text, "captchaflow_ingress_requests_total", map[string]string{"url": "/callback"})
		return v
	}
	before := untokenedTotal()

	const (
		floodFor     = 20 * time.Second
		floodSenders = 2                     // per client
		floodPeriod  = 10 * time.Millisecond // each sender asks 100/s: a client takes all the per-client cap allows
	)
	fctx, cancel := context.WithTimeout(ctx, floodFor)
	defer cancel()
	var mu sync.Mutex
	flood := map[int]int{}
	var wg sync.WaitGroup
	for f := range 6 * floodSenders {
		wg.Go(func() {
			c := clientFrom(fmt.Sprintf("127.0.0.%d", 51+f%6), 2)
			counts := sendEvery(fctx, c, floodPeriod, func(i int) string {
				return s.ingressURL() + "/callback?" + url.Values{"id": {fmt.Sprint(8_000_000_000 + base + int64(f*100_000+i))},
					"code": {"FORGED"}}.Encode()
			})
			mu.Lock()
			defer mu.Unlock()
			for k, v := range counts {
				flood[k] += v
			}
		})
	}
	eventually(t, "the flood under way before the provider's first callback", 10*time.Second, 50*time.Millisecond, func() string {
		if n := untokenedTotal() - before; n < 60 {
			return fmt.Sprintf("%.0f flood requests so far", n)
		}
		return ""
	})
	provider := sendEvery(fctx, clientFrom("127.0.0.60", 2), 200*time.Millisecond, func(i int) string {
		id := fmt.Sprint(7_000_000_000 + base + int64(i)) // a task that is already done
		if i%15 == 7 && i/15 < waiting {
			id = probes[i/15].in.ProviderTaskID
		}
		return s.ingressURL() + "/callback?" + url.Values{"id": {id}, "code": {fmt.Sprintf("PROVIDER-%d", i)}}.Encode()
	})
	wg.Wait()

	sent := 0
	for _, n := range provider {
		sent += n
	}
	share := float64(provider[http.StatusOK]) / float64(sent)
	hinted := 0
	for _, p := range probes {
		res, _ := finishProbe(ctx, t, s, p)
		hinted += len(res.Hints)
	}
	t.Logf("six clients asking 200/s each for %s (%s) + the provider at 5/s (%s): provider admitted %.0f%%; waiting tasks "+
		"hinted %d of %d", floodFor, statusCounts(flood), statusCounts(provider), 100*share, hinted, waiting)
	assert.GreaterOrEqual(t, share, 0.95, "the provider's callbacks keep their fair share")
	require.Positive(t, flood[http.StatusTooManyRequests], "the flooders were held to their share")
	assert.Equal(t, waiting, hinted, "every waiting task got the provider's hint")
}
