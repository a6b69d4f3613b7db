package captchaai

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// submitTo submits through a client for base with the given per-request timeout.
func submitTo(t *testing.T, base string, timeout time.Duration) error {
	t.Helper()
	c, err := New(base, testKey, WithTimeout(timeout))
	require.NoError(t, err)
	_, err = c.Submit(context.Background(), "userrecaptcha",
		map[string]string{"googlekey": "6Le-site", "pageurl": "https://example.com/login"}, "https://hooks.example/callback/wf-1?t=tok")
	require.Error(t, err)
	return err
}

// #10 §6: a failure after the request was written may have created a task (outcome unknown); one before anything was
// written is known not to have reached the provider.
func TestOutcomeUnknownAfterTheRequestWasWritten(t *testing.T) {
	t.Run("connection closed after reading the request", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close() // the task "exists"; its answer is lost
			}
		}))
		defer srv.Close()
		err := submitTo(t, srv.URL, 5*time.Second)
		assert.True(t, OutcomeUnknown(err), "%v", err)
		assert.Equal(t, ClassTransient, ClassOf(err))
	})
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
		err := submitTo(t, srv.URL, 200*time.Millisecond)
		assert.True(t, OutcomeUnknown(err), "%v", err)
	})
	t.Run("unreadable answer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "<html>gateway page</html>")
		}))
		defer srv.Close()
		assert.True(t, OutcomeUnknown(submitTo(t, srv.URL, 5*time.Second)))
	})
}

func TestOutcomeKnownBeforeAnythingWasWritten(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		err = submitTo(t, "http://"+addr, 5*time.Second)
		assert.False(t, OutcomeUnknown(err), "%v", err)
		assert.Equal(t, ClassTransient, ClassOf(err))
	})
	t.Run("DNS failure", func(t *testing.T) {
		err := submitTo(t, "http://captchaflow-no-such-host.invalid", 5*time.Second)
		assert.False(t, OutcomeUnknown(err), "%v", err)
	})
	t.Run("TLS handshake fails", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("no request may reach the handler")
		}))
		defer srv.Close()
		err := submitTo(t, srv.URL, 5*time.Second) // the test server's certificate is not trusted
		assert.False(t, OutcomeUnknown(err), "%v", err)
	})
	t.Run("provider answers", func(t *testing.T) {
		for _, rp := range []struct {
			status int
			body   string
		}{{200, "ERROR_NO_SLOT_AVAILABLE"}, {503, "busy"}, {502, "bad gateway"}} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(rp.status)
				_, _ = io.WriteString(w, rp.body)
			}))
			err := submitTo(t, srv.URL, 5*time.Second)
			srv.Close()
			assert.False(t, OutcomeUnknown(err), "%d %s: an answer is a known outcome", rp.status, rp.body)
		}
	})
	assert.False(t, OutcomeUnknown(nil))
	assert.False(t, OutcomeUnknown(errors.New("plain")))
	assert.True(t, OutcomeUnknown(&Error{Op: opSubmit, Class: ClassTransient, Written: true, Err: errors.New("EOF")}))
}
