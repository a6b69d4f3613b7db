// Package createtask is an HTTP client for the JSON createTask protocol that Anti-Captcha, 2captcha (API v2),
// CapMonster Cloud and CapSolver speak: POST /createTask, /getTaskResult, /getBalance and their report calls. What
// differs between them is declared once, in a Profile per Flavor (profile.go) and in the task table (tasks.go) that
// maps captchaflow's in.php vocabulary (method + params) to each flavor's task.
//
// Every error is a *captchaai.Error with the in.php client's classes, pacing and never-pay-twice rule
// (captchaai.OutcomeUnknown: a createTask whose answer was lost after the request was written may have created a
// paid task), so the activities treat both protocols alike. The API key travels in the JSON body only and never
// appears in any error.
package createtask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/captchaflow/captchaflow/captchaai"
)

const (
	defaultTimeout = 30 * time.Second
	userAgent      = "captchaflow-createtask/1"
)

// Operation names, used in captchaai.Error.Op.
const (
	OpCreate  = "createTask"
	OpResult  = "getTaskResult"
	OpBalance = "getBalance"
	OpReport  = "report"
)

// Client talks to one provider of one flavor with one API key. It is safe for concurrent use.
type Client struct {
	profile Profile
	base    *url.URL
	apiKey  string
	timeout time.Duration
	maxCode int
	http    *http.Client
	sync    syncCache
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

// WithTimeout sets the per-request timeout (default 30 s); non-positive values are ignored.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMaxCodeBytes bounds a solved code (default captchaai.DefaultMaxCodeBytes); non-positive values are ignored.
func WithMaxCodeBytes(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxCode = n
		}
	}
}

// New returns a client for the flavor at baseURL ("" is the flavor's documented host) authenticated with apiKey.
func New(flavor Flavor, baseURL, apiKey string, opts ...Option) (*Client, error) {
	profile, ok := ProfileOf(flavor)
	if !ok {
		return nil, fmt.Errorf("createtask: flavor %.20q is not one of %v", string(flavor), Flavors)
	}
	if apiKey == "" {
		return nil, errors.New("createtask: API key is required")
	}
	if baseURL == "" {
		baseURL = profile.BaseURL
	}
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{profile: profile, base: base, apiKey: apiKey, timeout: defaultTimeout, maxCode: captchaai.DefaultMaxCodeBytes}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	if c.http == nil {
		c.http = captchaai.NewHTTPClient(c.timeout)
	}
	return c, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("createtask: base URL is not a valid URL") // the parse error echoes the input
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("createtask: base URL %q must be absolute http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("createtask: base URL %q has no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, errors.New("createtask: base URL must not have credentials, a query or a fragment")
	}
	return u, nil
}

// Profile is the client's flavor profile.
func (c *Client) Profile() Profile { return c.profile }

// envelope is every createTask-protocol answer: the error fields plus whatever the call returns.
type envelope struct {
	ErrorID          json.RawMessage `json:"errorId"`
	ErrorCode        string          `json:"errorCode"`
	ErrorDescription string          `json:"errorDescription"`
	TaskID           json.RawMessage `json:"taskId"`
	Status           string          `json:"status"`
	Solution         json.RawMessage `json:"solution"`
	Balance          json.RawMessage `json:"balance"`

	errorID int64 // ErrorID, parsed
}

// errMalformed marks an answer that is not the protocol's JSON envelope.
var errMalformed = errors.New("malformed provider answer")

