package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// submitFunc submits one task through a client of one protocol for base, with the given per-request timeout; the
// submission must fail.
type submitFunc func(t *testing.T, base string, timeout time.Duration, opts ...Option) error

// submitTo is in.php's submitFunc.
func submitTo(t *testing.T, base string, timeout time.Duration, opts ...Option) error {
	t.Helper()
	c, err := NewInPHP(base, testKey, append([]Option{WithTimeout(timeout)}, opts...)...)
	require.NoError(t, err)
	_, _, err = c.Submit(context.Background(), "userrecaptcha",
		map[string]string{"googlekey": "6Le-site", "pageurl": "https://example.com/login"}, "https://hooks.example/callback/wf-1?t=tok")
	require.Error(t, err)
	return err
}

// fakeGateway stands for a proxy or load balancer in front of the provider: every in.php request it receives in
// full is forwarded, so the provider creates (and charges for) a task, and then the gateway answers status with
// body instead of the provider's answer.
type fakeGateway struct {
	created atomic.Int64
	srv     *httptest.Server
}

func newFakeGateway(t *testing.T, status int, body string) *fakeGateway {
	t.Helper()
	g := &fakeGateway{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			g.created.Add(1) // the provider behind the gateway created the task
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// outcomeRow is one row of the in.php outcome table (docs: "Lost in.php answers"): a failure, and whether the
// provider may have acted on the request.
type outcomeRow struct {
	name    string
	status  int    // the gateway's answer; 0 for the rows that build their own server
	body    string // its body
	unknown bool   // OutcomeUnknown: the workflow waits for the lost submission's callback
	class   callback.Class
	code    string // the provider's code, when the body is its own error word
}

// TestGatewayAnswersAfterCreatingTheTask (#15 §1): a 5xx from whatever stands in front of in.php, after the task
// was created, is "outcome unknown" (the never-pay-twice path), unless its body is the provider's own error word,
// which is then the answer. A 4xx is refused before anything was done (known).
func TestGatewayAnswersAfterCreatingTheTask(t *testing.T) {
	const page = "<html><body><h1>Bad gateway</h1><p>cloudflare</p></body></html>"
	rows := []outcomeRow{
		{name: "500 page", status: 500, body: page, unknown: true, class: callback.ClassTransient},
		{name: "502 page", status: 502, body: page, unknown: true, class: callback.ClassTransient},
		{name: "503 page", status: 503, body: "Service Unavailable", unknown: true, class: callback.ClassTransient},
		{name: "504 page", status: 504, body: page, unknown: true, class: callback.ClassTransient},
		{name: "502 empty", status: 502, body: "", unknown: true, class: callback.ClassTransient},
		{name: "502 success-shaped body", status: 502, body: `{"status":1,"request":"7300000001"}`, unknown: true, class: callback.ClassTransient},
		{name: "520 unknown error", status: 520, body: page, unknown: true, class: callback.ClassTransient},
		{name: "521 web server down", status: 521, body: page, unknown: true, class: callback.ClassTransient},
		{name: "522 connection timed out", status: 522, body: page, unknown: true, class: callback.ClassTransient},
		{name: "523 origin unreachable", status: 523, body: page, unknown: true, class: callback.ClassTransient},
		{name: "524 a timeout occurred", status: 524, body: page, unknown: true, class: callback.ClassTransient},
		{name: "500 with the provider's plain error word", status: 500, body: "ERROR_NO_SLOT_AVAILABLE", class: callback.ClassTransient, code: "ERROR_NO_SLOT_AVAILABLE"},
		{name: "503 with the provider's JSON error", status: 503, body: `{"status":0,"request":"ERROR_ZERO_BALANCE"}`, class: callback.ClassTransient, code: "ERROR_ZERO_BALANCE"},
		{name: "500 with 2captcha's numbered error", status: 500, body: "ERROR: 1001", class: callback.ClassTransient, code: "ERROR: 1001"},
		{name: "502 with an undocumented ERROR_ word", status: 502, body: "ERROR_SOMETHING_NEW", class: callback.ClassUnknown, code: "ERROR_SOMETHING_NEW"},
		{name: "429 rate limited at the gateway", status: 429, body: page, class: callback.ClassTransient},
		{name: "408 request timeout", status: 408, body: page, class: callback.ClassTransient},
		{name: "403 forbidden", status: 403, body: page, class: callback.ClassConfig},
		{name: "404 not found", status: 404, body: page, class: callback.ClassUnknown},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g := newFakeGateway(t, row.status, row.body)
			err := submitTo(t, g.srv.URL, 5*time.Second)
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, row.unknown, OutcomeUnknown(err), "%v", err)
			assert.Equal(t, row.class, ce.Class, "%v", err)
			assert.Equal(t, row.code, ce.Code, "%v", err)
			assert.Equal(t, row.status, ce.HTTPStatus)
			assert.EqualValues(t, 1, g.created.Load(), "one request, one task at the provider")
			assert.NotContains(t, err.Error(), "cloudflare", "a gateway's page stays out of errors and history")
		})
	}
}

