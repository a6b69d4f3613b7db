package activities

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
)

// probeWorkers are n workers of one fleet, each with its own routing model, sharing the providers a (cheap), b and c
// (dearer); each learned that a fails most of its submissions, and nothing of it since longer than its probe gap.
func probeWorkers(t *testing.T, n int) (workers []*Activities, envs []*testsuite.TestActivityEnvironment) {
	_, acts, _, _ := routedEnv(t)
	for _, p := range acts.Providers.All() {
		p.Price = providers.Price{"default": map[string]float64{"a": 1, "b": 2, "c": 3}[p.Name]}
	}
	obs := []Observation{{Provider: "b", Seconds: 1, Outcome: providers.ObservedSolved}}
	for range 6 {
		obs = append(obs, Observation{Provider: "a", Outcome: providers.ObservedUnsolvable})
	}
	var elapsed atomic.Int64 // the models' clock: the probe gap passes without waiting for it
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	for range n {
		set := providers.NewSet(acts.Providers.All(), providers.NewBreaker(providers.DefaultCircuitSettings, time.Now))
		set.Model = providers.NewModel(providers.File{Routing: providers.RoutingScored, ExploreShare: new(0.0), PriorSolveSeconds: 1})
		set.Model.SetClock(now)
		w := &Activities{Providers: set, CallbackBaseURL: acts.CallbackBaseURL, CallbackSecret: acts.CallbackSecret}
		require.NoError(t, w.Observe(t.Context(), ObserveRequest{Method: recaptchaReq.Method, Observations: obs}))
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		env.RegisterActivity(w)
		workers, envs = append(workers, w), append(envs, env)
	}
	elapsed.Store(int64(5100 * time.Millisecond)) // past the least probe gap (providers.minProbeGap)
	return workers, envs
}

// Under fleet pacing the pinning worker's ranking picks a recovered provider's probe, another worker runs the
// pinned Submit, and a third may learn its answer (the delivery carries it). The probe is decided once, where the
// provider is chosen: a pinned Submit's own ranking spends no probe, and the probe's solve tells any worker that
// learns it that the provider recovered.
func TestAProbeIsDecidedOnceAndTravelsWithItsSubmission(t *testing.T) {
	w, envs := probeWorkers(t, 3)
	ask := SlotAsk{Method: recaptchaReq.Method, Params: recaptchaReq.Params, RouteOnly: true}
	pinned := recaptchaReq
	pinned.Provider = "b"
	_, err := submitResult(t, envs[1], w[1], pinned) // another task's, pinned to b by its own worker
	require.NoError(t, err)
	provider, _, _ := w[1].slotOf(ask, 0)
	require.Equal(t, "a", provider, "the pinned Submit's ranking spent no probe: this worker's next choice probes a")

	provider, reason, _ := w[0].slotOf(ask, 0)
	require.Equal(t, "a", provider, "the pinning worker probes a")
	require.Equal(t, captchaflow.RouteProbe, reason, "and its ticket says so")
	pinned.Provider, pinned.Reason = "a", reason // as the workflow passes the ticket on
	r, err := submitResult(t, envs[1], w[1], pinned)
	require.NoError(t, err)
	require.Equal(t, captchaflow.RouteProbe, r.Route.Reason, "the Submit's route says it was a probe")
	require.NoError(t, w[2].Observe(t.Context(), ObserveRequest{Method: recaptchaReq.Method, Observations: []Observation{
		{Provider: "a", Seconds: 2, Outcome: providers.ObservedSolved, Probe: r.Route.Reason == captchaflow.RouteProbe}}}))
	_, route, _ := w[2].ranked(recaptchaReq, 0, "seed")
	require.Equal(t, "a", route.Candidates[0].Provider, "the probe's solve, learned on a third worker, says a recovered")
	require.True(t, route.Candidates[0].Fits)
}
