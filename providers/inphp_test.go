package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

func TestNewValidates(t *testing.T) {
	_, err := NewInPHP("https://ocr.providers.com", testKey)
	require.NoError(t, err)

	for _, base := range []string{"", "ocr.providers.com", "ftp://x", "http://", "https://h/?key=" + testKey, "https://h/#frag", "::bad::"} {
		_, err := NewInPHP(base, testKey)
		require.Error(t, err, base)
		assert.NotContains(t, err.Error(), testKey)
	}
	_, err = NewInPHP("https://ocr.providers.com", "")
	require.Error(t, err)
}

func TestNewJoinsPathPrefix(t *testing.T) {
	c, err := NewInPHP("https://proxy.example/captchaai/", testKey)
	require.NoError(t, err)
	assert.Equal(t, "https://proxy.example/captchaai/in.php", c.inURL)
	assert.Equal(t, "https://proxy.example/captchaai/res.php", c.resURL)
}

func TestSubmitForm(t *testing.T) {
	for name, body := range map[string]string{
		"json":  `{"status":1,"request":"7354961212"}`,
		"plain": "OK|7354961212",
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, body))
			id, _, err := p.client(t).Submit(context.Background(), "userrecaptcha",
				map[string]string{"googlekey": "6Le-site", "pageurl": "https://example.com/login"},
				"https://hooks.example/callback/wf-1?t=tok")
			require.NoError(t, err)
			assert.Equal(t, "7354961212", id)

			r := p.lastRequest(t)
			assert.Equal(t, http.MethodPost, r.Method)
			assert.Equal(t, "/in.php", r.URL.Path)
			assert.Empty(t, r.URL.RawQuery, "key must travel in the body, not the URL")
			assert.Equal(t, "application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
			assert.Equal(t, testKey, r.PostForm.Get("key"))
			assert.Equal(t, "userrecaptcha", r.PostForm.Get("method"))
			assert.Equal(t, "1", r.PostForm.Get("json"))
			assert.Equal(t, "6Le-site", r.PostForm.Get("googlekey"))
			assert.Equal(t, "https://example.com/login", r.PostForm.Get("pageurl"))
			assert.Equal(t, "https://hooks.example/callback/wf-1?t=tok", r.PostForm.Get("pingback"))
		})
	}
}

func TestSubmitOmitsEmptyPingback(t *testing.T) {
	p := newFakeProvider(t, always(200, `{"status":1,"request":"1"}`))
	_, _, err := p.client(t).Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
	require.NoError(t, err)
	_, present := p.lastRequest(t).PostForm["pingback"]
	assert.False(t, present)
}

// pngImage is a minimal PNG header: enough for content sniffing.
var pngImage = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0x42}, 200)...)

func TestSubmitPostUploadsMultipartFile(t *testing.T) {
	p := newFakeProvider(t, always(200, `{"status":1,"request":"99"}`))
	id, _, err := p.client(t).Submit(context.Background(), "post",
		map[string]string{"file": base64.StdEncoding.EncodeToString(pngImage), "numeric": "1"},
		"https://hooks.example/cb")
	require.NoError(t, err)
	assert.Equal(t, "99", id)

	r := p.lastRequest(t)
	assert.Empty(t, r.URL.RawQuery)
	require.NotNil(t, r.MultipartForm, "method post must be sent as multipart/form-data")
	assert.Equal(t, []string{testKey}, r.MultipartForm.Value["key"])
	assert.Equal(t, []string{"post"}, r.MultipartForm.Value["method"])
	assert.Equal(t, []string{"1"}, r.MultipartForm.Value["json"])
	assert.Equal(t, []string{"1"}, r.MultipartForm.Value["numeric"])
	assert.Equal(t, []string{"https://hooks.example/cb"}, r.MultipartForm.Value["pingback"])
	assert.NotContains(t, r.MultipartForm.Value, "file", "the image must be a file part, not a base64 field")

	files := r.MultipartForm.File["file"]
	require.Len(t, files, 1)
	assert.Equal(t, "captcha.png", files[0].Filename)
	assert.Equal(t, "image/png", files[0].Header.Get("Content-Type"))
	f, err := files[0].Open()
	require.NoError(t, err)
	defer f.Close()
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, pngImage, got)
}

