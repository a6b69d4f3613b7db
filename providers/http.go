package providers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/providers/callback"
)

const (
	maxAnswerBytes              = 1 << 20  // real answers are a few KB at most
	maxStatusBody               = 4 << 10  // read of a failed status's body for the provider's own error answer
	maxCodeLen, maxErrorTextLen = 128, 512 // a provider's code and text end up in logs and history: it must not bloat them
	redactedMarker              = "REDACTED"
)

// Error is every error a client returns, network and context failures included; its text never holds the API key.
type Error struct {
	Op         string // the call: "submit", "get", "createTask", "getTaskResult", …
	Code       string // the provider's code, e.g. "ERROR_NO_SLOT_AVAILABLE"; "" for network/HTTP/decode errors
	Class      callback.Class
	HTTPStatus int    // when the failure was an HTTP status
	Err        error  // the cause, already redacted
	Written    bool   // no answer came after (part of) the request was written: the provider may have acted on it
	Provider   string // who answered, the message's prefix ("captchaai", "createtask capsolver")
}

// ErrInvalidAnswer marks a success answer that cannot be what it claims (not an id, an empty or oversized code).
var ErrInvalidAnswer = errors.New("invalid provider answer")

// OutcomeUnknown: err came after the request was written (a lost or gateway's answer): a paid task may exist.
func OutcomeUnknown(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce != nil && ce.Written && ce.Code == "" && (ce.HTTPStatus == 0 || ce.HTTPStatus >= 500)
}

func (e *Error) Error() string {
	what := e.Code
	if what == "" && e.HTTPStatus != 0 {
		what = "HTTP " + strconv.Itoa(e.HTTPStatus)
	}
	if e.Err != nil {
		what = strings.TrimPrefix(what+": "+e.Err.Error(), ": ")
	}
	return e.Provider + " " + e.Op + ": " + what + " (" + string(e.Class) + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf classifies any error: an *Error's Class; transient for context and network errors; "" for nil; else unknown.
func ClassOf(err error) callback.Class {
	switch ce, ok := errors.AsType[*Error](err); {
	case err == nil:
		return ""
	case ok && ce != nil:
		return ce.Class
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, new(net.Error)):
		return callback.ClassTransient
	}
	return callback.ClassUnknown
}

// IsTransportError: err is a failure to get any answer (connection, TLS, timeout, cancellation, a body cut off).
func IsTransportError(err error) bool {
	if ce, ok := errors.AsType[*Error](err); ok && ce != nil {
		return ce.Code == "" && ce.HTTPStatus == 0 && ce.Class == callback.ClassTransient &&
			!errors.Is(ce.Err, callback.ErrMalformed) && !errors.Is(ce.Err, ErrInvalidAnswer)
	}
	return err != nil && ClassOf(err) == callback.ClassTransient
}

// RateLimited is the rate refusal err is, if any: the provider's word, or the HTTP status 429.
func RateLimited(err error) (what string, ok bool) {
	if e, ok := errors.AsType[*Error](err); !ok {
		return "", false
	} else if e.HTTPStatus != http.StatusTooManyRequests {
		return e.Code, callback.IsRateLimit(e.Code)
	}
	return "HTTP 429", true
}

// classifyStatus maps a non-2xx status that is not the provider's own answer: the HTTP layer's (front end, proxy).
func classifyStatus(status int) callback.Class {
	switch {
	case status >= 500, status == 429, status == 408:
		return callback.ClassTransient
	case status == 401, status == 403:
		return callback.ClassConfig
	}
	return callback.ClassUnknown
}

// proxyUserinfo is login:password@ in a provider's text.
var proxyUserinfo = regexp.MustCompile(`([^\s:@/"']+):[^\s@"']+@`)

