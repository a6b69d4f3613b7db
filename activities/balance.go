package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
)

// Gauges of the worker that ran FetchBalance: across workers the current balance is the one with the newest
// MetricProviderBalanceChecked (deploy/prometheus/alerts.yml records it as captchaflow:provider_balance).
const (
	MetricProviderBalance             = "captchaflow_provider_balance"                           // in the provider's currency
	MetricProviderBalanceChecked      = "captchaflow_provider_balance_checked_timestamp_seconds" // Unix seconds
	MetricProviderBalanceLowThreshold = "captchaflow_provider_balance_low_threshold"             // PROVIDER_BALANCE_LOW, when set
)

// BalanceResult is what getbalance answered and when.
type BalanceResult struct {
	Balance   float64   `json:"balance"`
	CheckedAt time.Time `json:"checked_at"`
}

// FetchBalance reads every provider's balance into the gauges (tagged provider on a routed worker) and returns the
// first's; one that cannot be read is logged and skipped, all failing fails like Poll, no provider at all as config.
func (a *Activities) FetchBalance(ctx context.Context) (BalanceResult, error) {
	defer keepAlive(ctx)()
	var read []BalanceResult
	lastErr := temporal.NewNonRetryableApplicationError("the worker has no provider to read a balance from",
		captchaflow.FailureProviderConfig, nil)
	for _, p := range a.set().All() {
		balance, err := p.Client.Balance(ctx)
		if err != nil {
			activity.GetLogger(ctx).Warn("provider balance not read", "Provider", p.Name, "Error", err)
			lastErr = providerError(ctx, err)
			continue
		}
		read = append(read, BalanceResult{Balance: balance, CheckedAt: time.Now()})
		h := activity.GetMetricsHandler(ctx)
		if name := a.routedName(p); name != "" {
			h = h.WithTags(map[string]string{"provider": name})
		}
		h.Gauge(MetricProviderBalance).Update(balance)
		h.Gauge(MetricProviderBalanceChecked).Update(float64(read[len(read)-1].CheckedAt.UnixMilli()) / 1000)
		activity.GetLogger(ctx).Info("provider balance", "Provider", p.Name, "Balance", balance)
	}
	if len(read) == 0 {
		return BalanceResult{}, lastErr
	}
	return read[0], nil
}