func TestSubmitPostAcceptsDataURIAndURLSafeBase64(t *testing.T) {
	for name, encoded := range map[string]string{
		"data uri": "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngImage),
		"url safe": base64.RawURLEncoding.EncodeToString(pngImage),
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, `{"status":1,"request":"5"}`))
			_, _, err := p.client(t).Submit(context.Background(), "post", map[string]string{"file": encoded}, "")
			require.NoError(t, err)
		})
	}
}

func TestSubmitRejectsBadInputWithoutCallingProvider(t *testing.T) {
	tests := map[string]struct {
		method string
		params map[string]string
	}{
		"empty method":         {"", nil},
		"post without file":    {"post", map[string]string{"numeric": "1"}},
		"post with bad base64": {"post", map[string]string{"file": "!!not base64!!"}},
		"overrides key":        {"userrecaptcha", map[string]string{"key": "other"}},
		"overrides json":       {"userrecaptcha", map[string]string{"json": "0"}},
		"overrides pingback":   {"userrecaptcha", map[string]string{"pingback": "x"}},
	}
	p := newFakeProvider(t, always(200, `{"status":1,"request":"1"}`))
	c := p.client(t)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := c.Submit(context.Background(), tt.method, tt.params, "")
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, callback.ClassConfig, ce.Class)
			assert.Equal(t, "submit", ce.Op)
		})
	}
	assert.Zero(t, p.requestCount())
}

