package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// assertNoKey checks every rendering of err, and of every error in its chain.
func assertNoKey(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	for _, format := range []string{"%v", "%+v", "%s", "%q", "%#v"} {
		assert.NotContains(t, fmt.Sprintf(format, err), testKey, "format %s leaks the key", format)
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		assert.NotContains(t, e.Error(), testKey, "wrapped %T leaks the key", e)
		if ue, ok := e.(*url.Error); ok {
			assert.NotContains(t, ue.URL, testKey, "url.Error.URL leaks the key")
		}
	}
}

// urlEchoTransport fails with an error that spells out the whole request URL,
// the way a careless proxy or middleware would.
type urlEchoTransport struct{}

func (urlEchoTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("upstream refused %s", r.URL.String())
}

func TestErrorsNeverContainTheKey(t *testing.T) {
	type call func(c *InPHP) error
	calls := map[string]call{
		"submit": func(c *InPHP) error {
			_, _, err := c.Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
			return err
		},
		"get": func(c *InPHP) error {
			_, err := c.Get(context.Background(), "1")
			return err
		},
		"getbalance": func(c *InPHP) error {
			_, err := c.Balance(context.Background())
			return err
		},
		"reportbad": func(c *InPHP) error { return c.Report(context.Background(), "", "1", false) },
	}

	refused := "http://" + closedAddr(t)
	hanging := hangingProvider(t).URL
	status503 := newFakeProvider(t, always(503, "upstream error for key="+testKey)).srv.URL
	echoJSON := newFakeProvider(t, always(200, `{"status":1,"request":"`+testKey)).srv.URL
	echoPlain := newFakeProvider(t, always(200, "bad key "+testKey)).srv.URL
	echoErrorText := newFakeProvider(t, always(200, `{"status":0,"request":"ERROR_WRONG_USER_KEY","error_text":"key `+testKey+` is wrong"}`)).srv.URL
	// Redirects to a dead address with the key-bearing query kept, so the
	// failing url.Error names a URL the client did not build itself.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, refused+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
	}))
	t.Cleanup(redirect.Close)

	clients := map[string]func(t *testing.T) *InPHP{
		"refused":         func(t *testing.T) *InPHP { return mustNew(t, refused, WithTimeout(2*time.Second)) },
		"timeout":         func(t *testing.T) *InPHP { return mustNew(t, hanging, WithTimeout(100*time.Millisecond)) },
		"5xx":             func(t *testing.T) *InPHP { return mustNew(t, status503) },
		"bad json":        func(t *testing.T) *InPHP { return mustNew(t, echoJSON) },
		"bad plain":       func(t *testing.T) *InPHP { return mustNew(t, echoPlain) },
		"error_text echo": func(t *testing.T) *InPHP { return mustNew(t, echoErrorText) },
		"redirect":        func(t *testing.T) *InPHP { return mustNew(t, redirect.URL, WithTimeout(2*time.Second)) },
		"transport echo": func(t *testing.T) *InPHP {
			return mustNew(t, "http://127.0.0.1:1", WithHTTPClient(&http.Client{Transport: urlEchoTransport{}}))
		},
	}
	for failure, newClient := range clients {
		for op, do := range calls {
			t.Run(failure+"/"+op, func(t *testing.T) {
				assertNoKey(t, do(newClient(t)))
			})
		}
	}
}

func TestCallerDeadlineErrorHasNoKey(t *testing.T) {
	c := mustNew(t, hangingProvider(t).URL, WithTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "1")
	assertNoKey(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestScrubbedErrorKeepsContextCause(t *testing.T) {
	err := redactError(fmt.Errorf("leak %s: %w", testKey, context.DeadlineExceeded), testKey)
	assert.NotContains(t, err.Error(), testKey)
	assert.Contains(t, err.Error(), redactedMarker)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestURLErrorLosesItsSecrets(t *testing.T) {
	strip := func(raw string) string {
		return redactError(&url.Error{Op: "Get", URL: raw, Err: errors.New("x")}, testKey).(*url.Error).URL
	}
	assert.Equal(t, "https://h/res.php", strip("https://user:pw@h/res.php?key="+testKey+"&id=1#x"))
	assert.Equal(t, "%zz", strip("%zz?key="+testKey))
}

func mustNew(t *testing.T, base string, opts ...Option) *InPHP {
	t.Helper()
	c, err := NewInPHP(base, testKey, opts...)
	require.NoError(t, err)
	return c
}

// A provider URL that redirects keeps the key: no request reaches the host Location names (a 307/308 would re-send
// the POST body with key= or clientKey), and the redirect is a configuration error, not a lost answer.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	var elsewhere, keys atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if elsewhere.Add(1); strings.Contains(r.URL.RawQuery+string(body), testKey) {
			keys.Add(1)
		}
	}))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path+"?"+r.URL.RawQuery, status)
		}))
		t.Cleanup(redirect.Close)
		inphp := mustNew(t, redirect.URL)
		ct, err := NewCreateTask(callback.CapSolver, redirect.URL, testKey)
		require.NoError(t, err)
		for op, call := range map[string]func() error{
			"in.php": func() error {
				_, _, err := inphp.Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
				return err
			},
			"res.php": func() error { _, err := inphp.Get(context.Background(), "1"); return err },
			"createTask": func() error {
				_, _, err := ct.Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
				return err
			},
		} {
			err := call()
			var ce *Error
			require.ErrorAs(t, err, &ce, "%s %d", op, status)
			assert.Equal(t, callback.ClassConfig, ce.Class, "%s %d: %v", op, status, err)
			assert.Equal(t, status, ce.HTTPStatus, op)
			assert.False(t, OutcomeUnknown(err), "%s %d: the provider did not take it at that URL: nothing was paid", op, status)
			assert.Contains(t, err.Error(), "not followed", op)
			assertNoKey(t, err)
		}
	}
	assert.Zero(t, keys.Load(), "the key never reaches the host Location names")
	assert.Zero(t, elsewhere.Load(), "the host Location names is never asked")
}
