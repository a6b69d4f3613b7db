package activities

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// #29 §6: a lost submission may have been paid: its failure carries what an accepted one's result would.
func TestLostSubmissionCarriesItsPrice(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	acts.Providers.All()[0].Price, acts.Providers.All()[0].Refunds = providers.Price{"default": 2}, true
	fakes["a"].submitErr = &providers.Error{Op: "submit", Class: callback.ClassTransient, Written: true, Err: errors.New("EOF")}
	_, err := submitResult(t, env, acts, recaptchaReq)
	appErr := appError(t, err)
	require.Equal(t, FailureSubmitOutcomeUnknown, appErr.Type())
	var lost LostDetails
	require.NoError(t, appErr.Details(&lost))
	require.Equal(t, LostDetails{Provider: "a", Alternatives: 2, GiveUpSeconds: 120, RunID: recaptchaReq.RunID, PriceUSD: 0.002, Refunds: true}, lost)
}

// #29 §9: exploring goes only to a provider Submit would try (its circuit lets a request through), and the
// explored one's fallback is the best: c (explored, $3) refuses with a zero balance, a ($1) takes it, not b ($2).
func TestExploringNeverPaysTheWrongFallback(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	acts.Providers.Model = providers.NewModel(providers.File{Routing: providers.RoutingScored, ExploreShare: new(0.5)})
	for _, p := range acts.Providers.All() {
		p.Price = providers.Price{"default": map[string]float64{"a": 1, "b": 2, "c": 3}[p.Name]}
	}
	fakes["c"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	explored := map[string]int{}
	for n := 1; n <= 200; n++ {
		req := recaptchaReq
		req.Submission = n
		r, err := submitResult(t, env, acts, req)
		require.NoError(t, err)
		if r.Route.Reason != captchaflow.RouteExplore {
			require.Equal(t, "a", r.Provider)
			continue
		}
		first := r.Route.Candidates[0].Provider
		explored[first]++
		if first == "c" && explored["c"] == 1 { // its circuit was closed: the zero balance opens it now
			require.Equal(t, "a", r.Provider, "c refused: the fallback is the best, %+v", r.Route)
			continue
		}
		require.Equal(t, first, r.Provider, "explored a provider Submit skips: %+v", r.Route)
	}
	require.Equal(t, 1, explored["c"], fmt.Sprint("c is explored once, then its circuit is open: ", explored))
	require.Positive(t, explored["b"])
}
