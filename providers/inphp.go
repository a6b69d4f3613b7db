package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// InPHP is a client of the 2captcha-compatible in.php / res.php protocol (CaptchaAI, 2captcha API v1). It is safe
// for concurrent use.
type InPHP struct {
	conn
	inURL, resURL string
}

// Operation names of InPHP, used in Error.Op.
const (
	opSubmit     = "submit"
	opGet        = "get"
	opGetBalance = "getbalance"
	opReportGood = "reportgood"
	opReportBad  = "reportbad"
)

// NewInPHP returns a client for baseURL (absolute http/https URL, optionally with a path prefix) authenticated with
// apiKey.
func NewInPHP(baseURL, apiKey string, opts ...Option) (*InPHP, error) {
	c, base, err := newConn("captchaai", baseURL, apiKey, opts)
	if err != nil {
		return nil, err
	}
	return &InPHP{conn: c, inURL: base.JoinPath("in.php").String(), resURL: base.JoinPath("res.php").String()}, nil
}

// Supports is nil: in.php takes every method, and refuses what it does not know itself.
func (c *InPHP) Supports(string, map[string]string) error { return nil }

// Submit calls in.php with method, params as-is and pingback (omitted if ""): the task id (IsTaskID, else an
// ErrInvalidAnswer). Method "post" uploads params["file"] (base64) as a multipart file. in.php never answers with
// the code.
func (c *InPHP) Submit(ctx context.Context, method string, params map[string]string, pingback string) (id, code string, err error) {
	body, err := encodeSubmit(c.apiKey, method, params, pingback)
	if err != nil {
		return "", "", c.fail(opSubmit, callback.ClassConfig, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.inURL, bytes.NewReader(body.data))
	if err != nil {
		return "", "", c.fail(opSubmit, callback.ClassConfig, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", body.contentType)
	ans, err := c.call(opSubmit, req)
	if err != nil {
		return "", "", err
	}
	if !IsTaskID(ans.Value) {
		return "", "", c.invalid(opSubmit, "task id %s is not an id (want 1-64 of [0-9A-Za-z_-])",
			callback.Snippet([]byte(redactText(ans.Value, c.apiKey))))
	}
	return ans.Value, "", nil
}

// Get calls res.php action=get: not ready is ClassNotReady; an empty or oversized code is an ErrInvalidAnswer.
func (c *InPHP) Get(ctx context.Context, taskID string) (string, error) {
	ans, err := c.res(ctx, opGet, url.Values{"action": {"get"}, "id": {taskID}})
	if err != nil {
		return "", err
	}
	if err := c.checkCode(opGet, ans.Value); err != nil {
		return "", err
	}
	return ans.Value, nil
}

// Balance calls res.php action=getbalance.
func (c *InPHP) Balance(ctx context.Context) (float64, error) {
	ans, err := c.res(ctx, opGetBalance, url.Values{"action": {"getbalance"}})
	if err != nil {
		return 0, err
	}
	balance, err := strconv.ParseFloat(ans.Value, 64)
	if err != nil || math.IsNaN(balance) || math.IsInf(balance, 0) {
		return 0, c.failWritten(opGetBalance, fmt.Errorf("%w: balance %s is not a number", callback.ErrMalformed,
			callback.Snippet([]byte(ans.Value))))
	}
	return balance, nil
}

// Report tells the provider whether the answer for taskID was accepted (reportgood / reportbad: in.php's reports
// take any kind).
func (c *InPHP) Report(ctx context.Context, _ Kind, taskID string, good bool) error {
	op := opReportBad
	if good {
		op = opReportGood
	}
	_, err := c.res(ctx, op, url.Values{"action": {op}, "id": {taskID}})
	return err
}

// res performs a res.php GET. The protocol wants the key in the query, which is why every error path redacts.
func (c *InPHP) res(ctx context.Context, op string, query url.Values) (answer, error) {
	if id, ok := query["id"]; ok && id[0] == "" {
		return answer{}, c.fail(op, callback.ClassConfig, errors.New("task id is required"))
	}
	query.Set("key", c.apiKey)
	query.Set("json", "1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.resURL+"?"+query.Encode(), nil)
	if err != nil {
		return answer{}, c.fail(op, callback.ClassConfig, fmt.Errorf("build request: %w", err))
	}
	return c.call(op, req)
}

// call runs one request on the scaffold and decodes its answer. A 5xx whose body is the provider's own error word
// (ERROR_…, as some providers send on their own 500s) is that answer.
func (c *InPHP) call(op string, req *http.Request) (answer, error) {
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.1")
	body, e := c.do(req.Context(), op, req, func(status int, body []byte) *Error {
		if ans, err := parseAnswer(body); status >= 500 && err == nil && !ans.OK && callback.IsStatusWord(ans.Code) {
			return c.codeError(op, ans.Code, ans.ErrorText, status)
		}
		return nil
	})
	if e != nil {
		return answer{}, e
	}
	ans, err := parseAnswer(body)
	if err != nil {
		return answer{}, c.failWritten(op, err)
	}
	if !ans.OK {
		return answer{}, c.codeError(op, ans.Code, ans.ErrorText, 0)
	}
	return ans, nil
}
