package activities

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Application error types the workflow and retry policies branch on (callers never see them).
const (
	FailureProviderTransient    = "ProviderTransient"    // busy, network or 5xx: retried after the code's wait, else backoff
	FailureResubmit             = "ProviderResubmit"     // the provider gave up on this task; a new submission may succeed
	FailureNotReady             = "NotReady"             // still being solved; the poll's retry policy spaces the next look
	FailureWorkerConfig         = "WorkerConfig"         // retried, so a fixed and restarted worker carries the task on
	FailureDeliveryRejected     = "DeliveryRejected"     // notify_url answered non-2xx; retried
	FailureDeliveryForbidden    = "DeliveryForbidden"    // notify_url is not http(s) or points where deliveries may not go
	FailureTaskRunning          = "TaskRunning"          // retried a short while: a report may come just before the task ends
	FailureSubmitOutcomeUnknown = "SubmitOutcomeUnknown" // the answer was lost: a paid task may exist. Details: LostDetails
	FailureProviderZeroBalance  = "ProviderZeroBalance"  // ERROR_ZERO_BALANCE: the workflow pauses. Details: code, wait
	FailureProviderUnavailable  = "ProviderUnavailable"  // every provider's circuit is open; retried when one half-opens
	FailureProviderGaveUp       = "ProviderGaveUp"       // unreachable past PROVIDER_GIVE_UP. Details: the provider
	FailureProviderUnsupported  = "ProviderUnsupported"  // the provider lacks the task type: submit elsewhere. Details: LostDetails
)

// NonRetryableProviderErrors are the provider error types no retry policy should retry.
var NonRetryableProviderErrors = []string{captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, FailureResubmit}

// providerError types a client's error (already redacted, its class decided by the client) for the retry policies.
func providerError(ctx context.Context, err error) error {
	code, msg := codeOf(err), err.Error()
	switch providers.ClassOf(err) {
	case callback.ClassNotReady:
		return temporal.NewApplicationError(msg, FailureNotReady, code)
	case callback.ClassResubmit:
		return temporal.NewNonRetryableApplicationError(msg, FailureResubmit, nil, code)
	case callback.ClassConfig, callback.ClassUnsupported: // Submit moves on from the latter (unsupported)
		if code == callback.CodeProxyMissing { // the table sent a proxied type without its fields: ours, not the user's
			activity.GetLogger(ctx).Error("captchaflow bug: a proxied task type went without its proxy", "Error", err)
			msg = "captchaflow bug (please report it): a proxied task type went without its proxy: " + msg
		}
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderConfig, nil, code)
	case callback.ClassProxy: // Submit names the host (ProxyRejected); a poll knows no params
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProxyRejected, nil, code)
	case callback.ClassUnknown:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderUnknown, nil, code)
	}
	return transientError(ctx, err, FailureProviderTransient)
}

// transientError is retried after the code's wait (0: the policy's backoff); a ZeroBalance carries it for the pause.
func transientError(ctx context.Context, err error, typ string) error {
	code := codeOf(err)
	wait := pacedDelay(callback.RetryAfter(code), timeLeft(ctx), rand.Float64())
	details := []any{code}
	if typ == FailureProviderZeroBalance {
		details = append(details, wait)
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ, temporal.ApplicationErrorOptions{NextRetryDelay: wait, Details: details})
}

// ProxyRejected ends a task whose proxy (ERROR_WRONG_USERAGENT: user agent) the provider could not use, naming its host,
// never the password; nothing is resubmitted. Workflow code calls it: ParseProxy only parses (netip's zone interning).
//
//workflowcheck:ignore
func ProxyRejected(code string, params map[string]string) error {
	what := "params.proxy"
	if p, err := captchaflow.ParseProxy(params["proxy"]); err == nil {
		what += " (host " + p.Host + ")"
	}
	if callback.Canonical(code) == callback.CodeWrongUA {
		what = fmt.Sprintf("params.userAgent %.160q", params["userAgent"])
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%.64s: the provider could not use %s; not resubmitted",
		code, what), captchaflow.FailureProxyRejected, nil, code)
}

