package providers

import (
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
)

const (
	defaultTimeout     = 30 * time.Second
	maxAnswerBytes     = 1 << 20  // real answers are a few KB at most
	maxDrainBytes      = 64 << 10 // discarded of an unread body to keep the connection reusable
	maxStatusBodyBytes = 4 << 10  // read of a failed status's body for the provider's own error answer
	// Provider codes and texts end up in logs and history; a provider must not bloat them.
	maxCodeLen      = 128
	maxErrorTextLen = 512
	redactedMarker  = "REDACTED"
)

// conn is one provider account: its key, its transport and its bounds.
type conn struct {
	name    string // prefixes the client's errors
	apiKey  string
	timeout time.Duration
	maxCode int
	http    *http.Client
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Option configures a client.
type Option func(*conn)

// WithHTTPClient replaces the client's own http.Client (nil keeps it).
func WithHTTPClient(h *http.Client) Option {
	return func(c *conn) {
		if h != nil {
			c.http = h
		}
	}
}

// WithTimeout sets the per-request timeout (default 30 s); each request is also bounded by the caller's context.
func WithTimeout(d time.Duration) Option {
	return func(c *conn) {
		if d > 0 {
			c.timeout = d
		}
	}
}

func newConn(name, rawBase, apiKey string, opts []Option) (conn, *url.URL, error) {
	if apiKey == "" {
		return conn{}, nil, fmt.Errorf("%s: API key is required", name)
	}
	base, err := parseBaseURL(name, rawBase)
	if err != nil {
		return conn{}, nil, err
	}
	c := conn{name: name, apiKey: apiKey, timeout: defaultTimeout, maxCode: captchaflow.MaxCodeBytes}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.http == nil {
		c.http = newHTTPClient(c.timeout, c.dial)
	}
	return c, base, nil
}

func parseBaseURL(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: base URL is not a valid URL", name) // the parse error echoes the input
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s: base URL %q must be absolute http or https", name, u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("%s: base URL %q has no host", name, u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%s: base URL must not have credentials, a query or a fragment", name)
	}
	return u, nil
}

// newHTTPClient's connections count their written bytes, so a failure knows whether the provider saw anything.
func newHTTPClient(timeout time.Duration, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	transport := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn}, nil
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          128,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: transport, Timeout: timeout}
}

// ownError reads a failed status's body for the provider's own error answer; nil lets the status decide.
type ownError func(status int, body []byte) *Error

// do runs one request: a 2xx body, or a classified, redacted *Error. A failed status decides unless own finds the
// provider's answer in its body; any other 5xx may be a gateway that lost the answer, so it is Written.
func (c *conn) do(ctx context.Context, op string, req *http.Request, own ownError) ([]byte, *Error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req.Header.Set("User-Agent", "captchaflow/1")
	resp, e := c.send(op, req.WithContext(ctx))
	if e != nil {
		return nil, e
	}
	defer closeBody(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBodyBytes))
		if e := own(resp.StatusCode, body); e != nil {
			return nil, e
		}
		return nil, &Error{Op: op, Class: classifyStatus(resp.StatusCode), HTTPStatus: resp.StatusCode,
			Err: errors.New(http.StatusText(resp.StatusCode)), Written: resp.StatusCode >= 500, Provider: c.name}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, c.failWritten(op, fmt.Errorf("read answer: %w", err))
	}
	if len(body) > maxAnswerBytes {
		return nil, c.failWritten(op, fmt.Errorf("%w: answer larger than %d bytes", callback.ErrMalformed, maxAnswerBytes))
	}
	return body, nil
}

// send does req; a failure is a transient *Error, Written unless provably not one byte of the request left.
func (c *conn) send(op string, req *http.Request) (*http.Response, *Error) {
	var w writeTrace
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), w.trace()))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Op: op, Class: callback.ClassTransient, Err: redactError(err, c.apiKey),
			Written: w.mayHaveReached(), Provider: c.name}
	}
	return resp, nil
}

// writeTrace follows one request onto its connection: did any byte of it leave?
type writeTrace struct {
	mu      sync.Mutex
	gotConn bool
	conn    *countingConn // the client's own connection; nil on a transport that is not ours
	base    int64         // conn's bytes written when the request got it
	headers bool          // the transport began writing (the headers are buffered or sent)
}

