package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// deliverErr runs Deliver and returns its application error (failing the test if there is none).
func (s *ActivitiesSuite) deliverErr(notifyURL string) *temporal.ApplicationError {
	_, err := s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: notifyURL, Body: json.RawMessage(`{}`)})
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr
}

// countingServer is a receiver on 127.0.0.1 that counts the requests it gets.
func (s *ActivitiesSuite) countingServer(h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	s.T().Cleanup(srv.Close)
	return srv, &n
}

func (s *ActivitiesSuite) TestDeliverRefusesLoopbackByDefault() {
	s.acts.NotifyAllowPrivate = false
	srv, hits := s.countingServer(nil)
	u, err := url.Parse(srv.URL)
	s.Require().NoError(err)
	// By address, and by a name that resolves to it: the check runs on the address being connected to.
	for _, target := range []string{srv.URL + "/hook", "http://localhost:" + u.Port() + "/hook"} {
		appErr := s.deliverErr(target)
		s.Equal(FailureDeliveryForbidden, appErr.Type(), target)
		s.True(appErr.NonRetryable(), "a forbidden address must not be retried for 24 h")
		s.Contains(appErr.Error(), "notify_url")
		s.Contains(appErr.Error(), "loopback")
		s.Contains(appErr.Error(), "NOTIFY_ALLOW_PRIVATE")
		s.NotContains(appErr.Error(), "/hook", "the URL (which may hold a token) is not repeated")
	}
	s.Zero(hits.Load(), "nothing may reach a refused target")
}

func (s *ActivitiesSuite) TestDeliverToLoopbackWithNotifyAllowPrivate() {
	s.acts.NotifyAllowPrivate = true
	srv, hits := s.countingServer(nil)
	_, err := s.env.ExecuteActivity(s.acts.Deliver, DeliverRequest{NotifyURL: srv.URL, Body: json.RawMessage(`{}`)})
	s.Require().NoError(err)
	s.EqualValues(1, hits.Load())
}

func (s *ActivitiesSuite) TestDeliverRefusesNonHTTPTargets() {
	for _, allow := range []bool{false, true} {
		acts := &Activities{NotifySecret: "notify-secret-value", NotifyAllowPrivate: allow}
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(acts)
		for _, target := range []string{"file:///etc/passwd", "gopher://127.0.0.1:70/_x", "ftp://example.com/x", "http://", "//example.com/x", "unix:///var/run/docker.sock"} {
			_, err := env.ExecuteActivity(acts.Deliver, DeliverRequest{NotifyURL: target, Body: json.RawMessage(`{}`)})
			var appErr *temporal.ApplicationError
			s.Require().True(errors.As(err, &appErr), target)
			s.Equal(FailureDeliveryForbidden, appErr.Type(), target)
			s.True(appErr.NonRetryable(), target)
			s.Contains(appErr.Error(), "notify_url", target)
			s.NotContains(appErr.Error(), "NOTIFY_ALLOW_PRIVATE", "no setting admits it, so none is suggested")
		}
	}
}

func (s *ActivitiesSuite) TestDeliverRefusesCloudMetadataEvenWithNotifyAllowPrivate() {
	for _, allow := range []bool{false, true} {
		acts := &Activities{NotifySecret: "notify-secret-value", NotifyAllowPrivate: allow}
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(acts)
		for _, target := range []string{"http://169.254.169.254/latest/meta-data/iam/", "http://[::ffff:169.254.169.254]/", "http://[fe80::1]:8080/"} {
			_, err := env.ExecuteActivity(acts.Deliver, DeliverRequest{NotifyURL: target, Body: json.RawMessage(`{}`)})
			var appErr *temporal.ApplicationError
			s.Require().True(errors.As(err, &appErr), target)
			s.Equal(FailureDeliveryForbidden, appErr.Type(), target)
			s.True(appErr.NonRetryable(), target)
			s.Contains(appErr.Error(), "link-local", target)
			s.NotContains(appErr.Error(), "NOTIFY_ALLOW_PRIVATE", target)
		}
	}
}

