package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/providers"
)

// BalanceChecker is the part of the provider client that reads the account balance; *captchaai.Client satisfies it.
type BalanceChecker interface {
	Balance(ctx context.Context) (float64, error)
}

// FetchBalanceName is the registered name of FetchBalance.
const FetchBalanceName = "FetchBalance"

// Gauges FetchBalance sets on the worker that ran it (tags: the SDK's namespace, task_queue, activity_type,
// workflow_type). Each worker keeps the last value it fetched, so across workers the current balance is the one with
// the newest MetricProviderBalanceChecked (deploy/prometheus/alerts.yml records it as captchaflow:provider_balance).
const (
	// MetricProviderBalance is the account balance res.php?action=getbalance answered (the provider's currency).
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

// FetchBalance makes one res.php action=getbalance request and records its answer in MetricProviderBalance and
// MetricProviderBalanceChecked on this worker. A provider failure is typed like Poll's (a wrong key fails at once as
// ProviderConfig; trouble is transient); the key never appears in the error, the client removed it.
func (a *Activities) FetchBalance(ctx context.Context) (BalanceResult, error) {
	if set := a.set(); set.Routed {
		return a.fetchBalances(ctx, set)
	}
	bc, ok := a.Provider.(BalanceChecker)
	if !ok {
		return BalanceResult{}, temporal.NewNonRetryableApplicationError("the provider client cannot read the balance",
			captchaflow.FailureProviderConfig, nil)
	}
	defer keepAlive(ctx)()
	balance, err := bc.Balance(ctx)
	if err != nil {
		return BalanceResult{}, providerError(ctx, err)
	}
	now := time.Now()
	h := activity.GetMetricsHandler(ctx)
	h.Gauge(MetricProviderBalance).Update(balance)
	h.Gauge(MetricProviderBalanceChecked).Update(float64(now.UnixMilli()) / 1000)
	activity.GetLogger(ctx).Info("provider balance", "Balance", balance)
	return BalanceResult{Balance: balance, CheckedAt: now}, nil
}

// fetchBalances reads every provider's balance into the gauges, tagged provider; the result is the first
// provider's. A provider whose balance cannot be read is logged and skipped; all failing fails like one.
func (a *Activities) fetchBalances(ctx context.Context, set *providers.Set) (BalanceResult, error) {
	defer keepAlive(ctx)()
	var first *BalanceResult
	var lastErr error
	for _, p := range set.All() {
		bc, ok := p.Client.(BalanceChecker)
		if !ok {
			continue
		}
		balance, err := bc.Balance(ctx)
		if err != nil {
			activity.GetLogger(ctx).Warn("provider balance not read", "Provider", p.Name, "Error", err)
			lastErr = err
			continue
		}
		now := time.Now()
		h := activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": p.Name})
		h.Gauge(MetricProviderBalance).Update(balance)
		h.Gauge(MetricProviderBalanceChecked).Update(float64(now.UnixMilli()) / 1000)
		if first == nil {
			first = &BalanceResult{Balance: balance, CheckedAt: now}
		}
	}
	if first == nil {
		return BalanceResult{}, providerError(ctx, lastErr)
	}
	return *first, nil
}
