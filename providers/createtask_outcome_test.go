package providers

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

func createAt(t *testing.T, base string, timeout time.Duration) error {
	t.Helper()
	c, err := NewCreateTask(callback.AntiCaptcha, base, testKey, WithTimeout(timeout))
	require.NoError(t, err)
	_, _, err = c.Submit(context.Background(), "userrecaptcha", recaptchaParams, "https://hooks.example/cb")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testKey)
	return err
}

// Never pay twice: a createTask that failed after the request was written may have created a paid task.
func TestCreateOutcomeUnknownAfterTheRequestWasWritten(t *testing.T) {
	t.Run("connection closed after reading the request", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
		}))
		defer srv.Close()
		err := createAt(t, srv.URL, 5*time.Second)
		assert.True(t, OutcomeUnknown(err), "%v", err)
		assert.Equal(t, callback.ClassTransient, ClassOf(err))
	})
	t.Run("answer stalled past the timeout", func(t *testing.T) {
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
		assert.True(t, OutcomeUnknown(createAt(t, srv.URL, 200*time.Millisecond)))
	})
	t.Run("unreadable answer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "<html>gateway page</html>")
		}))
		defer srv.Close()
		assert.True(t, OutcomeUnknown(createAt(t, srv.URL, 5*time.Second)))
	})
}

// Only provably-unsent failures may be retried at once.
func TestCreateOutcomeKnownBeforeAnythingWasWritten(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	err = createAt(t, "http://"+addr, 5*time.Second)
	assert.False(t, OutcomeUnknown(err), "connection refused: %v", err)
	assert.True(t, IsTransportError(err))

	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("no request may reach the handler")
	}))
	defer srv.Close()
	assert.False(t, OutcomeUnknown(createAt(t, srv.URL, 5*time.Second)), "TLS handshake failed")
}

// A gateway in front of the provider forwards createTask (the task is created and charged) and answers a 5xx page
// instead of the provider's answer: the outcome is unknown, by the in.php client's rule (OutcomeUnknown).
// A caller retries at once only a known transient failure, so no task may be created twice. A 5xx carrying the
// provider's own envelope is its answer: known.
func TestCreateGatewayErrorAfterCreateIsPaidOnce(t *testing.T) {
	const tasks = 6
	for _, status := range []int{500, 502, 504, 520} {
		p := newFake(t, ctAlways(status, `<html><h1>Gateway Timeout</h1></html>`))
		twice := 0
		for range tasks {
			before := len(p.requests())
			err := createAt(t, p.srv.URL, 5*time.Second)
			if !OutcomeUnknown(err) && ClassOf(err) == callback.ClassTransient {
				_ = createAt(t, p.srv.URL, 5*time.Second) // what the activity's retry policy does with it
			}
			if len(p.requests())-before > 1 {
				twice++
			}
		}
		assert.Zero(t, twice, "HTTP %d: tasks created twice, of %d", status, tasks)
	}
	p := newFake(t, ctAlways(503, `{"errorId":1,"errorCode":"ERROR_SERVICE_UNAVALIABLE","errorDescription":"busy"}`))
	err := createAt(t, p.srv.URL, 5*time.Second)
	assert.False(t, OutcomeUnknown(err), "the provider's own answer on a 5xx: %v", err)
}
