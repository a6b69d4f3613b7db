package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// deliveryExpiryMargin ends a token's delivery this long before expires_at, so workers' clocks a little apart
// cannot deliver it dead.
const deliveryExpiryMargin = 2 * time.Second

// deliver POSTs res to notify_url until delivery_timeout_seconds or, for a token that expires first, until just
// before it does: expired then says so.
func (s *solver) deliver(ctx workflow.Context, res captchaflow.Result) (expired bool, err error) {
	s.setPhaseSearchable(ctx, captchaflow.PhaseDelivering)
	// Marshalling a struct is deterministic; workflowcheck cannot see through encoding/json's type cache.
	//workflowcheck:ignore
	body, err := json.Marshal(notification{TaskID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: res})
	if err != nil {
		return false, err
	}
	opts, untilExpiry := deliverOptions(ctx, s.in.DeliveryTimeout(), time.Minute), time.Duration(0)
	if !res.ExpiresAt.IsZero() {
		untilExpiry = res.ExpiresAt.Sub(workflow.Now(ctx)) - deliveryExpiryMargin
		if untilExpiry <= 0 {
			return true, errors.New("the token expired before its delivery began")
		}
		if untilExpiry >= s.in.DeliveryTimeout() {
			untilExpiry = 0 // delivery_timeout_seconds ends first: a failure is DeliveryFailed
		} else { // retries spaced at most an eighth of the token's life, so notify_url is tried close to its end
			opts = deliverOptions(ctx, untilExpiry, min(time.Minute, max(time.Second, untilExpiry/8)))
		}
	}
	f := workflow.ExecuteActivity(opts, acts.Deliver,
		activities.DeliverRequest{NotifyURL: s.in.NotifyURL, Body: body, Refresh: res.Refreshes})
	s.waitFor(ctx, f)
	switch err = f.Get(ctx, nil); {
	case err == nil:
		return false, nil
	case temporal.IsCanceledError(err) && ctx.Err() != nil:
		return false, temporal.NewCanceledError(res) // cancelled as asked, the result in the details
	case untilExpiry > 0 && expiredWhileFailing(err):
		return true, fmt.Errorf("the token expired while notify_url kept failing: %w", err)
	}
	// The result stays in the failure's details: a failed delivery never loses it.
	return false, temporal.NewNonRetryableApplicationError("delivering the result to notify_url failed: "+err.Error(),
		captchaflow.FailureDeliveryFailed, err, res)
}

// notification is the body POSTed to notify_url.
type notification struct {
	TaskID string `json:"task_id"`
	captchaflow.Result
}

// tokenExpired is the TokenExpired failure, the last result in its details.
func tokenExpired(res captchaflow.Result, maxRefreshes int, cause error) error {
	msg := fmt.Sprintf("the token expired at %s before notify_url accepted it", res.ExpiresAt.UTC().Format(time.RFC3339))
	if maxRefreshes > 0 {
		msg += fmt.Sprintf(", after %d refresh(es) (max_refreshes=%d)", res.Refreshes, maxRefreshes)
	} else {
		msg += " (max_refreshes=0: no refresh)"
	}
	return temporal.NewNonRetryableApplicationError(msg+": "+cause.Error(), captchaflow.FailureTokenExpired, cause, res)
}

// expiredWhileFailing: time ran out (a timeout, or a retryable failure) rather than notify_url refusing for good,
// which a fresh token would not change.
func expiredWhileFailing(err error) bool {
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	return isTimeout(err) || !ok || !appErr.NonRetryable()
}

// workerConfigFailure: the worker cannot sign (NOTIFY_SECRET unset); a paid refresh would meet the same worker.
func workerConfigFailure(err error) bool { return failureType(err) == activities.FailureWorkerConfig }
