package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
