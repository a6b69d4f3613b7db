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

// Deliver POSTs the result to notify_url, signed per Standard Webhooks with webhook-id DeliveryID, so a receiver
// drops duplicates. Failures are retried by the workflow's retry policy (the dead-letter queue, visible in the Web
// UI), except a notify_url the worker never connects to (FailureDeliveryForbidden).
func (a *Activities) Deliver(ctx context.Context, req DeliverRequest) error {
	err := a.deliver(ctx, req)
	result := "ok"
	if err != nil {
		result = "error"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"result": result}).Counter(MetricDeliveries).Inc(1)
	return err
}

// DeliveryID is the webhook-id of one result: "<workflow ID>.<run ID>" (".r<N>" after the Nth refresh). Retries
// and resets keep it; another run or a refreshed token is a new result. The run ID's fixed length keeps the workflow ID
// recoverable though workflow IDs may contain dots.
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
	httpReq, err := a.signedRequest(ctx, req)
	if err != nil {
		return err
	}
	defer keepAlive(ctx)()
	resp, err := a.client().Do(httpReq)
	if errors.Is(err, ErrForbiddenTarget) {
		return forbidden(err)
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

// signedRequest is the POST of req's body with the Standard Webhooks headers.
func (a *Activities) signedRequest(ctx context.Context, req DeliverRequest) (*http.Request, error) {
	if a.NotifySecret == "" {
		return nil, temporal.NewApplicationError("NOTIFY_SECRET is not set on the worker; set it and restart the worker to deliver",
			FailureWorkerConfig)
	}
	signer, err := notifySigner(a.NotifySecret)
	if err != nil {
		return nil, temporal.NewApplicationError(err.Error(), FailureWorkerConfig)
	}
	exec := activity.GetInfo(ctx).WorkflowExecution
	msgID, now := DeliveryID(exec.ID, cmp.Or(req.RunID, exec.RunID), req.Refresh), time.Now()
	signature, err := signer.Sign(msgID, now, req.Body)
	if err != nil {
		return nil, temporal.NewApplicationError("signing delivery: "+err.Error(), FailureWorkerConfig)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.NotifyURL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, forbidden(&forbiddenURLError{describeDeliveryError(err)})
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set(standardwebhooks.HeaderWebhookID, msgID)
	httpReq.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	httpReq.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	return httpReq, nil
}

// forbidden is the non-retryable refusal of a notify_url, naming the setting that would admit it, if one would.
func forbidden(err error) error {
	msg := "notify_url refused: " + describeDeliveryError(err)
	if fe, ok := errors.AsType[*forbiddenAddrError](err); ok && fe.private {
		msg += " (deliveries go to public addresses only; NOTIFY_ALLOW_PRIVATE=true on the worker admits private ones)"
	}
	return temporal.NewNonRetryableApplicationError(msg, FailureDeliveryForbidden, nil)
}

// client is built once, so no delivery can go out without the target check.
func (a *Activities) client() *http.Client {
	a.httpOnce.Do(func() {
		a.httpClient = NewDeliveryClient(cmp.Or(a.DeliveryTimeout, DefaultDeliveryTimeout), a.NotifyAllowPrivate)
	})
	return a.httpClient
}

// CheckNotifySecret lets the worker refuse to start on a NOTIFY_SECRET that cannot sign; it names the variable,
// never the value. An unset one is allowed: deliveries wait, retrying and visible, until it is set.
func CheckNotifySecret(secret string) error {
	if secret == "" {
		return nil
	}
	_, err := notifySigner(secret)
	return err
}

// notifySigner keys the HMAC: a "whsec_" secret is base64 as the spec's libraries issue it, any other raw bytes.
func notifySigner(secret string) (*standardwebhooks.Webhook, error) {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return standardwebhooks.NewWebhookRaw([]byte(secret))
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	switch {
	case err != nil:
		return nil, fmt.Errorf("NOTIFY_SECRET starts with whsec_ but the rest is not valid base64")
	case len(key) == 0:
		return nil, fmt.Errorf("NOTIFY_SECRET starts with whsec_ but holds no key")
	}
	return standardwebhooks.NewWebhookRaw(key)
}
