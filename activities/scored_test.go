package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Under routing: scored, Submit and the slot's ask rank the same way: the cheapest expected good code first, the
// result saying why and what the submission costs; an open circuit still moves it on, and a task's own order
// breaks a tie.
func TestScoredSubmitAndSlotChooseTheSameProvider(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	set := acts.Providers
	set.Model = providers.NewModel(providers.File{Routing: providers.RoutingScored, ExploreShare: new(0.0)})
	prices := map[string]float64{"a": 3, "b": 1, "c": 2}
	for _, p := range set.All() {
		p.Price, p.Refunds = providers.Price{"default": prices[p.Name]}, p.Flavor == ""
		p.Threads = 5
	}
	provider, _, plan := acts.slotOf(SlotAsk{Method: recaptchaReq.Method, Params: recaptchaReq.Params}, 0)
	require.Equal(t, "b", provider, "the slot is taken at the cheapest")
	require.Equal(t, 5, plan)
	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	require.InDelta(t, 0.001, r.PriceUSD, 1e-12)
	require.True(t, r.Refunds, "in.php refunds an unsolvable task")
	require.Equal(t, captchaflow.RouteCheapest, r.Route.Reason)
	require.Equal(t, []string{"b", "c", "a"}, candidateNames(r.Route))

	fakes["b"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	r, err = submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "c", r.Provider, "b's circuit opened: the next in the ranking, as failover")
	provider, _, _ = acts.slotOf(SlotAsk{Method: recaptchaReq.Method, Params: recaptchaReq.Params}, 0)
	require.Equal(t, "c", provider)

	req := recaptchaReq
	req.Providers, req.Avoid = []string{"a", "c"}, []string{"c"}
	r, err = submitResult(t, env, acts, req)
	require.NoError(t, err)
	require.Equal(t, "a", r.Provider, "the task's restriction holds; an avoided one goes last")
	require.Equal(t, []string{"a", "c"}, candidateNames(r.Route))
}

func candidateNames(r *captchaflow.Route) (names []string) {
	for _, c := range r.Candidates {
		names = append(names, c.Provider)
	}
	return names
}

// Observe hands a solve's submissions to the worker's model: a provider that keeps failing stops fitting.
func TestObserveTeachesTheModel(t *testing.T) {
	env, acts, _, _ := routedEnv(t)
	acts.Providers.Model = providers.NewModel(providers.File{Routing: providers.RoutingScored, ExploreShare: new(0.0)})
	for _, p := range acts.Providers.All() {
		p.Price = providers.Price{"default": map[string]float64{"a": 1, "b": 2, "c": 3}[p.Name]}
	}
	var obs []Observation
	for range 4 {
		obs = append(obs, Observation{Provider: "a", Seconds: 3, Outcome: providers.ObservedUnsolvable})
	}
	_, err := env.ExecuteActivity(acts.Observe, ObserveRequest{Method: "userrecaptcha", Observations: obs})
	require.NoError(t, err)
	r, err := submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider, "a fails most of its submissions: it does not fit")
	require.False(t, r.Route.Candidates[len(r.Route.Candidates)-1].Fits)
}
