package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
}

// Metric names for deliveries.
const (
	MetricDeliveries = "captchaflow_deliveries_total"
)

// Deliver POSTs the result to notify_url, signed per the Standard Webhooks spec with webhook-id = workflow ID, so
// the receiver can drop duplicates. Every failure is retryable: the activity's retry policy is the dead-letter
// queue, and it stays visible (and resettable) in the Web UI while the receiver is down.
func (a *Activities) Deliver(ctx context.Context, req DeliverRequest) error {
	err := a.deliver(ctx, req)
	result := "ok"
	if err != nil {
		result = "error"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"result": result}).Counter(MetricDeliveries).Inc(1)
	return err
}

func (a *Activities) deliver(ctx context.Context, req DeliverRequest) error {
	signer, err := a.signer()
	if err != nil {
		return temporal.NewApplicationError(err.Error(), FailureWorkerConfig)
	}
	msgID := activity.GetInfo(ctx).WorkflowExecution.ID
	now := time.Now()
	signature, err := signer.Sign(msgID, now, req.Body)
	if err != nil {
		return temporal.NewApplicationError("signing delivery: "+err.Error(), FailureWorkerConfig)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.NotifyURL, bytes.NewReader(req.Body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("notify_url: "+err.Error(), FailureWorkerConfig, nil)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set(standardwebhooks.HeaderWebhookID, msgID)
	httpReq.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	httpReq.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	defer keepAlive(ctx)()
	resp, err := a.HTTP.Do(httpReq)
	if err != nil {
		return temporal.NewApplicationError("delivering to notify_url: "+err.Error(), FailureDeliveryRejected)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return temporal.NewApplicationError(
			fmt.Sprintf("notify_url answered %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet))),
			FailureDeliveryRejected)
	}
	return nil
}

// signer keys the HMAC with NOTIFY_SECRET: a "whsec_" secret is base64 as the spec's libraries issue them, any
// other value is used as raw bytes.
func (a *Activities) signer() (*standardwebhooks.Webhook, error) {
	if a.NotifySecret == "" {
		return nil, fmt.Errorf("NOTIFY_SECRET is not set on the worker; set it and restart the worker to deliver")
	}
	if strings.HasPrefix(a.NotifySecret, "whsec_") {
		wh, err := standardwebhooks.NewWebhook(a.NotifySecret)
		if err != nil {
			return nil, fmt.Errorf("NOTIFY_SECRET starts with whsec_ but is not valid base64")
		}
		return wh, nil
	}
	return standardwebhooks.NewWebhookRaw([]byte(a.NotifySecret))
}