func codeOf(err error) string {
	if pe, ok := errors.AsType[*providers.Error](err); ok {
		return pe.Code
	}
	return ""
}

const (
	retryJitter    = 0.2         // ±20 %: tasks turned away together do not all come back together
	deadlineMargin = time.Second // a retry past the deadline fails at once; room for the round trip and skew
)

// pacedDelay is wait spread by ±retryJitter (u in [0, 1) picks where), cut to left - deadlineMargin; 0 stays 0.
func pacedDelay(wait, left time.Duration, u float64) time.Duration {
	if wait <= 0 {
		return 0
	}
	d := time.Duration(float64(wait) * (1 - retryJitter + 2*retryJitter*u))
	if left > deadlineMargin && d > left-deadlineMargin {
		d = left - deadlineMargin
	}
	return d
}

// timeLeft is the time until the activity's schedule-to-close deadline across its attempts, or 0 with none.
func timeLeft(ctx context.Context) time.Duration {
	if info := activity.GetInfo(ctx); info.ScheduleToCloseTimeout > 0 {
		return time.Until(info.ScheduledTime.Add(info.ScheduleToCloseTimeout))
	}
	return 0
}

// Metrics of the activities (docs/operations.md); submissions and circuits need PROVIDERS_FILE. The balance
// gauges are the worker's that ran FetchBalance: the newest MetricProviderBalanceChecked holds the current balance.
const (
	MetricProviderAnswers     = "captchaflow_provider_answers_total"        // by op and code (countAnswer)
	MetricProviderSubmissions = "captchaflow_provider_submissions_total"    // by provider and outcome
	MetricCircuitState        = "captchaflow_provider_circuit_state"        // 0 closed, 1 half-open, 2 open, at scrape
	MetricCircuitOpened       = "captchaflow_provider_circuit_opened_total" // by provider and reason (providers.Reason*)
	MetricProviderUnsupported = "captchaflow_provider_unsupported_total"    // task types refused, by provider and method
	MetricDeliveries          = "captchaflow_deliveries_total"              // delivery attempts by result (ok, error)

	// The routing model's, read at scrape (docs/operations.md): by provider and method, spend by provider.
	MetricProviderPrice     = "captchaflow_provider_price_usd"      // one solve, as PROVIDERS_FILE prices it
	MetricRouteExpectedCost = "captchaflow_route_expected_cost_usd" // of a good code: the score
	MetricRouteSolveP90     = "captchaflow_route_solve_p90_seconds"
	MetricRouteUnsolvable   = "captchaflow_route_unsolvable_share"
	MetricRouteBad          = "captchaflow_route_bad_share"

	MetricProviderBalance             = "captchaflow_provider_balance"                           // in the provider's currency
	MetricProviderBalanceChecked      = "captchaflow_provider_balance_checked_timestamp_seconds" // Unix seconds
	MetricProviderBalanceLowThreshold = "captchaflow_provider_balance_low_threshold"             // PROVIDER_BALANCE_LOW, when set
)

// countAnswer counts an answer by op and code (OK, a documented code, network or other: a fixed set).
func (a *Activities) countAnswer(ctx context.Context, p *providers.Provider, op string, err error) {
	code, known := callback.KnownCode(codeOf(err))
	switch {
	case err == nil:
		code = "OK"
	case providers.IsTransportError(err):
		code = "network"
	case !known:
		code = "other"
	}
	tags := map[string]string{"op": op, "code": code}
	if name := a.routedName(p); name != "" {
		tags["provider"] = name
	}
	activity.GetMetricsHandler(ctx).WithTags(tags).Counter(MetricProviderAnswers).Inc(1)
}

// countSubmission counts a submission's outcome: accepted, refused, lost, skipped (circuit open) or abandoned.
func (a *Activities) countSubmission(ctx context.Context, provider, outcome string) {
	if a.set().Routed {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": provider, "outcome": outcome}).
			Counter(MetricProviderSubmissions).Inc(1)
	}
}

// BalanceResult is what getbalance answered and when.
type BalanceResult struct {
	Balance   float64   `json:"balance"`
	CheckedAt time.Time `json:"checked_at"`
}

// FetchBalance gauges every provider's balance and returns the first read; none read fails like Poll (or config).
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
