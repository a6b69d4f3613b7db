package activities

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// DeliverRequest is one result for one notify_url. Body is the JSON document to POST (built by the workflow).
type DeliverRequest struct {
	NotifyURL string          `json:"notify_url"`
	Body      json.RawMessage `json:"body"`
	// Refresh is 0 for the task's first token and N for the token of its Nth refresh (a fresh solve after the
	// previous token expired undelivered): a new result, so a new webhook-id.
	Refresh int `json:"refresh,omitempty"`
}

// Metric names for deliveries.
const (
	MetricDeliveries = "captchaflow_deliveries_total"
)

// Deliver POSTs the result to notify_url, signed per the Standard Webhooks spec with webhook-id = DeliveryID (one
// per result: the same on every retry of this delivery, different for another run of the workflow), so the
// receiver can drop duplicates. Failures are retryable — the activity's retry policy is the dead-letter queue, and
// it stays visible (and resettable) in the Web UI while the receiver is down — except a notify_url the worker will
// never connect to (FailureDeliveryForbidden): retrying it for delivery_timeout_seconds could not succeed.
func (a *Activities) Deliver(ctx context.Context, req DeliverRequest) error {
	err := a.deliver(ctx, req)
	result := "ok"
	if err != nil {
		result = "error"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"result": result}).Counter(MetricDeliveries).Inc(1)
	return err
}

// DeliveryID is the webhook-id of the delivery of one result: "<workflow ID>.<run ID>", and ".r<N>" after it for
// the token of the Nth refresh. Retries of the delivery (activity attempts, a worker restart) keep it, so a
// receiver deduplicates them; another run under the same workflow ID (a failed task started again, a reset) or a
// refreshed token is a new result under a new ID, so the receiver does not drop it as a duplicate. The run ID is a
// UUID (36 characters), so the workflow ID is recoverable even though workflow IDs may contain dots.
func DeliveryID(workflowID, runID string, refresh int) string {
	id := workflowID + "." + runID
	if refresh > 0 {
		id += ".r" + strconv.Itoa(refresh)
	}
	return id
}

func (a *Activities) deliver(ctx context.Context, req DeliverRequest) error {
	if err := checkNotifyURL(req.NotifyURL); err != nil {
		return forbidden(err)
	}
	signer, err := a.signer()
	if err != nil {
		return temporal.NewApplicationError(err.Error(), FailureWorkerConfig)
	}
	exec := activity.GetInfo(ctx).WorkflowExecution
	msgID := DeliveryID(exec.ID, exec.RunID, req.Refresh)
	now := time.Now()
	signature, err := signer.Sign(msgID, now, req.Body)
	if err != nil {
		return temporal.NewApplicationError("signing delivery: "+err.Error(), FailureWorkerConfig)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.NotifyURL, bytes.NewReader(req.Body))
	if err != nil {
		return forbidden(&forbiddenURLError{describeDeliveryError(err)})
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set(standardwebhooks.HeaderWebhookID, msgID)
	httpReq.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	httpReq.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	defer keepAlive(ctx)()
	resp, err := a.client().Do(httpReq)
	if err != nil {
		if errors.Is(err, ErrForbiddenTarget) {
			return forbidden(err)
		}
		return temporal.NewApplicationError("delivering to notify_url: "+describeDeliveryError(err), FailureDeliveryRejected)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	msg := fmt.Sprintf("notify_url answered %d", resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		msg += " (redirects are not followed)"
	}
	if snippet := excerpt(readExcerpt(resp.Body)); snippet != "" {
		msg += ": " + snippet
	}
	return temporal.NewApplicationError(msg, FailureDeliveryRejected)
}

// readExcerpt reads just enough of an error answer for excerpt.
func readExcerpt(body io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(body, 4*maxExcerpt))
	return b
}

// forbidden is the non-retryable failure of a notify_url the worker refuses: the message names notify_url and why,
// and the setting that would admit it, if one would.
func forbidden(err error) error {
	msg := "notify_url refused: " + describeDeliveryError(err)
	if fe, ok := errors.AsType[*forbiddenAddrError](err); ok && fe.private {
		msg += " (deliveries go to public addresses only; NOTIFY_ALLOW_PRIVATE=true on the worker admits private ones)"
	}
	return temporal.NewNonRetryableApplicationError(msg, FailureDeliveryForbidden, nil)
}

// client is the delivery client, built once from DeliveryTimeout and NotifyAllowPrivate: there is no way to hand
// the activities a client without the target check.
func (a *Activities) client() *http.Client {
	a.httpOnce.Do(func() {
		a.httpClient = NewDeliveryClient(cmp.Or(a.DeliveryTimeout, DefaultDeliveryTimeout), a.NotifyAllowPrivate)
	})
	return a.httpClient
}

// signer keys the HMAC with NOTIFY_SECRET (see notifySigner).
func (a *Activities) signer() (*standardwebhooks.Webhook, error) {
	if a.NotifySecret == "" {
		return nil, fmt.Errorf("NOTIFY_SECRET is not set on the worker; set it and restart the worker to deliver")
	}
	return notifySigner(a.NotifySecret)
}

// CheckNotifySecret reports whether a NOTIFY_SECRET can sign deliveries, so the worker refuses to start on one
// that cannot instead of failing every delivery later. The error names the variable, never the value.
func CheckNotifySecret(secret string) error {
	if secret == "" {
		return nil // allowed: deliveries wait (retrying, visible) until it is set
	}
	_, err := notifySigner(secret)
	return err
}

// notifySigner keys the HMAC with the secret: a "whsec_" secret is base64 (standard alphabet, padded) as the
// spec's libraries issue and decode them, any other value is used as raw bytes.
func notifySigner(secret string) (*standardwebhooks.Webhook, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("NOTIFY_SECRET starts with whsec_ but the rest is not valid base64")
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("NOTIFY_SECRET starts with whsec_ but holds no key")
		}
		return standardwebhooks.NewWebhookRaw(key)
	}
	return standardwebhooks.NewWebhookRaw([]byte(secret))
}
