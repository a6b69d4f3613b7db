package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// FetchBalanceName is the registered name of FetchBalance.
const FetchBalanceName = "FetchBalance"

// Gauges FetchBalance sets on the worker that ran it (tags: the SDK's namespace, task_queue, activity_type,
// workflow_type). Each worker keeps the last value it fetched, so across workers the current balance is the one with
// the newest MetricProviderBalanceChecked (deploy/prometheus/alerts.yml records it as captchaflow:provider_balance).
const (
	// MetricProviderBalance is the account balance the provider answered (the provider's currency).
	MetricProviderBalance = "captchaflow_provider_balance"
	// MetricProviderBalanceChecked is when that answer came, in Unix seconds.
	MetricProviderBalanceChecked = "captchaflow_provider_balance_checked_timestamp_seconds"
	// MetricProviderBalanceLowThreshold is the worker's PROVIDER_BALANCE_LOW (set by the worker at start, only when
	// configured); the low-balance alert compares the balance with it.
	MetricProviderBalanceLowThreshold = "captchaflow_provider_balance_low_threshold"
)

// BalanceResult is what getbalance answered and when. It holds no secret: the key stays in the provider client.
type BalanceResult struct {
	Balance   float64   `json:"balance"`
	CheckedAt time.Time `json:"checked_at"`
}

// FetchBalance reads every provider's balance (one request each) into MetricProviderBalance and
// MetricProviderBalanceChecked on this worker, tagged provider on a routed worker; the result is the first
// provider's. A provider whose balance cannot be read is logged and skipped; all failing fails like Poll's (a wrong
// key fails at once as ProviderConfig; trouble is transient). The key never appears in the error.
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
