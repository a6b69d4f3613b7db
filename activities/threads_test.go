package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// A submission pinned to its slot's provider goes nowhere else: a refusal that opens that provider's circuit fails
// ProviderMoved (nothing created; the task takes a slot at the next provider first), and the slot's provider is
// asked even when another comes first.
func TestPinnedSubmitNeverMovesWithoutASlot(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	req := recaptchaReq
	req.Provider = "a"
	_, err := submitResult(t, env, acts, req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, FailureProviderMoved, appErr.Type())
	require.Empty(t, fakes["b"].pingbacks)

	provider, _, _ := acts.slotOf(SlotAsk{Method: req.Method, Params: req.Params}, 0)
	require.Equal(t, "b", provider, "the next ask takes b's slot: a's circuit is open")
	env, acts, fakes, _ = routedEnv(t) // every circuit closed
	req.Provider = "b"
	r, err := submitResult(t, env, acts, req)
	require.NoError(t, err)
	require.Equal(t, "b", r.Provider)
	require.Equal(t, 2, r.Alternatives, "the give-up bound still sees every candidate")
	require.Empty(t, fakes["a"].pingbacks)
}
