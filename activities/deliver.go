package activities

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.opentelemetry.io/otel/propagation"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow/internal/telemetry"
)

// DeliverRequest is one result for one notify_url; Body is the JSON document the workflow built.
type DeliverRequest struct {
	NotifyURL string          `json:"notify_url"`
	Body      json.RawMessage `json:"body"`
	Refresh   int             `json:"refresh,omitempty"`  // N for the token of the Nth refresh: a new result, a new webhook-id
	RunID     string          `json:"run_id,omitempty"`   // the reset chain's first run: a reset run keeps the webhook-id
	Observed  *ObserveRequest `json:"observed,omitempty"` // for the routing model (routing: scored), taken on the first attempt
}

// Deliver POSTs the result, signed per Standard Webhooks (receivers drop duplicates by webhook-id); retried unless forbidden.
func (a *Activities) Deliver(ctx context.Context, req DeliverRequest) (err error) {
	if req.Observed != nil && activity.GetInfo(ctx).Attempt == 1 {
		_ = a.Observe(ctx, *req.Observed)
	}
	defer func() {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"result": map[bool]string{true: "ok", false: "error"}[err == nil]}).
			Counter(MetricDeliveries).Inc(1)
	}()
	ctx = telemetry.Annotate(ctx, activity.GetInfo(ctx).WorkflowExecution.ID, "", "")
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

// deliveryID is one result's webhook-id, kept by retries: "<workflow ID>.<run ID>", ".r<N>" after the Nth refresh.
func deliveryID(workflowID, runID string, refresh int) string {
	if refresh > 0 {
		return fmt.Sprintf("%s.%s.r%d", workflowID, runID, refresh)
	}
	return workflowID + "." + runID
}

// signedRequest is the signed POST to an http(s) URL with a host; where it may connect is the client's to check.
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

// CheckNotifySecret refuses a NOTIFY_SECRET that cannot sign (unset is allowed: deliveries retry until it is set).
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

// errForbiddenTarget marks an address the worker refuses to connect to (notify_url is anyone's, and the worker sits next
// to metadata endpoints and admin UIs: deliveries go to public addresses only); its errors name the address, never the URL.
var errForbiddenTarget = errors.New("forbidden target")

// reservedRanges are the non-public ranges netip's predicates do not cover (255.255.255.255 is in 240.0.0.0/4).
var reservedRanges = func() (out []netip.Prefix) {
	for _, p := range strings.Fields(`0.0.0.0/8 100.64.0.0/10 192.0.0.0/24 192.0.2.0/24 198.18.0.0/15 198.51.100.0/24
		203.0.113.0/24 240.0.0.0/4 ::/96 64:ff9b:1::/48 100::/64 2001:db8::/32 fec0::/10`) {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// NAT64 and 6to4 addresses reach the IPv4 address they embed (at these byte offsets).
var nat64, sixToFour = netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("2002::/16")

// admitted ends the refusal of an address NOTIFY_ALLOW_PRIVATE admits.
const admitted = " (deliveries go to public addresses only; NOTIFY_ALLOW_PRIVATE=true on the worker admits private ones)"

func refuse(addr netip.Addr, reason, hint string) error {
	return fmt.Errorf("%w: %s is a %s address%s", errForbiddenTarget, addr, reason, hint)
}

// checkTarget decides whether a delivery may connect to addr; link-local (cloud metadata) is refused even if allowPrivate.
func checkTarget(addr netip.Addr, allowPrivate bool) error {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	switch {
	case !addr.IsValid(), addr.IsUnspecified():
		return refuse(addr, "unspecified", "")
	case addr.IsMulticast():
		return refuse(addr, "multicast", "")
	case addr.IsLinkLocalUnicast():
		return refuse(addr, "link-local", "")
	case allowPrivate:
		return nil
	case addr.IsLoopback():
		return refuse(addr, "loopback", admitted)
	case addr.IsPrivate():
		return refuse(addr, "private", admitted)
	case slices.ContainsFunc(reservedRanges, func(p netip.Prefix) bool { return p.Contains(addr) }):
		return refuse(addr, "reserved", admitted)
	}
	b := addr.As16()
	inner, embeds := netip.AddrFrom4([4]byte(b[12:16])), nat64.Contains(addr)
	if sixToFour.Contains(addr) {
		inner, embeds = netip.AddrFrom4([4]byte(b[2:6])), true
	}
	if !embeds {
		return nil
	} else if err := checkTarget(inner, false); err != nil {
		return fmt.Errorf("%s embeds %s: %w", addr, inner, err)
	}
	return nil
}

// newDeliveryClient checks targets at connect time (after DNS); no redirects, no proxy (it would hide the target).
func newDeliveryClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot parse dial address %q", errForbiddenTarget, address)
			}
			return checkTarget(ap.Addr(), allowPrivate)
		}}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy, transport.DialContext = nil, dialer.DialContext
	// The customer may join the task's trace: a W3C traceparent header, and nothing else of ours (no baggage).
	traced := telemetry.Transport(transport, propagation.TraceContext{}, func(*http.Request) string { return "deliver" })
	return &http.Client{Transport: traced, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

const maxExcerpt = 64 // bytes of a receiver's answer the activity error (history, Web UI) may hold

// excerpt keeps at most maxExcerpt bytes of printable ASCII from b, anything else collapsed to one space.
func excerpt(b []byte) string {
	s := strings.Join(strings.FieldsFunc(string(b), func(r rune) bool { return r <= ' ' || r >= 0x7f }), " ")
	if len(s) > maxExcerpt {
		return s[:maxExcerpt] + "..."
	}
	return s
}

// describeDeliveryError drops the URL (it may carry the receiver's credentials or token) from net/http's errors.
func describeDeliveryError(err error) string {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err
	}
	return err.Error()
}