// taskIDPattern: digits (CapSolver: a UUID), widened to what can change no URL, log line or search query.
var taskIDPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,63}$`)

// conn is one provider account: its key, its transport and its bounds.
type conn struct {
	name, apiKey string // name prefixes the client's errors
	timeout      time.Duration
	maxCode      int
	gather       time.Duration // InPHP: how long a result lookup waits for others to share its request
	http         *http.Client
}

type Option func(*conn)

// WithHTTPClient replaces the client's own http.Client (nil keeps it).
func WithHTTPClient(h *http.Client) Option { return func(c *conn) { c.http = h } }

// WithTimeout sets the per-request timeout (default 30 s); each request is also bounded by the caller's context.
func WithTimeout(d time.Duration) Option {
	return func(c *conn) { c.timeout = cmp.Or(max(d, 0), c.timeout) } // d <= 0 keeps it
}

func newConn(name, rawBase, apiKey string, opts []Option) (conn, *url.URL, error) {
	u, err := url.Parse(rawBase)
	switch {
	case apiKey == "":
		return conn{}, nil, fmt.Errorf("%s: API key is required", name)
	case err != nil:
		return conn{}, nil, fmt.Errorf("%s: base URL is not a valid URL", name) // the parse error echoes the input
	case u.Scheme != "http" && u.Scheme != "https":
		return conn{}, nil, fmt.Errorf("%s: base URL %q must be absolute http or https", name, u.Redacted())
	case u.Host == "":
		return conn{}, nil, fmt.Errorf("%s: base URL %q has no host", name, u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return conn{}, nil, fmt.Errorf("%s: base URL must not have credentials, a query or a fragment", name)
	}
	c := conn{name: name, apiKey: apiKey, timeout: 30 * time.Second, maxCode: captchaflow.MaxCodeBytes, gather: time.Second}
	for _, opt := range opts {
		opt(&c)
	}
	if c.http == nil {
		c.http = newHTTPClient(c.timeout, (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	}
	h := *c.http // a copy: never a redirect, a 307/308 would re-send the key to whatever host Location names
	h.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &h
	return c, u, nil
}

// newHTTPClient's connections count their written bytes, so a failure knows whether the provider saw anything.
func newHTTPClient(timeout time.Duration, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	base := &http.Transport{ // never http.DefaultTransport, which others change
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn}, nil
		},
		ForceAttemptHTTP2: true, MaxIdleConns: 128, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: timeout, ExpectContinueTimeout: time.Second,
	}
	// A span per request named by send ("captchaai submit"); providers are sent no trace context.
	traced := telemetry.Transport(base, propagation.NewCompositeTextMapPropagator(), func(r *http.Request) string {
		name, _ := r.Context().Value(spanNameKey{}).(string)
		return cmp.Or(name, r.Method)
	})
	return &http.Client{Timeout: timeout, Transport: traced}
}

type spanNameKey struct{}

type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func countingOf(conn net.Conn) *countingConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	cc, _ := conn.(*countingConn)
	return cc
}

// answerFunc reads a body (status 0: a 2xx's): the provider's own error, or why the body is no answer of its.
type answerFunc func(status int, body []byte) (*Error, error)

// do sends one request and reads its answer; a failed status decides (a 5xx Written) unless answer finds an error.
func (c *conn) do(ctx context.Context, op, method, target, contentType string, body []byte, answer answerFunc) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, e := c.send(ctx, op, method, target, contentType, body)
	if e != nil {
		return e
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the keep-alive connection is reused
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 == 3 { // a front end's, before the provider: nothing was created, and retrying cannot help
		return &Error{Op: op, Class: callback.ClassConfig, HTTPStatus: resp.StatusCode, Provider: c.name,
			Err: errors.New("redirect not followed: check the provider's base URL")}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
		if e, _ := answer(resp.StatusCode, body); e != nil {
			return e
		}
		return &Error{Op: op, Class: classifyStatus(resp.StatusCode), HTTPStatus: resp.StatusCode,
			Err: errors.New(http.StatusText(resp.StatusCode)), Written: resp.StatusCode >= 500, Provider: c.name}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		err = fmt.Errorf("read answer: %w", err)
	} else if len(body) > maxAnswerBytes {
		err = fmt.Errorf("%w: answer larger than %d bytes", callback.ErrMalformed, maxAnswerBytes)
	} else if e, err = answer(0, body); e != nil {
		return e
	}
	if err != nil {
		return c.fail(op, callback.ClassTransient, err)
	}
	return nil
}

// send does the request; a failure is transient, Written unless it got no connection or wrote nothing to ours.
func (c *conn) send(ctx context.Context, op, method, target, contentType string, body []byte) (*http.Response, *Error) {
	var got atomic.Bool
	var cc atomic.Pointer[countingConn]
	var base atomic.Int64
	ctx = context.WithValue(ctx, spanNameKey{}, c.name+" "+op)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if c := countingOf(info.Conn); c != nil {
			base.Store(c.written.Load())
			cc.Store(c)
		}
		got.Store(true)
	}})
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, c.fail(op, callback.ClassConfig, fmt.Errorf("build request: %w", err))
	}
	req.Header = http.Header{"User-Agent": {"captchaflow/1"}, "Accept": {"application/json, text/plain;q=0.9, */*;q=0.1"}}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		e := c.fail(op, callback.ClassTransient, err)
		e.Written = got.Load() && (cc.Load() == nil || cc.Load().written.Load() > base.Load())
		return nil, e
	}
	return resp, nil
}

// codeError is the error for a provider's error answer: its code (redacted, bounded) decides the class.
func (c *conn) codeError(op, code, text string, status int) *Error {
	var detail error
	if text != "" { // a text quoting a proxy (a poll knows no params to mask it by) keeps its login, not its password
		text = proxyUserinfo.ReplaceAllString(redactText(text, c.apiKey), "${1}:"+redactedMarker+"@")
		detail = errors.New(truncate(text, maxErrorTextLen))
	}
	return &Error{Op: op, Code: truncate(redactText(code, c.apiKey), maxCodeLen), Class: callback.ClassifyCode(code),
		HTTPStatus: status, Err: detail, Provider: c.name}
}

// fail wraps a failure without a provider answer, redacted; a transient one is Written (send narrows it when it can).
func (c *conn) fail(op string, class callback.Class, err error) *Error {
	return &Error{Op: op, Class: class, Err: redactError(err, c.apiKey), Written: class == callback.ClassTransient, Provider: c.name}
}

// invalid refuses a success answer that cannot be what it claims (ClassUnknown: a retry could pay twice).
func (c *conn) invalid(op, format string, args ...any) *Error {
	return c.fail(op, callback.ClassUnknown, fmt.Errorf("%w: "+format, append([]any{ErrInvalidAnswer}, args...)...))
}

// checkCode refuses a solved code that is empty or over the size bound (it would bloat workflow history).
func (c *conn) checkCode(op, code string) (string, error) {
	switch {
	case code == "":
		return "", c.invalid(op, "success without a code")
	case len(code) > c.maxCode:
		return "", c.invalid(op, "the code is %d bytes, over the %d-byte bound", len(code), c.maxCode)
	}
	return code, nil
}

// checkAnswer bounds a's code, and its user agent and cookies together by the same bound.
func (c *conn) checkAnswer(op string, a Answer) (Answer, error) {
	if n := len(a.UserAgent) + len(callback.JoinCookies(a.Cookies)); n > c.maxCode {
		return Answer{}, c.invalid(op, "the user agent and cookies are %d bytes, over the %d-byte bound", n, c.maxCode)
	}
	var err error
	a.Code, err = c.checkCode(op, a.Code)
	return a, err
}

// balance reads the answer v of a balance request that ended with err; one that is not a finite number is malformed.
func (c *conn) balance(op, v string, err error) (float64, error) {
	b, perr := strconv.ParseFloat(v, 64)
	switch {
	case err != nil:
		return 0, err
	case perr != nil || math.IsNaN(b) || math.IsInf(b, 0):
		return 0, c.fail(op, callback.ClassTransient,
			fmt.Errorf("%w: balance %s is not a number", callback.ErrMalformed, callback.Snippet([]byte(v))))
	}
	return b, nil
}

// redactError strips a *url.Error's query (res.php's key=), userinfo and fragment, and masks apiKey in other errors.
func redactError(err error, apiKey string) error {
	if ue, ok := err.(*url.Error); ok {
		bare, _, _ := strings.Cut(ue.URL, "?")
		if u, perr := url.Parse(bare); perr == nil {
			u.User, u.Fragment, u.RawFragment = nil, "", ""
			bare = u.String()
		}
		err = &url.Error{Op: ue.Op, URL: bare, Err: ue.Err}
	}
	if err == nil || !strings.Contains(err.Error(), apiKey) {
		return err
	}
	msg := redactText(err.Error(), apiKey)
	for _, cause := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, cause) {
			return fmt.Errorf("%s%.0w", msg, cause) // wraps the cause callers classify on, without printing it
		}
	}
	return errors.New(msg)
}

// withoutProxyPassword masks params.proxy's password in a client's error: a provider's text may quote the proxy.
func withoutProxyPassword(err error, params map[string]string) error {
	p, perr := captchaflow.ParseProxy(params["proxy"])
	e, ok := errors.AsType[*Error](err)
	if perr != nil || p.Password == "" || !ok || e.Err == nil || !strings.Contains(e.Error(), p.Password) {
		return err
	}
	masked := *e
	masked.Err = redactError(e.Err, p.Password)
	return &masked
}

// redactText removes apiKey (never empty: newConn refuses that) from provider-supplied text such as error_text.
func redactText(s, apiKey string) string { return strings.ReplaceAll(s, apiKey, redactedMarker) }

// truncate cuts s to at most n bytes, a rune cut in two dropped, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