func (w *writeTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.gotConn, w.conn = true, countingOf(info.Conn)
			if w.conn != nil {
				w.base = w.conn.written.Load()
			}
		},
		WroteHeaders: func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.headers = true
		},
	}
}

// mayHaveReached: a byte left (on a caller's own transport: the headers were written); erring this way costs a wait.
func (w *writeTrace) mayHaveReached() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.gotConn:
		return false
	case w.conn != nil:
		return w.conn.written.Load() > w.base
	default:
		return w.headers
	}
}

// countingConn counts the bytes written to a connection.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// countingOf finds the countingConn under conn (directly, or under TLS), or nil.
func countingOf(conn net.Conn) *countingConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	cc, _ := conn.(*countingConn)
	return cc
}

// codeError is the error for a provider's error answer: its code (redacted, bounded) decides the class.
func (c *conn) codeError(op, code, text string, status int) *Error {
	var detail error
	if text != "" {
		detail = errors.New(truncate(redactText(text, c.apiKey), maxErrorTextLen))
	}
	return &Error{Op: op, Code: truncate(redactText(code, c.apiKey), maxCodeLen), Class: callback.ClassifyCode(code),
		HTTPStatus: status, Err: detail, Provider: c.name}
}

// fail wraps a failure without a provider answer, its cause redacted.
func (c *conn) fail(op string, class callback.Class, err error) *Error {
	return &Error{Op: op, Class: class, Err: redactError(err, c.apiKey), Provider: c.name}
}

// failWritten is a transient failure after a 2xx whose answer could not be read: what the provider did is unknown.
func (c *conn) failWritten(op string, err error) *Error {
	e := c.fail(op, callback.ClassTransient, err)
	e.Written = true
	return e
}

// invalid refuses a success answer that cannot be what it claims (ClassUnknown: a retry could pay twice).
func (c *conn) invalid(op, format string, args ...any) *Error {
	return c.fail(op, callback.ClassUnknown, fmt.Errorf("%w: "+format, append([]any{ErrInvalidAnswer}, args...)...))
}

// checkCode refuses a solved code that is empty or over the size bound (it would bloat workflow history).
func (c *conn) checkCode(op, code string) error {
	switch {
	case code == "":
		return c.invalid(op, "success without a code")
	case len(code) > c.maxCode:
		return c.invalid(op, "the code is %d bytes, over the %d-byte bound", len(code), c.maxCode)
	}
	return nil
}

// redactError removes apiKey from err: a *url.Error loses its URL's query (res.php's key=) and userinfo, and an
// error still showing the key becomes a scrubbed copy that keeps only the context sentinel callers classify on.
func redactError(err error, apiKey string) error {
	if ue, ok := err.(*url.Error); ok {
		bare, _, _ := strings.Cut(ue.URL, "?")
		if u, perr := url.Parse(bare); perr == nil {
			u.User, u.Fragment, u.RawFragment = nil, "", ""
			bare = u.String()
		}
		err = &url.Error{Op: ue.Op, URL: bare, Err: ue.Err}
	}
	if err == nil || apiKey == "" || !strings.Contains(err.Error(), apiKey) {
		return err
	}
	scrubbed := &scrubbedError{msg: redactText(err.Error(), apiKey)}
	for _, cause := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, cause) {
			scrubbed.cause = cause
			break
		}
	}
	return scrubbed
}

// redactText removes apiKey from provider-supplied text such as error_text.
func redactText(s, apiKey string) string {
	if apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, apiKey, redactedMarker)
}

// scrubbedError is a message-only stand-in for an error whose text contained the API key.
type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }

// balance reads a balance answer; one that is not a finite number is malformed.
func (c *conn) balance(op, v string) (float64, error) {
	b, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(b) || math.IsInf(b, 0) {
		return 0, c.failWritten(op, fmt.Errorf("%w: balance %s is not a number", callback.ErrMalformed, callback.Snippet([]byte(v))))
	}
	return b, nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// closeBody drains a bounded amount so the keep-alive connection can be reused.
func closeBody(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes))
	_ = body.Close()
}