func TestGet(t *testing.T) {
	tests := map[string]struct{ body, want string }{
		"json":            {`{"status":1,"request":"03AGdBq24"}`, "03AGdBq24"},
		"plain":           {"OK|03AGdBq24", "03AGdBq24"},
		"json structured": {`{"status":1,"request":{"captcha_output":"o"}}`, `{"captcha_output":"o"}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, tt.body))
			got, err := p.client(t).Get(context.Background(), "7354961212")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			q := p.lastRequest(t).URL.Query()
			assert.Equal(t, "/res.php", p.lastRequest(t).URL.Path)
			assert.Equal(t, testKey, q.Get("key"))
			assert.Equal(t, "get", q.Get("action"))
			assert.Equal(t, "7354961212", q.Get("id"))
			assert.Equal(t, "1", q.Get("json"))
		})
	}
}

func TestGetNotReady(t *testing.T) {
	for _, body := range []string{`{"status":0,"request":"CAPCHA_NOT_READY"}`, "CAPCHA_NOT_READY", "CAPTCHA_NOT_READY"} {
		p := newFakeProvider(t, always(200, body))
		_, err := p.client(t).Get(context.Background(), "1")
		var ce *Error
		require.ErrorAs(t, err, &ce, body)
		assert.Equal(t, callback.ClassNotReady, ce.Class)
		assert.Equal(t, callback.ClassNotReady, ClassOf(err))
	}
}

func TestGetRequiresTaskID(t *testing.T) {
	p := newFakeProvider(t, always(200, "OK|x"))
	_, err := p.client(t).Get(context.Background(), "")
	assert.Equal(t, callback.ClassConfig, ClassOf(err))
	assert.Zero(t, p.requestCount())
}

func TestBalance(t *testing.T) {
	for name, body := range map[string]string{
		"json string": `{"status":1,"request":"12.3456"}`,
		"json number": `{"status":1,"request":12.3456}`,
		"plain bare":  "12.3456",
		"plain OK":    "OK|12.3456",
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, body))
			got, err := p.client(t).Balance(context.Background())
			require.NoError(t, err)
			assert.InDelta(t, 12.3456, got, 1e-9)
			assert.Equal(t, "getbalance", p.lastRequest(t).URL.Query().Get("action"))
		})
	}
}

func TestBalanceNotANumber(t *testing.T) {
	for _, body := range []string{`{"status":1,"request":"lots"}`, `{"status":1,"request":"NaN"}`} {
		p := newFakeProvider(t, always(200, body))
		_, err := p.client(t).Balance(context.Background())
		assert.Equal(t, callback.ClassTransient, ClassOf(err), body)
	}
}

func TestReports(t *testing.T) {
	for _, body := range []string{`{"status":1,"request":"OK_REPORT_RECORDED"}`, "OK_REPORT_RECORDED"} {
		p := newFakeProvider(t, always(200, body))
		c := p.client(t)

		require.NoError(t, c.Report(context.Background(), "", "42", true))
		q := p.lastRequest(t).URL.Query()
		assert.Equal(t, "reportgood", q.Get("action"))
		assert.Equal(t, "42", q.Get("id"))

		require.NoError(t, c.Report(context.Background(), "", "43", false))
		q = p.lastRequest(t).URL.Query()
		assert.Equal(t, "reportbad", q.Get("action"))
		assert.Equal(t, "43", q.Get("id"))
	}
}

func TestReportRejected(t *testing.T) {
	p := newFakeProvider(t, always(200, `{"status":0,"request":"ERROR_DUPLICATE_REPORT"}`))
	err := p.client(t).Report(context.Background(), "", "42", false)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "reportbad", ce.Op)
	assert.Equal(t, "ERROR_DUPLICATE_REPORT", ce.Code)
}

// Every provider code reaches the caller with the right class, through both
// wire forms and both endpoints.
func TestProviderErrorClasses(t *testing.T) {
	tests := []struct {
		code string
		want callback.Class
	}{
		{"ERROR_WRONG_USER_KEY", callback.ClassConfig},
		{"ERROR_KEY_DOES_NOT_EXIST", callback.ClassConfig},
		{"ERROR_PAGEURL", callback.ClassConfig},
		{"ERROR_WRONG_CAPTCHA_ID", callback.ClassConfig},
		{"ERROR_UPLOAD", callback.ClassConfig},
		{"ERROR_NO_SLOT_AVAILABLE", callback.ClassTransient},
		{"ERROR_ZERO_BALANCE", callback.ClassTransient},
		{"MAX_USER_TURN", callback.ClassTransient},
		{"IP_BANNED", callback.ClassTransient},
		{"ERROR: 1003", callback.ClassTransient},
		{"ERROR_CAPTCHA_UNSOLVABLE", callback.ClassResubmit},
		{"ERROR_BAD_DUPLICATES", callback.ClassResubmit},
		{"CAPCHA_NOT_READY", callback.ClassNotReady},
		{"ERROR_BRAND_NEW_CODE", callback.ClassUnknown},
	}
	for _, tt := range tests {
		for form, body := range map[string]string{
			"json":  `{"status":0,"request":"` + tt.code + `","error_text":"details"}`,
			"plain": tt.code,
		} {
			t.Run(tt.code+"/"+form, func(t *testing.T) {
				p := newFakeProvider(t, always(200, body))
				c := p.client(t)

				_, _, err := c.Submit(context.Background(), "userrecaptcha", map[string]string{"googlekey": "k"}, "")
				var ce *Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "submit", ce.Op)
				assert.Equal(t, tt.code, ce.Code)
				assert.Equal(t, tt.want, ce.Class)
				assert.Contains(t, err.Error(), tt.code, "the code must be in the message")

				_, err = c.Get(context.Background(), "1")
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "get", ce.Op)
				assert.Equal(t, tt.want, ce.Class)
			})
		}
	}
}

func TestHTTPStatusClasses(t *testing.T) {
	tests := map[int]callback.Class{
		500: callback.ClassTransient, 502: callback.ClassTransient, 503: callback.ClassTransient,
		429: callback.ClassTransient, 408: callback.ClassTransient,
		401: callback.ClassConfig, 403: callback.ClassConfig,
		404: callback.ClassUnknown, 400: callback.ClassUnknown,
	}
	for status, want := range tests {
		// The body looks like a success to prove the status alone decides.
		p := newFakeProvider(t, always(status, `{"status":1,"request":"1"}`))
		_, err := p.client(t).Get(context.Background(), "1")
		var ce *Error
		require.ErrorAs(t, err, &ce, status)
		assert.Equal(t, want, ce.Class, status)
		assert.Equal(t, status, ce.HTTPStatus)
		assert.Empty(t, ce.Code)
	}
}

func TestMalformedAnswersAreTransient(t *testing.T) {
	for name, body := range map[string]string{
		"empty":          "",
		"truncated json": `{"status":1,"req`,
		"html":           "<html><h1>Bad Gateway</h1></html>",
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, body))
			_, _, err := p.client(t).Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, callback.ClassTransient, ce.Class)
			assert.ErrorIs(t, err, callback.ErrMalformed)
		})
	}
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	c, err := NewInPHP("http://"+closedAddr(t), testKey, WithTimeout(2*time.Second))
	require.NoError(t, err)
	_, err = c.Get(context.Background(), "1")
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, callback.ClassTransient, ce.Class)
	assert.Equal(t, "get", ce.Op)
}

