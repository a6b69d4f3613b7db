package callback

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/captchaflow/captchaflow"
)

// Flavor names a createTask provider (the flavor query parameter of its pingback URL names it too).
type Flavor string

const (
	AntiCaptcha Flavor = "anticaptcha"
	TwoCaptcha  Flavor = "2captcha" // API v2 (api.2captcha.com); API v1 is the in.php protocol
	CapMonster  Flavor = "capmonster"
	CapSolver   Flavor = "capsolver"
)

var Flavors = []Flavor{AntiCaptcha, TwoCaptcha, CapMonster, CapSolver}

// FormBody: the flavor POSTs the in.php pingback's form (id, code); the others a getTaskResult-shaped JSON document.
func FormBody(f Flavor) bool { return f == TwoCaptcha }

// Result is what a callback says: the task and its code or a status word (IsStatusWord).
type Result struct{ TaskID, Code string }

// Error is a refused callback: "Field: Why" (the ingress's 400) never echoes the code; Err may be the body's 413.
type Error struct {
	Field, Why string
	Err        error
}

func (e *Error) Error() string { return e.Field + ": " + e.Why }
func (e *Error) Unwrap() error { return e.Err }

var (
	ErrMalformed  = errors.New("malformed provider answer")     // an answer in neither protocol's documented shape
	taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) // also keeps anything out of the untokened route's visibility query
)

// Parse reads r's in.php form (flavor "" or 2captcha; body over query), else the flavor's JSON (CapMonster sends no taskId).
func Parse(r *http.Request, f Flavor) (res Result, err error) {
	form, id, code := f == "" || FormBody(f), "taskId", "solution"
	switch media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); {
	case form && media == "multipart/form-data":
		err = r.ParseMultipartForm(1 << 20) // the ingress's body limit is far below it: nothing spills to disk
	case form:
		err = r.ParseForm()
	case !slices.Contains(Flavors, f):
		return Result{}, &Error{Field: "flavor", Why: fmt.Sprintf("%.20q is not a flavor", string(f))}
	default:
		res, err = parseJSON(r.Body, f)
	}
	if get := func(k string) string { return cmp.Or(r.PostForm.Get(k), r.Form.Get(k)) }; form { // a multipart body's too
		id, code, res = "id", "code", Result{TaskID: get("id"), Code: get("code")}
	}
	switch {
	case form && err != nil:
		return Result{}, &Error{Field: "form", Why: "the query string or form body cannot be parsed", Err: err}
	case err != nil:
		return Result{}, err
	case form && res.TaskID == "":
		return Result{}, &Error{Field: id, Why: "required (the provider's task ID)"}
	case res.TaskID != "" && !taskIDPattern.MatchString(res.TaskID):
		return Result{}, &Error{Field: id, Why: "must be 1-64 characters of A-Z a-z 0-9 _ -"}
	case res.Code == "":
		return Result{TaskID: res.TaskID}, &Error{Field: code, Why: "required (the solved CAPTCHA)"}
	case len(res.Code) > captchaflow.MaxCodeBytes:
		return Result{TaskID: res.TaskID}, &Error{Field: code, Why: fmt.Sprintf("longer than %d bytes", captchaflow.MaxCodeBytes)}
	}
	return res, nil
}

// parseJSON reads a getTaskResult-shaped callback; an error (errorId other than 0) is only ever its status word.
func parseJSON(body io.Reader, f Flavor) (Result, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return Result{}, &Error{Field: "body", Why: "cannot be read", Err: err}
	}
	env, err := ParseEnvelope(raw)
	var out Result
	var n json.Number
	switch {
	case err != nil:
	case len(env.TaskID) > 0 && json.Unmarshal(env.TaskID, &n) != nil && json.Unmarshal(env.TaskID, &out.TaskID) != nil:
		err = errors.New("taskId is neither a number nor a string")
	case env.Failed() && !IsStatusWord(Canonical(env.ErrorCode)): // else its text would be taken for a solution
		err = fmt.Errorf("errorCode %s is not a status word", Snippet([]byte(env.ErrorCode)))
	case env.Failed():
		out.Code = Canonical(env.ErrorCode)
	case env.Status == "failed":
		out.Code = CodeUnsolvable
	case env.Status == "ready":
		out.Code, err = InferCode(env.Solution)
	default:
		err = fmt.Errorf("status %s", Snippet([]byte(strings.TrimSpace(env.Status))))
	}
	if err != nil {
		return Result{}, &Error{Field: "body", Why: fmt.Sprintf("not a %s callback body", f), Err: err}
	}
	out.TaskID = cmp.Or(n.String(), out.TaskID) // a number's exact digits, or the string
	return out, nil
}

// Envelope is every createTask-protocol answer: the error fields plus whatever the call returns.
type Envelope struct {
	ErrorID          json.Number     `json:"errorId"` // a number or a string of one
	ErrorCode        string          `json:"errorCode"`
	ErrorDescription string          `json:"errorDescription"`
	TaskID           json.RawMessage `json:"taskId"`
	Status           string          `json:"status"`
	Solution         json.RawMessage `json:"solution"`
	Balance          json.RawMessage `json:"balance"`
	Cost             json.RawMessage `json:"cost"` // getTaskResult's: what the solve cost, a number or one in a string
}

// ParseEnvelope decodes an answer; one without an integer errorId is not createTask's.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: invalid JSON: %s", ErrMalformed, Snippet(raw))
	}
	if _, err := env.ErrorID.Int64(); err != nil {
		return Envelope{}, fmt.Errorf("%w: errorId %s is not an integer", ErrMalformed, Snippet([]byte(env.ErrorID)))
	}
	return env, nil
}

func (e Envelope) Failed() bool { n, _ := e.ErrorID.Int64(); return n != 0 }
