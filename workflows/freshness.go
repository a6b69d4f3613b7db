package workflows

// Token freshness (issue #10 §3): a result carries expires_at, its delivery to notify_url is bounded by it, and a
// token that expires undelivered is replaced by a fresh solve (max_refreshes) or the task fails TokenExpired.

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// deliveryExpiryMargin ends a token's delivery this long before its expires_at, so that an attempt in flight is cut
// off while the token still lives and workers' clocks a little apart cannot deliver it dead.
const deliveryExpiryMargin = 2 * time.Second

// received stamps a freshly received result with its expiry and makes it the status's current token.
func (s *solver) received(ctx workflow.Context, res captchaflow.Result) captchaflow.Result {
	res.ExpiresAt = s.in.ExpiresAt(res.ReceivedAt)
	res.Refreshes = s.status.Refreshes
	s.status.ReceivedAt, s.status.ExpiresAt = res.ReceivedAt, res.ExpiresAt
	return res
}

// statusNow is the status as the query answers it: with the current token's age by the answering worker's clock
// (workflow time stands still while a delivery is retried, so it would not tell the age).
func (s *solver) statusNow() captchaflow.Status {
	st := s.status
	st.Submissions = s.table.statuses()
	if !st.ReceivedAt.IsZero() {
		// A query changes nothing in the workflow; the wall clock only shapes its answer.
		//workflowcheck:ignore
		st.TokenAgeSeconds = max(0, time.Since(st.ReceivedAt).Round(100*time.Millisecond).Seconds())
	}
	return st
}

// deliverFresh delivers res to notify_url while its token lives. Delivery still failing when it expires, it solves
// again — a new, paid submission, up to max_refreshes — and delivers the fresh token; past that the task fails
// TokenExpired with the last result in its details. It returns the result that was delivered.
func (s *solver) deliverFresh(ctx workflow.Context, res captchaflow.Result) (captchaflow.Result, error) {
	for {
		expired, err := s.deliver(ctx, res)
		if err == nil {
			recordTokenAgeAtDelivery(ctx, workflow.Now(ctx).Sub(res.ReceivedAt))
			return res, nil
		}
		if !expired {
			return res, err
		}
		if s.status.Refreshes >= s.in.Refreshes() || workerConfigFailure(err) {
			return res, tokenExpired(res, s.in.Refreshes(), err)
		}
		s.status.Refreshes++
		countTokenRefresh(ctx)
		s.logger.Warn("the token expired undelivered; solving again", "ProviderTaskID", res.ProviderTaskID,
			"ExpiresAt", res.ExpiresAt, "Refresh", s.status.Refreshes, "MaxRefreshes", s.in.Refreshes(), "Error", err)
		// A refresh is a solve of its own: a fresh deadline_seconds and max_submits, and no backoff carried over.
		s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
		s.refusals = 0
		s.table.newRound()
		next, err := s.solve(ctx)
		if err != nil {
			return res, err
		}
		s.cancelTimer()
		res = next
	}
}

// tokenExpired is the TokenExpired failure; its details carry the last result, as DeliveryFailed's do.
func tokenExpired(res captchaflow.Result, maxRefreshes int, cause error) error {
	msg := fmt.Sprintf("the token expired at %s before notify_url accepted it", res.ExpiresAt.UTC().Format(time.RFC3339))
	if maxRefreshes > 0 {
		msg += fmt.Sprintf(", after %d refresh(es) (max_refreshes=%d)", res.Refreshes, maxRefreshes)
	} else {
		msg += " (max_refreshes=0: no refresh)"
	}
	return temporal.NewNonRetryableApplicationError(msg+": "+cause.Error(), captchaflow.FailureTokenExpired, cause, res)
}

// expiredWhileFailing tells whether a failed, expiry-bounded delivery failed because time ran out (a timeout, or a
// retryable failure with no time left to retry) rather than for good (a notify_url refused, which a fresh token
// would not change either).
func expiredWhileFailing(err error) bool {
	if isTimeout(err) {
		return true
	}
	var appErr *temporal.ApplicationError
	return !errors.As(err, &appErr) || !appErr.NonRetryable()
}

// workerConfigFailure: the delivery failed because the worker cannot sign (NOTIFY_SECRET unset); a fresh token
// would meet the same worker, so no paid refresh is spent on it.
func workerConfigFailure(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.FailureWorkerConfig
}

// expiringDeliverOptions bound a delivery by its token's life: schedule-to-close ends before expires_at, and the
// retries are spaced at most an eighth of that (1 s to 1 min) so notify_url is tried until close to the end.
func expiringDeliverOptions(ctx workflow.Context, untilExpiry time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(DeliverStartToClose, untilExpiry),
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: untilExpiry,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    min(time.Minute, max(time.Second, untilExpiry/8)),
		},
	})
}

func countTokenRefresh(ctx workflow.Context) {
	workflow.GetMetricsHandler(ctx).Counter(MetricTokenRefreshes).Inc(1)
}

func recordTokenAgeAtDelivery(ctx workflow.Context, d time.Duration) {
	workflow.GetMetricsHandler(ctx).Timer(MetricTokenAgeAtDelivery).Record(d)
}