func TestPerRequestTimeout(t *testing.T) {
	srv := hangingProvider(t)
	c, err := NewInPHP(srv.URL, testKey, WithTimeout(150*time.Millisecond))
	require.NoError(t, err)

	start := time.Now()
	_, err = c.Get(context.Background(), "1")
	assert.Less(t, time.Since(start), 5*time.Second, "the timeout must bound the call")
	assert.Equal(t, callback.ClassTransient, ClassOf(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestContextDeadlineBoundsRequest(t *testing.T) {
	srv := hangingProvider(t)
	c, err := NewInPHP(srv.URL, testKey, WithTimeout(time.Minute))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err = c.Submit(ctx, "hcaptcha", map[string]string{"sitekey": "s"}, "")
	assert.Less(t, time.Since(start), 5*time.Second, "the caller's deadline must bound the call")
	assert.Equal(t, callback.ClassTransient, ClassOf(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCanceledContext(t *testing.T) {
	p := newFakeProvider(t, always(200, "OK|1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.client(t).Get(ctx, "1")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, callback.ClassTransient, ClassOf(err))
}

func TestOversizedAnswerIsRejected(t *testing.T) {
	p := newFakeProvider(t, always(200, "OK|"+string(bytes.Repeat([]byte("x"), maxAnswerBytes+10))))
	_, err := p.client(t).Get(context.Background(), "1")
	assert.ErrorIs(t, err, callback.ErrMalformed)
	assert.Equal(t, callback.ClassTransient, ClassOf(err))
}

// countingTransport fails the test's expectations if anything uses it.
type countingTransport struct{ calls atomic.Int64 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return nil, errors.New("http.DefaultTransport must not be used")
}

// Not parallel: swaps the process-wide default transport.
func TestDoesNotUseOrChangeDefaultTransport(t *testing.T) {
	original := http.DefaultTransport
	spy := &countingTransport{}
	http.DefaultTransport = spy
	t.Cleanup(func() { http.DefaultTransport = original })
	originalClient := *http.DefaultClient

	p := newFakeProvider(t, always(200, `{"status":1,"request":"1"}`))
	c := p.client(t)
	_, err := c.Get(context.Background(), "1")
	require.NoError(t, err)
	_, _, err = c.Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
	require.NoError(t, err)

	assert.Zero(t, spy.calls.Load())
	assert.Same(t, spy, http.DefaultTransport)
	assert.Equal(t, originalClient, *http.DefaultClient)

	_, ok := c.http.Transport.(*otelhttp.Transport) // its own *http.Transport under the tracing wrapper
	require.True(t, ok, "default client must have its own traced transport")
	assert.Equal(t, 5*time.Second, c.http.Timeout)
}

func TestWithHTTPClientIsUsed(t *testing.T) {
	spy := &countingTransport{}
	c, err := NewInPHP("http://127.0.0.1:1", testKey, WithHTTPClient(&http.Client{Transport: spy}))
	require.NoError(t, err)
	_, err = c.Get(context.Background(), "1")
	require.Error(t, err)
	assert.EqualValues(t, 1, spy.calls.Load())
}

func TestHugeProviderCodeIsTruncated(t *testing.T) {
	huge := string(bytes.Repeat([]byte("E"), 10_000))
	p := newFakeProvider(t, always(200, `{"status":0,"request":"`+huge+`","error_text":"`+huge+`"}`))
	_, err := p.client(t).Get(context.Background(), "1")
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, callback.ClassUnknown, ce.Class)
	assert.Less(t, len(err.Error()), 1024)
}