// call POSTs body (which carries the key) to endpoint and turns every outcome into an envelope with errorId 0 or a
// classified, redacted *captchaai.Error.
func (c *Client) call(ctx context.Context, op, endpoint string, body map[string]any) (envelope, error) {
	body["clientKey"] = c.apiKey
	data, err := json.Marshal(body)
	if err != nil {
		return envelope{}, c.fail(op, captchaai.ClassConfig, fmt.Errorf("encode request: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(endpoint).String(), bytes.NewReader(data))
	if err != nil {
		return envelope{}, c.fail(op, captchaai.ClassConfig, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, e := captchaai.Send(c.http, op, req) // the in.php client's rule for what may have reached the provider
	if e != nil {
		e.Err, e.Provider = captchaai.RedactError(e.Err, c.apiKey), c.name()
		return envelope{}, e
	}
	defer captchaai.CloseBody(resp.Body)
	return c.answer(op, resp)
}

// answer reads and classifies one response.
func (c *Client) answer(op string, resp *http.Response) (envelope, error) {
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, captchaai.MaxAnswerBytes+1))
	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	if !ok {
		// Some providers (CapSolver) answer errors with 400/401 and the envelope; any other body is a front end's
		// page, and the status alone decides, as for in.php (a gateway's 5xx: outcome unknown).
		if env, err := parseEnvelope(raw); readErr == nil && err == nil && env.failed() {
			return envelope{}, c.providerError(op, env, resp.StatusCode)
		}
		e := captchaai.UnansweredStatus(op, resp.StatusCode)
		e.Provider = c.name()
		return envelope{}, e
	}
	if readErr != nil {
		return envelope{}, c.failWritten(op, fmt.Errorf("read answer: %w", readErr))
	}
	if len(raw) > captchaai.MaxAnswerBytes {
		return envelope{}, c.failWritten(op, fmt.Errorf("%w: answer larger than %d bytes", errMalformed, captchaai.MaxAnswerBytes))
	}
	env, err := parseEnvelope(raw)
	if err != nil {
		return envelope{}, c.failWritten(op, err)
	}
	if env.failed() {
		return envelope{}, c.providerError(op, env, 0)
	}
	return env, nil
}

// parseEnvelope decodes an answer; one without an integer errorId (a number, or a string of one) is not this
// protocol's.
func parseEnvelope(raw []byte) (envelope, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return envelope{}, fmt.Errorf("%w: invalid JSON: %s", errMalformed, captchaai.Snippet(raw))
	}
	var id json.Number
	if len(env.ErrorID) == 0 || json.Unmarshal(env.ErrorID, &id) != nil {
		return envelope{}, fmt.Errorf("%w: no errorId", errMalformed)
	}
	n, err := id.Int64()
	if err != nil {
		return envelope{}, fmt.Errorf("%w: errorId %s is not an integer", errMalformed, captchaai.Snippet(env.ErrorID))
	}
	env.errorID = n
	return env, nil
}

// failed reports whether the envelope carries an error (errorId other than 0).
func (e envelope) failed() bool { return e.errorID != 0 }

// providerError is the *captchaai.Error for an errorId > 0 answer.
func (c *Client) providerError(op string, env envelope, status int) *captchaai.Error {
	code := captchaai.Truncate(captchaai.RedactText(canonical(env.ErrorCode), c.apiKey), captchaai.MaxCodeLen)
	var detail error
	if env.ErrorDescription != "" {
		detail = errors.New(captchaai.Truncate(captchaai.RedactText(env.ErrorDescription, c.apiKey), captchaai.MaxErrorTextLen))
	}
	if code == "" {
		return &captchaai.Error{Op: op, Class: captchaai.ClassUnknown, HTTPStatus: status, Provider: c.name(),
			Err: fmt.Errorf("%w: errorId %d without an errorCode", errMalformed, env.errorID)}
	}
	class := ClassifyCode(code)
	if class == captchaai.ClassUnknown && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		class = captchaai.ClassConfig // an undocumented code on 401/403 is still the key's or the account's problem
	}
	return &captchaai.Error{Op: op, Code: code, Class: class, HTTPStatus: status, Err: detail, Provider: c.name()}
}

// name prefixes the client's errors.
func (c *Client) name() string { return "createtask " + string(c.profile.Flavor) }

// fail wraps a failure without a provider answer, its cause redacted.
func (c *Client) fail(op string, class captchaai.Class, err error) *captchaai.Error {
	return &captchaai.Error{Op: op, Class: class, Err: captchaai.RedactError(err, c.apiKey), Provider: c.name()}
}

// failWritten is a transient failure after a 2xx status whose answer could not be read or understood: the provider
// handled the request, and what it did is unknown.
func (c *Client) failWritten(op string, err error) *captchaai.Error {
	e := c.fail(op, captchaai.ClassTransient, err)
	e.Written = true
	return e
}
