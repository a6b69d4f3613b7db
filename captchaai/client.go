// Package captchaai is an HTTP client for the CaptchaAI API, which speaks the
// 2captcha-compatible in.php / res.php protocol.
//
// Every error it returns is a *Error carrying a Class that tells the caller
// whether to retry, resubmit, keep polling or give up. The API key never
// appears in any error.
package captchaai

import (
	"bytes"
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
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	defaultTimeout = 30 * time.Second
	// maxAnswerBytes bounds what we read from the provider. Real answers are
	// a few KB at most (long reCAPTCHA tokens); anything bigger is not ours.
	maxAnswerBytes = 1 << 20
	// maxDrainBytes is how much of an unread body we discard to keep the
	// connection reusable before giving up on it.
	maxDrainBytes = 64 << 10
	// maxStatusBodyBytes is how much of a 5xx body is read to see whether it is the provider's own error word
	// (a few dozen bytes, or a short JSON answer) rather than a gateway's page.
	maxStatusBodyBytes = 4 << 10
	userAgent          = "captchaflow-captchaai/1"
	// Provider-supplied codes and texts end up in logs and workflow history;
	// a misbehaving provider must not be able to bloat them.
	maxCodeLen      = 128
	maxErrorTextLen = 512
)

// Operation names, used in Error.Op.
const (
	opSubmit     = "submit"
	opGet        = "get"
	opGetBalance = "getbalance"
	opReportGood = "reportgood"
	opReportBad  = "reportbad"
)

// Client talks to one provider with one API key. It is safe for concurrent use.
type Client struct {
	inURL   string
	resURL  string
	apiKey  string
	timeout time.Duration
	maxCode int
	http    *http.Client
	// dial opens the client's own connections (tests replace it); nil is a plain net.Dialer.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the client's own http.Client (nil keeps the default).
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		if h != nil {
			c.http = h
		}
	}
}

// WithTimeout sets the per-request timeout (default 30s). Each request is also
// bounded by the caller's context deadline. Non-positive values are ignored.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// New returns a client for baseURL (absolute http/https URL, optionally with a
// path prefix) authenticated with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	if apiKey == "" {
		return nil, errors.New("captchaai: API key is required")
	}
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		inURL:   base.JoinPath("in.php").String(),
		resURL:  base.JoinPath("res.php").String(),
		apiKey:  apiKey,
		timeout: defaultTimeout,
		maxCode: DefaultMaxCodeBytes,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	if c.http == nil {
		c.http = newHTTPClient(c.timeout, c.dial)
	}
	return c, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// The parse error echoes the input; keep it out in case it holds credentials.
		return nil, errors.New("captchaai: base URL is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("captchaai: base URL %q must be absolute http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("captchaai: base URL %q has no host", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("captchaai: base URL %q must not have a query or fragment", stripURLSecrets(raw))
	}
	return u, nil
}

// newHTTPClient builds the client's own transport rather than sharing
// http.DefaultTransport: many workflows poll concurrently, so keep plenty of
// idle connections per host, and bound every phase so a stuck provider cannot
// hold an activity slot forever.
// Its connections count the bytes written to them (countingConn), so a failed request can tell whether the
// provider may have seen it.
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

// Submit calls in.php with method, the caller's params as-is and pingback
// (omitted if ""), and returns the provider task id (checked with IsTaskID:
// any other success answer is an ErrInvalidAnswer). For method "post",
// params["file"] is the base64 image and is uploaded as a multipart file;
// other methods are sent as a urlencoded form. params must not contain the
// client-owned fields key, method, json or pingback.
func (c *Client) Submit(ctx context.Context, method string, params map[string]string, pingback string) (string, error) {
	body, err := encodeSubmit(c.apiKey, method, params, pingback)
	if err != nil {
		return "", c.fail(opSubmit, ClassConfig, err)
	}
	ans, err := c.call(ctx, opSubmit, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.inURL, bytes.NewReader(body.data))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", body.contentType)
		return req, nil
	})
	if err != nil {
		return "", err
	}
	if err := c.checkTaskID(ans.Value); err != nil {
		return "", err
	}
	return ans.Value, nil
}

// Get calls res.php action=get. A task still being solved yields a *Error
// with Class ClassNotReady; an empty code, or one over the WithMaxCodeBytes
// bound, is an ErrInvalidAnswer.
func (c *Client) Get(ctx context.Context, taskID string) (string, error) {
	if taskID == "" {
		return "", c.fail(opGet, ClassConfig, errors.New("task id is required"))
	}
	ans, err := c.res(ctx, opGet, url.Values{"action": {"get"}, "id": {taskID}})
	if err != nil {
		return "", err
	}
	if err := c.checkCode(ans.Value); err != nil {
		return "", err
	}
	return ans.Value, nil
}

// Balance calls res.php action=getbalance.
func (c *Client) Balance(ctx context.Context) (float64, error) {
	ans, err := c.res(ctx, opGetBalance, url.Values{"action": {"getbalance"}})
	if err != nil {
		return 0, err
	}
	balance, err := strconv.ParseFloat(ans.Value, 64)
	if err != nil || math.IsNaN(balance) || math.IsInf(balance, 0) {
		return 0, c.fail(opGetBalance, ClassTransient, fmt.Errorf("%w: balance %s is not a number", errMalformed, snippet([]byte(ans.Value))))
	}
	return balance, nil
}

