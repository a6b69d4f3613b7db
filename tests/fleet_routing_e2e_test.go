package tests

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// more starts n more workers like r's on its queue; it returns every worker's /metrics, r's first.
func (r *routed) more(t *testing.T, sc *scenario, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	urls := []string{r.metrics}
	for i := range n {
		port, err := devstack.FreePort()
		require.NoError(t, err)
		env := maps.Clone(r.env)
		env["WORKER_METRICS_ADDR"] = loopback(port)
		w, err := r.s.startProcess(ctx, fmt.Sprintf("worker-routed-%s-%d", sc.name, i+2), r.s.bins.Worker, env, "http://"+loopback(port)+"/healthz")
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.Stop() })
		urls = append(urls, "http://"+loopback(port)+"/metrics")
	}
	return urls
}

// TestE2E_FleetRouting (issue 31, requirement 5): under routing: scored, a cheaper provider a turns unsolvable, then
// recovers, once before one worker and once before four behind one task queue. Tasks run one after another (each
// may land on any worker): the four share what they observe through the routing exchange, so they leave the broken
// a and come back to the recovered one about as fast as one worker does.
func TestE2E_FleetRouting(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	var oneLeft, oneBack int // one worker's: its own choices of the broken a, and when it chose the recovered a
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			sc := newScenario(t, s, fmt.Sprintf("fleet-routing-%d", workers))
			r := startRoutedFile(t, s, sc, nil, "routing: scored\nexplore_share: 0\n", ", price_per_1000: 1| , price_per_1000: 2")
			metrics := r.more(t, sc, workers-1)
			warm := sc.add(12, taskSpec{Kind: "scored"}) // a's solve times, so its p90 (the probes' gap) is its own
			r.start(ctx, sc, warm)
			sc.await(ctx, time.Minute)

			require.NoError(t, simDoAt(ctx, r.urlA, "PUT", "/_sim/rules", `{"rules":[{"pattern":".*","faults":"unsolvable_pingback"}]}`, 200))
			var broken []scoredStep
			for range 12 {
				broken = append(broken, r.one(ctx, sc, 0))
			}
			time.Sleep(2 * time.Second) // an exchange round or two
			var shares []float64
			for _, url := range metrics {
				shares = append(shares, scrapeLabelled(ctx, t, url, activities.MetricRouteUnsolvable, providerA))
			}
			require.NoError(t, simDoAt(ctx, r.urlA, "PUT", "/_sim/rules", `{"rules":[]}`, 200))
			var after []scoredStep
			for range 30 {
				after = append(after, r.one(ctx, sc, 0))
			}
			chose := func(steps []scoredStep, reason string) (n int) {
				for _, st := range steps {
					if st.first == providerA && (reason == "" || st.reason == reason) {
						n++
					}
				}
				return n
			}
			back := -1
			for i, st := range after {
				if st.first == providerA && st.reason == captchaflow.RouteCheapest {
					back = i + 1
					break
				}
			}
			sc.note("%d workers: broken a got %d of the next 12 tasks (%d its own choice, %d probes); a's unsolvable share on each worker %.2f; "+
				"recovered a got %d of the next 30 (back at task %d)", workers, chose(broken, ""), chose(broken, captchaflow.RouteCheapest),
				chose(broken, captchaflow.RouteExplore), shares, chose(after, ""), back)
			left := chose(broken, captchaflow.RouteCheapest)
			if workers == 1 {
				oneLeft, oneBack = left, back
			}
			// Each worker alone would send a about as many tasks as one (four times as many in all); the exchange's
			// round (half a second) costs one or two of these back-to-back tasks.
			assert.LessOrEqual(t, left, oneLeft+2, "left the broken a about as fast as one worker")
			for i, share := range shares {
				assert.Greater(t, share, 0.5, "worker %d learned a broke", i+1)
			}
			assert.True(t, back > 0 && back <= max(8, oneBack+2), "back to the recovered a within a handful of tasks: %d", back)
			assert.GreaterOrEqual(t, chose(after, ""), 20, "most of the next 30")
			for _, st := range append(broken, after...) {
				assert.NoError(t, st.err, "failover solved it")
			}
		})
	}
}

// scrapeLabelled is the value of name's series for provider at url (0: none).
func scrapeLabelled(ctx context.Context, t *testing.T, url, name, provider string) float64 {
	text, err := scrape(ctx, url)
	require.NoError(t, err)
	v, _ := metricSum(text, name, map[string]string{"provider": provider})
	return v
}
