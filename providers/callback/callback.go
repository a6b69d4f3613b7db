package callback

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"
)

// Flavor names a createTask provider (the flavor query parameter of its pingback URL names it too).
type Flavor string

// The known flavors.
const (
	AntiCaptcha Flavor = "anticaptcha"
	TwoCaptcha  Flavor = "2captcha" // API v2 (api.2captcha.com); API v1 is the in.php protocol
	CapMonster  Flavor = "capmonster"
	CapSolver   Flavor = "capsolver"
)

// Flavors lists every flavor, in a fixed order.
var Flavors = []Flavor{AntiCaptcha, TwoCaptcha, CapMonster, CapSolver}

// FormBody: the flavor POSTs 2captcha's form id + code (2captcha.com/h/how-to-configure-automatic-response-retrieval-via-pingback);
// the others POST a getTaskResult-shaped JSON document.
func FormBody(f Flavor) bool { return f == TwoCaptcha }

// Result is what a callback says: the task and its code or a status word (IsStatusWord).
type Result struct {
	TaskID string
	Code   string
}

var (
	ErrBody      = errors.New("not a callback body of this provider") // not the flavor's documented callback
	ErrMalformed = errors.New("malformed provider answer")            // neither protocol's documented answer
)

// Parse reads a callback the flavor POSTed: 2captcha's form (id, code) or the others' getTaskResult-shaped JSON,
// whose taskId is optional (CapMonster's has none: the tokened URL names the workflow). No error echoes the code.
func Parse(f Flavor, contentType string, body []byte) (Result, error) {
	if !slices.Contains(Flavors, f) {
		return Result{}, fmt.Errorf("flavor %.20q: %w", string(f), ErrBody)
	}
	if !FormBody(f) {
		return parseJSON(body)
	}
	if media, _, _ := mime.ParseMediaType(contentType); media != "application/x-www-form-urlencoded" {
		return Result{}, fmt.Errorf("content type %.40q: %w", media, ErrBody)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("id") == "" || form.Get("code") == "" {
		return Result{}, fmt.Errorf("want id and code: %w", ErrBody)
	}
	return Result{TaskID: form.Get("id"), Code: form.Get("code")}, nil
}

func parseJSON(body []byte) (Result, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrBody, err)
	}
	var out Result
	if len(env.TaskID) > 0 {
		var n json.Number
		if json.Unmarshal(env.TaskID, &n) == nil {
			out.TaskID = n.String()
		} else if json.Unmarshal(env.TaskID, &out.TaskID) != nil {
			return Result{}, fmt.Errorf("taskId: %w", ErrBody)
		}
	}
	switch {
	case env.Failed():
		out.Code = Canonical(env.ErrorCode)
	case env.Status == "failed":
		out.Code = CodeUnsolvable
	case env.Status == "ready":
		out.Code, err = InferCode(env.Solution)
	default:
		err = fmt.Errorf("status %s", Snippet([]byte(strings.TrimSpace(env.Status))))
	}
	if err != nil || out.Code == "" {
		return Result{}, fmt.Errorf("%w: no code (%v)", ErrBody, err)
	}
	return out, nil
}

// Envelope is every createTask-protocol answer: the error fields plus whatever the call returns.
type Envelope struct {
	ErrorID          json.RawMessage `json:"errorId"`
	ErrorCode        string          `json:"errorCode"`
	ErrorDescription string          `json:"errorDescription"`
	TaskID           json.RawMessage `json:"taskId"`
	Status           string          `json:"status"`
	Solution         json.RawMessage `json:"solution"`
	Balance          json.RawMessage `json:"balance"`

	errorID int64 // ErrorID, parsed
}

// ParseEnvelope decodes an answer; one without an integer errorId (a number or a string of one) is not createTask's.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: invalid JSON: %s", ErrMalformed, Snippet(raw))
	}
	var id json.Number
	if len(env.ErrorID) == 0 || json.Unmarshal(env.ErrorID, &id) != nil {
		return Envelope{}, fmt.Errorf("%w: no errorId", ErrMalformed)
	}
	n, err := id.Int64()
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: errorId %s is not an integer", ErrMalformed, Snippet(env.ErrorID))
	}
	env.errorID = n
	return env, nil
}

// Failed reports whether the envelope carries an error (errorId other than 0).
func (e Envelope) Failed() bool { return e.errorID != 0 }