// ReportGood tells the provider the answer for taskID was accepted.
func (c *Client) ReportGood(ctx context.Context, taskID string) error {
	return c.report(ctx, opReportGood, taskID)
}

// ReportBad tells the provider the answer for taskID was rejected.
func (c *Client) ReportBad(ctx context.Context, taskID string) error {
	return c.report(ctx, opReportBad, taskID)
}

func (c *Client) report(ctx context.Context, op, taskID string) error {
	if taskID == "" {
		return c.fail(op, ClassConfig, errors.New("task id is required"))
	}
	_, err := c.res(ctx, op, url.Values{"action": {op}, "id": {taskID}})
	return err
}

// res performs a res.php GET. The protocol wants the key in the query, which
// is why every error path goes through redactError.
func (c *Client) res(ctx context.Context, op string, query url.Values) (answer, error) {
	query.Set("key", c.apiKey)
	query.Set("json", "1")
	target := c.resURL + "?" + query.Encode()
	return c.call(ctx, op, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	})
}

// call runs one request under the per-request timeout and turns every
// outcome into either a successful answer or a classified, redacted *Error.
func (c *Client) call(ctx context.Context, op string, newRequest func(context.Context) (*http.Request, error)) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	req, err := newRequest(ctx)
	if err != nil {
		return answer{}, c.fail(op, ClassConfig, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.1")

	resp, e := send(c.http, op, req)
	if e != nil {
		e.Err = redactError(e.Err, c.apiKey)
		return answer{}, e
	}
	defer closeBody(resp.Body)

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answer{}, c.statusError(op, resp)
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return answer{}, c.failWritten(op, fmt.Errorf("read answer: %w", err))
	}
	if len(body) > maxAnswerBytes {
		return answer{}, c.failWritten(op, fmt.Errorf("%w: answer larger than %d bytes", errMalformed, maxAnswerBytes))
	}
	ans, err := parseAnswer(body)
	if err != nil {
		return answer{}, c.failWritten(op, err)
	}
	if !ans.OK {
		return answer{}, c.codeError(op, ans)
	}
	return ans, nil
}

// send does req on h, following it onto the connection. A failure is a transient *Error (its cause not yet redacted)
// that is Written when any byte of the request may have reached the provider: then its outcome is unknown
// (OutcomeUnknown); only a request of which not one byte was written is known not to have been acted on.
func send(h *http.Client, op string, req *http.Request) (*http.Response, *Error) {
	var w writeTrace
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), w.trace()))
	resp, err := h.Do(req)
	if err != nil {
		return nil, &Error{Op: op, Class: ClassTransient, Err: err, Written: w.mayHaveReached()}
	}
	return resp, nil
}

// writeTrace follows one request onto the connection, to tell a failure the provider may have acted on (an in.php
// task created, its answer lost) from one it provably never saw: no connection was made (DNS, refused, TLS
// handshake), or not one byte of the request left on it.
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

// mayHaveReached is true once any byte of the request left on the connection. On a connection that does not
// count its bytes (a caller's own transport), the headers being written is taken for that: erring that way costs a
// wait, the other way a second payment.
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

// countingConn counts the bytes written to a connection, so a failed request can tell whether any of it left.
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

// statusError is the error for a non-2xx answer. The body of a failed status is usually a proxy or front-end page,
// not an answer, so the status decides, with one exception: a 5xx whose body is the provider's own error word
// (ERROR_…, as some providers send on their own 500s) is that answer. Any other 5xx may come from a gateway that
// forwarded the request and lost the provider's answer (a 502 or 504, a CDN's 52x), so it is Written: for in.php
// its outcome is unknown (OutcomeUnknown).
func (c *Client) statusError(op string, resp *http.Response) *Error {
	if resp.StatusCode >= 500 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBodyBytes))
		if ans, err := parseAnswer(body); err == nil && !ans.OK && IsStatusWord(ans.Code) {
			e := c.codeError(op, ans)
			e.HTTPStatus = resp.StatusCode
			return e
		}
	}
	return unansweredStatus(op, resp.StatusCode)
}

// unansweredStatus is the error for a non-2xx status whose body is not the provider's own answer. A 5xx may come
// from a gateway that forwarded the request and lost the provider's answer, so it is Written: its outcome is
// unknown. A 4xx was refused before anything was done.
func unansweredStatus(op string, status int) *Error {
	return &Error{Op: op, Class: classifyStatus(status), HTTPStatus: status, Err: errors.New(http.StatusText(status)),
		Written: status >= 500}
}

// codeError is the error for a provider's error answer: its code (redacted, bounded) decides the class.
func (c *Client) codeError(op string, ans answer) *Error {
	var detail error
	if ans.ErrorText != "" {
		detail = errors.New(truncate(redactText(ans.ErrorText, c.apiKey), maxErrorTextLen))
	}
	return &Error{
		Op:    op,
		Code:  truncate(redactText(ans.Code, c.apiKey), maxCodeLen),
		Class: classifyCode(ans.Code),
		Err:   detail,
	}
}

// fail wraps a non-provider failure with its redacted cause.
func (c *Client) fail(op string, class Class, err error) *Error {
	return &Error{Op: op, Class: class, Err: redactError(err, c.apiKey)}
}

// failWritten is a transient failure once the request was sent and answered with a 2xx status, but the answer could
// not be read or understood: the provider handled the request, and what it did is unknown.
func (c *Client) failWritten(op string, err error) *Error {
	e := c.fail(op, ClassTransient, err)
	e.Written = true
	return e
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
