package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
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
// first's; one that cannot be read is logged and skipped, all failing fails like Poll.
func (a *Activities) FetchBalance(ctx context.Context) (BalanceResult, error) {
	defer keepAlive(ctx)()
	var first *BalanceResult
	var lastErr error
	for _, p := range a.set().All() {
		balance, err := p.Client.Balance(ctx)
		if err != nil {
			activity.GetLogger(ctx).Warn("provider balance not read", "Provider", p.Name, "Error", err)
			lastErr = err
			continue
		}
		now := time.Now()
		h := activity.GetMetricsHandler(ctx)
		if name := a.routedName(p); name != "" {
			h = h.WithTags(map[string]string{"provider": name})
		}
		h.Gauge(MetricProviderBalance).Update(balance)
		h.Gauge(MetricProviderBalanceChecked).Update(float64(now.UnixMilli()) / 1000)
		activity.GetLogger(ctx).Info("provider balance", "Provider", p.Name, "Balance", balance)
		if first == nil {
			first = &BalanceResult{Balance: balance, CheckedAt: now}
		}
	}
	if first == nil {
		return BalanceResult{}, providerError(ctx, lastErr)
	}
	return *first, nil
}