// TestOutcomeUnknownAfterTheRequestWasWritten: a failure after the whole request was written may have created a
// task (outcome unknown), on either protocol.
func TestOutcomeUnknownAfterTheRequestWasWritten(t *testing.T) {
	for name, submit := range map[string]submitFunc{"inphp": submitTo, "createtask": createAt} {
		t.Run(name, func(t *testing.T) { assertLostAnswersAreUnknown(t, submit) })
	}
}

func assertLostAnswersAreUnknown(t *testing.T, submit submitFunc) {
	hangUp := func(linger bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil && linger {
				_ = conn.(*net.TCPConn).SetLinger(0) // RST instead of FIN
			}
			if err == nil {
				_ = conn.Close() // the task "exists"; its answer is lost
			}
		}
	}
	for name, h := range map[string]http.HandlerFunc{
		"connection closed after reading the request": hangUp(false),
		"connection reset after reading the request":  hangUp(true),
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			err := submit(t, srv.URL, 5*time.Second)
			assert.True(t, OutcomeUnknown(err), "%v", err)
			assert.Equal(t, callback.ClassTransient, ClassOf(err))
		})
	}
	t.Run("answer stalled past the client timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		err := submit(t, srv.URL, 200*time.Millisecond)
		assert.True(t, OutcomeUnknown(err), "%v", err)
	})
	for name, body := range map[string]string{
		"unreadable answer": "<html>gateway page</html>",
		"empty answer":      "",
		"truncated JSON":    `{"status":1,"requ`,
	} {
		t.Run(name, func(t *testing.T) {
			g := newFakeGateway(t, 200, body)
			assert.True(t, OutcomeUnknown(submit(t, g.srv.URL, 5*time.Second)))
			assert.EqualValues(t, 1, g.created.Load())
		})
	}
}

// failingWrites is a connection that accepts no byte: every request on it fails before the provider could read it.
type failingWrites struct{ net.Conn }

func (failingWrites) Write([]byte) (int, error) { return 0, syscall.ECONNRESET }

// TestOutcomeKnownBeforeAnythingWasWritten: only provably-unsent failures may be retried at once, on either protocol.
func TestOutcomeKnownBeforeAnythingWasWritten(t *testing.T) {
	for name, submit := range map[string]submitFunc{"inphp": submitTo, "createtask": createAt} {
		t.Run(name, func(t *testing.T) { assertUnsentAreKnown(t, submit) })
	}
}

func assertUnsentAreKnown(t *testing.T, submit submitFunc) {
	t.Run("connection refused", func(t *testing.T) {
		err := submit(t, "http://"+closedAddr(t), 5*time.Second)
		assert.False(t, OutcomeUnknown(err), "%v", err)
		assert.Equal(t, callback.ClassTransient, ClassOf(err))
		assert.True(t, IsTransportError(err))
	})
	t.Run("DNS failure", func(t *testing.T) {
		err := submit(t, "http://captchaflow-no-such-host.invalid", 5*time.Second)
		assert.False(t, OutcomeUnknown(err), "%v", err)
	})
	t.Run("TLS handshake fails", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("no request may reach the handler")
		}))
		defer srv.Close()
		err := submit(t, srv.URL, 5*time.Second) // the test server's certificate is not trusted
		assert.False(t, OutcomeUnknown(err), "%v", err)
	})
	t.Run("request never written", func(t *testing.T) {
		g := newFakeGateway(t, 200, `{"status":1,"request":"1"}`)
		dialer := &net.Dialer{Timeout: time.Second}
		failing := func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return failingWrites{conn}, nil
		}
		err := submit(t, g.srv.URL, 5*time.Second, WithHTTPClient(newHTTPClient(5*time.Second, failing)))
		assert.False(t, OutcomeUnknown(err), "%v", err)
		assert.Equal(t, callback.ClassTransient, ClassOf(err))
		assert.Zero(t, g.created.Load())

		// A caller's own transport does not count bytes: a connection got is taken for reached.
		err = submit(t, g.srv.URL, 5*time.Second, WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: failing}}))
		assert.True(t, OutcomeUnknown(err), "%v", err)
	})
}

func TestATLSConnectionIsCountedUnderneath(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &countingConn{Conn: a}
	assert.Same(t, cc, countingOf(tls.Client(cc, &tls.Config{})))
	assert.Same(t, cc, countingOf(cc))
	assert.Nil(t, countingOf(b))
}

func TestOutcomeUnknownReadsTheError(t *testing.T) {
	assert.False(t, OutcomeUnknown(nil))
	assert.False(t, OutcomeUnknown(errors.New("plain")))
	assert.True(t, OutcomeUnknown(&Error{Op: "submit", Class: callback.ClassTransient, Written: true, Err: errors.New("EOF")}))
	assert.True(t, OutcomeUnknown(&Error{Op: "submit", Class: callback.ClassTransient, Written: true, HTTPStatus: 502}))
	assert.False(t, OutcomeUnknown(&Error{Op: "submit", Class: callback.ClassTransient, Written: true, HTTPStatus: 429}))
	assert.False(t, OutcomeUnknown(fmt.Errorf("wrapped: %w", &Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Written: true})))
}
