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

// deliver POSTs res to notify_url, retried until delivery_timeout_seconds or, for a token that expires, until
// just before it does: expired then says so, and err says why.
func (s *solver) deliver(ctx workflow.Context, res captchaflow.Result) (expired bool, err error) {
	s.setPhaseSearchable(ctx, captchaflow.PhaseDelivering)
	// Marshalling a struct is deterministic; workflowcheck cannot see through encoding/json's type cache.
	//workflowcheck:ignore
	body, err := json.Marshal(notification{TaskID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: res})
	if err != nil {
		return false, err
	}
	opts := deliverOptions(ctx, s.in.DeliveryTimeout())
	// A token that expires is delivered only while it lives: the delivery's schedule-to-close ends just before
	// expires_at (the attempt in flight is cut off then too: its context's deadline is the schedule-to-close).
	untilExpiry := time.Duration(-1)
	if !res.ExpiresAt.IsZero() {
		untilExpiry = res.ExpiresAt.Sub(workflow.Now(ctx)) - deliveryExpiryMargin
		if untilExpiry <= 0 {
			return true, errors.New("the token expired before its delivery began")
		}
		if untilExpiry < s.in.DeliveryTimeout() {
			opts = expiringDeliverOptions(ctx, untilExpiry)
		} else {
			untilExpiry = -1 // delivery_timeout_seconds ends first: a failure is DeliveryFailed as before
		}
	}
	f := workflow.ExecuteActivity(opts, acts.Deliver,
		activities.DeliverRequest{NotifyURL: s.in.NotifyURL, Body: body, Refresh: res.Refreshes})
	s.waitFor(ctx, f)
	if err = f.Get(ctx, nil); err != nil {
		if temporal.IsCanceledError(err) && ctx.Err() != nil {
			// The workflow was cancelled while delivering: it ends cancelled (as it asked), and the result stays in
			// the cancellation's details, so it is not lost either.
			return false, temporal.NewCanceledError(res)
		}
		if untilExpiry > 0 && expiredWhileFailing(err) {
			return true, fmt.Errorf("the token expired while notify_url kept failing: %w", err)
		}
		// The result stays in the failure's details (and in history): a failed delivery never loses it.
		return false, temporal.NewNonRetryableApplicationError("delivering the result to notify_url failed: "+err.Error(),
			captchaflow.FailureDeliveryFailed, err, res)
	}
	return false, nil
}

// notification is the body POSTed to notify_url.
type notification struct {
	TaskID string `json:"task_id"`
	captchaflow.Result
}