func (s *ActivitiesSuite) TestDeliverDoesNotFollowRedirects() {
	inner, innerHits := s.countingServer(nil)
	for i, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		outer, outerHits := s.countingServer(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inner.URL+"/latest/meta-data/", status)
		})
		appErr := s.deliverErr(outer.URL)
		s.Equal(FailureDeliveryRejected, appErr.Type(), "a 3xx is a rejected delivery")
		s.False(appErr.NonRetryable())
		s.Contains(appErr.Error(), fmt.Sprint(status))
		s.Contains(appErr.Error(), "redirects are not followed")
		s.EqualValues(1, outerHits.Load(), i)
	}
	s.Zero(innerHits.Load(), "the redirect target must not be requested")
}

// A notify_url's path may be its secret (Slack's and Discord's webhook URLs are): the deliver span names the host only.
func TestDeliverSpanHoldsNoPath(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(srv.Close)
	rec := tracetest.NewSpanRecorder()
	ctx, parent := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(context.Background(), "RunActivity:Deliver")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/services/T000/B000/XXXXPATHSECRET", nil)
	require.NoError(t, err)
	resp, err := newDeliveryClient(5*time.Second, true).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	parent.End()
	var deliver []string
	for _, sp := range rec.Ended() {
		for _, kv := range sp.Attributes() {
			assert.NotContains(t, kv.Value.String(), "XXXXPATHSECRET", "%s: %s", sp.Name(), kv.Key)
			if sp.Name() == "deliver" && kv.Key == "url.full" {
				deliver = append(deliver, kv.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{srv.URL + "/REDACTED"}, deliver, "the deliver span names the scheme and host")
}

func (s *ActivitiesSuite) TestDeliverErrorCarriesOnlyAShortSanitisedExcerpt() {
	secret := strings.Repeat("AKIAIOSFODNN7EXAMPLE-instance-credentials ", 40)
	srv, _ := s.countingServer(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "bad\x1b[31m\tsignature\r\n\x00é"+secret)
	})
	appErr := s.deliverErr(srv.URL)
	s.Equal(FailureDeliveryRejected, appErr.Type())
	msg := appErr.Message()
	s.Contains(msg, "notify_url answered 500: bad [31m signature")
	s.LessOrEqual(len(msg), len("notify_url answered 500: ")+maxExcerpt+len("..."))
	for _, c := range []byte(msg) {
		s.True(c >= ' ' && c < 0x7f, "non-printable byte %#x in %q", c, msg)
	}
}

func TestExcerpt(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"  \n\t ":                  "",
		"ok":                       "ok",
		" invalid\r\nsignature  ":  "invalid signature",
		"\x00\x01a\x7f\xffb":       "a b",
		strings.Repeat("x", 100):   strings.Repeat("x", maxExcerpt) + "...",
		strings.Repeat("ab ", 100): strings.Repeat("ab ", 21) + "a...",
	} {
		assert.Equal(t, want, excerpt([]byte(in)), "%q", in)
	}
}

func TestCheckTarget(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "169.254.0.1", "0.0.0.0", "0.1.2.3", "100.64.0.1", "100.127.255.254",
		"224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "198.18.0.1", "192.0.2.1",
		"::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1", "fec0::1", "2001:db8::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a9fe:a9fe::1",
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.1", "172.32.0.1", "11.0.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	}
	for _, s := range refused {
		err := checkTarget(netip.MustParseAddr(s), false)
		assert.ErrorIs(t, err, errForbiddenTarget, s)
	}
	for _, s := range public {
		assert.NoError(t, checkTarget(netip.MustParseAddr(s), false), s)
		assert.NoError(t, checkTarget(netip.MustParseAddr(s), true), s)
	}
	// NOTIFY_ALLOW_PRIVATE admits loopback and private networks, never link-local (cloud metadata), unspecified
	// or multicast.
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "192.168.1.1", "100.64.0.1", "::1", "fd00::1", "::ffff:127.0.0.1"} {
		assert.NoError(t, checkTarget(netip.MustParseAddr(s), true), s)
	}
	for _, s := range []string{"169.254.169.254", "fe80::1", "::ffff:169.254.169.254", "0.0.0.0", "::", "224.0.0.1", "ff02::1"} {
		assert.ErrorIs(t, checkTarget(netip.MustParseAddr(s), true), errForbiddenTarget, s)
	}
	assert.ErrorIs(t, checkTarget(netip.Addr{}, true), errForbiddenTarget)
}

func TestDeliveryClientRefusesAtConnectTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, err := newDeliveryClient(time.Second, false).Get(srv.URL)
	require.ErrorIs(t, err, errForbiddenTarget)
	resp, err := newDeliveryClient(time.Second, true).Get(srv.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.EqualValues(t, 1, hits.Load())
}

// deliverWorkflow delivers once, with the retry policy doing the retries, as the real workflow does.
func deliverWorkflow(ctx workflow.Context, notifyURL string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 5},
	})
	var a *Activities
	return workflow.ExecuteActivity(ctx, a.Deliver, DeliverRequest{NotifyURL: notifyURL, Body: json.RawMessage(`{}`)}).Get(ctx, nil)
}

// twoRunsWorkflow runs deliverWorkflow twice under one workflow ID: a failed task started again, or a reset.
func twoRunsWorkflow(ctx workflow.Context, notifyURL string) error {
	for range 2 {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: "order-42.login"})
		if err := workflow.ExecuteChildWorkflow(cctx, deliverWorkflow, notifyURL).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// idReceiver records the webhook-id of every delivery and answers 503 to the first try of each.
type idReceiver struct {
	mu  sync.Mutex
	ids []string
}

func (r *idReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := req.Header.Get(standardwebhooks.HeaderWebhookID)
	first := len(r.ids) == 0 || r.ids[len(r.ids)-1] != id
	r.ids = append(r.ids, id)
	if first {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func TestDeliveryIDIsStableAcrossRetriesAndNewPerRun(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	rec := &idReceiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(deliverWorkflow)
	env.RegisterWorkflow(twoRunsWorkflow)
	env.RegisterActivity(&Activities{NotifySecret: "notify-secret-value", NotifyAllowPrivate: true})
	env.ExecuteWorkflow(twoRunsWorkflow, srv.URL)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.ids, 4, "two runs, each delivered on its second attempt")
	assert.Equal(t, rec.ids[0], rec.ids[1], "a retry of a delivery keeps its webhook-id")
	assert.Equal(t, rec.ids[2], rec.ids[3], "a retry of a delivery keeps its webhook-id")
	assert.NotEqual(t, rec.ids[0], rec.ids[2], "another run of the workflow ID delivers under a new webhook-id")
	for _, id := range rec.ids {
		assert.True(t, strings.HasPrefix(id, "order-42.login."), id)
	}
}

func TestDeliveryID(t *testing.T) {
	const run = "0b0f4d2a-5d4e-4c3f-9a51-8e2f0c1d2e3f"
	id := deliveryID("order-42.login", run, 0)
	assert.Equal(t, "order-42.login."+run, id)
	assert.Equal(t, "order-42.login", id[:len(id)-len(run)-1], "the workflow ID is all but the run ID's 37 trailing characters")
	assert.NotEqual(t, deliveryID("a", fmt.Sprint(run[:35], "0"), 0), deliveryID("a", run, 0))
	assert.Equal(t, "order-42.login."+run+".r1", deliveryID("order-42.login", run, 1), "a refreshed token is a new result")
	assert.NotEqual(t, deliveryID("a", run, 1), deliveryID("a", run, 2))
}

func TestCheckNotifySecret(t *testing.T) {
	assert.NoError(t, CheckNotifySecret(""))
	assert.NoError(t, CheckNotifySecret("plain-bytes-secret"))
	assert.NoError(t, CheckNotifySecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	for _, bad := range []string{"whsec_not*base64!", "whsec_", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS"} {
		err := CheckNotifySecret(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "NOTIFY_SECRET")
		if v := strings.TrimPrefix(bad, "whsec_"); v != "" {
			assert.NotContains(t, err.Error(), v, "the value is never echoed")
		}
	}
}
