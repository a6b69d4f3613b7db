package activities

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// DeliverRequest is one result for one notify_url; Body is the JSON document the workflow built.
type DeliverRequest struct {
	NotifyURL string          `json:"notify_url"`
	Body      json.RawMessage `json:"body"`
	Refresh   int             `json:"refresh,omitempty"` // N for the token of the Nth refresh: a new result, a new webhook-id
	// RunID is the run the task's reset chain started from, so a reset run delivers under the same webhook-id.
	RunID string `json:"run_id,omitempty"`
}

// MetricDeliveries counts delivery attempts by result (ok, error).
const MetricDeliveries = "captchaflow_deliveries_total"

// Deliver POSTs the result to notify_url, signed per Standard Webhooks with webhook-id deliveryID, so a receiver
// drops duplicates. Failures are retried by the workflow's retry policy (the dead-letter queue, visible in the Web
// UI), except a notify_url the worker never connects to (FailureDeliveryForbidden).
func (a *Activities) Deliver(ctx context.Context, req DeliverRequest) (err error) {
	defer func() {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"result": map[bool]string{true: "ok", false: "error"}[err == nil]}).
			Counter(MetricDeliveries).Inc(1)
	}()
	httpReq, err := a.signedRequest(ctx, req)
	if err != nil {
		return err
	}
	defer keepAlive(ctx)()
	a.httpOnce.Do(func() { // once, so no delivery can go out without the target check
		a.httpClient = newDeliveryClient(a.DeliveryTimeout, a.NotifyAllowPrivate)
	})
	resp, err := a.httpClient.Do(httpReq)
	if errors.Is(err, errForbiddenTarget) {
		return forbidden(describeDeliveryError(err))
	} else if err != nil {
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
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4*maxExcerpt))
	if snippet := excerpt(b); snippet != "" {
		msg += ": " + snippet
	}
	return temporal.NewApplicationError(msg, FailureDeliveryRejected)
}

// deliveryID is the webhook-id of one result: "<workflow ID>.<run ID>" (".r<N>" after the Nth refresh). Retries
// keep it; another run or a refreshed token is a new result. The run ID's fixed length keeps the workflow ID
// recoverable though workflow IDs may contain dots.
func deliveryID(workflowID, runID string, refresh int) string {
	if refresh > 0 {
		return fmt.Sprintf("%s.%s.r%d", workflowID, runID, refresh)
	}
	return workflowID + "." + runID
}

// signedRequest is the POST of req's body with the Standard Webhooks headers, to an http(s) URL with a host (what
// no connection check can refuse); where it may connect is the client's to check.
func (a *Activities) signedRequest(ctx context.Context, req DeliverRequest) (*http.Request, error) {
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.NotifyURL, bytes.NewReader(req.Body))
	switch {
	case err != nil:
		return nil, forbidden("not a valid URL") // the parse error echoes the URL
	case httpReq.URL.Scheme != "http" && httpReq.URL.Scheme != "https":
		return nil, forbidden(fmt.Sprintf("scheme %q is not http or https", httpReq.URL.Scheme))
	case httpReq.URL.Hostname() == "":
		return nil, forbidden("no host")
	case a.NotifySecret == "":
		return nil, temporal.NewApplicationError("NOTIFY_SECRET is not set on the worker; set it and restart the worker to deliver",
			FailureWorkerConfig)
	}
	signer, err := notifySigner(a.NotifySecret)
	if err != nil {
		return nil, temporal.NewApplicationError(err.Error(), FailureWorkerConfig)
	}
	exec := activity.GetInfo(ctx).WorkflowExecution
	msgID, now := deliveryID(exec.ID, cmp.Or(req.RunID, exec.RunID), req.Refresh), time.Now()
	signature, _ := signer.Sign(msgID, now, req.Body) // an HMAC: never fails
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set(standardwebhooks.HeaderWebhookID, msgID)
	httpReq.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	httpReq.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	return httpReq, nil
}

// forbidden is the non-retryable refusal of a notify_url (a private address's names the setting that admits it).
func forbidden(why string) error {
	return temporal.NewNonRetryableApplicationError("notify_url refused: "+why, FailureDeliveryForbidden, nil)
}

// CheckNotifySecret refuses a NOTIFY_SECRET that cannot sign, naming the variable, never the value. An unset one is
// allowed: deliveries wait, retrying and visible, until it is set.
func CheckNotifySecret(secret string) error {
	_, err := notifySigner(secret)
	return err
}

// notifySigner keys the HMAC: a "whsec_" secret is base64 as the spec's libraries issue it, any other raw bytes.
func notifySigner(secret string) (*standardwebhooks.Webhook, error) {
	if !strings.HasPrefix(secret, "whsec_") {
		return standardwebhooks.NewWebhookRaw([]byte(secret))
	}
	if signer, err := standardwebhooks.NewWebhook(secret); err == nil && secret != "whsec_" {
		return signer, nil
	}
	return nil, errors.New("NOTIFY_SECRET starts with whsec_ but the rest is not a base64 key") // the value is never echoed
}
