package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

type balanceProvider struct {
	*fakeProvider
	balance float64
	err     error
}

func (b *balanceProvider) Balance(context.Context) (float64, error) { return b.balance, b.err }

func gauges(t *testing.T, snapshot map[string]float64, name string) float64 {
	t.Helper()
	v, ok := snapshot[name]
	require.True(t, ok, "gauge %s not set: %v", name, snapshot)
	return v
}

func TestFetchBalanceRecordsTheGaugeAndWhenItWasChecked(t *testing.T) {
	env, acts, fp, scope := providerEnv(t)
	acts.Provider = &balanceProvider{fakeProvider: fp, balance: 12.5}
	before := time.Now()
	val, err := env.ExecuteActivity(acts.FetchBalance)
	require.NoError(t, err)
	var res BalanceResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, 12.5, res.Balance)

	got := map[string]float64{}
	for _, g := range scope.Snapshot().Gauges() {
		got[g.Name()] = g.Value()
		assert.Equal(t, "FetchBalance", g.Tags()["activity_type"], "%s carries the SDK's tags", g.Name())
	}
	assert.Equal(t, 12.5, gauges(t, got, MetricProviderBalance))
	assert.InDelta(t, float64(before.Unix()), gauges(t, got, MetricProviderBalanceChecked), 5)
}

func TestFetchBalanceFailuresAreTypedAndLeaveTheGaugeAlone(t *testing.T) {
	env, acts, fp, scope := providerEnv(t)
	acts.Provider = &balanceProvider{fakeProvider: fp, err: &providers.Error{Op: "getbalance", Code: "ERROR_KEY_DOES_NOT_EXIST",
		Class: callback.ClassConfig, Err: errors.New("wrong key")}}
	_, err := env.ExecuteActivity(acts.FetchBalance)
	appErr := appError(t, err)
	assert.Equal(t, captchaflow.FailureProviderConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Empty(t, scope.Snapshot().Gauges())
}

// ERROR_ZERO_BALANCE on in.php is a ProviderZeroBalance failure whose details carry the code and the paced wait the
// workflow sleeps (the same as its NextRetryDelay, for a retry policy that still retries it).
func TestZeroBalanceSubmitCarriesItsWait(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	provider.submitErr = &providers.Error{Op: "submit", Code: "ERROR_ZERO_BALANCE", Class: callback.ClassTransient}
	_, err := env.ExecuteActivity(acts.Submit, SubmitRequest{Method: "userrecaptcha", Params: map[string]string{}, RunID: "run-1", Submission: 1})
	appErr := appError(t, err)
	assert.Equal(t, FailureProviderZeroBalance, appErr.Type())
	assert.False(t, appErr.NonRetryable())
	var code string
	var wait time.Duration
	require.NoError(t, appErr.Details(&code, &wait))
	assert.Equal(t, "ERROR_ZERO_BALANCE", code)
	assert.Equal(t, appErr.NextRetryDelay(), wait)
	assert.InDelta(t, float64(time.Minute), float64(wait), float64(12*time.Second))
}

func TestFetchBalanceWithoutProvidersIsAConfigFailure(t *testing.T) {
	env, acts, _, _ := providerEnv(t)
	acts.Providers = providers.NewSet(nil, nil)
	_, err := env.ExecuteActivity(acts.FetchBalance)
	appErr := appError(t, err)
	assert.Equal(t, captchaflow.FailureProviderConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}
