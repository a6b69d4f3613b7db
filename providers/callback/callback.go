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

// The known flavors.
const (
	AntiCaptcha Flavor = "anticaptcha"
	TwoCaptcha  Flavor = "2captcha" // API v2 (api.2captcha.com); API v1 is the in.php protocol
	CapMonster  Flavor = "capmonster"
	CapSolver   Flavor = "capsolver"
)

// Flavors lists every flavor, in a fixed order.
var Flavors = []Flavor{AntiCaptcha, TwoCaptcha, CapMonster, CapSolver}

// FormBody: the flavor POSTs the in.php pingback's form id + code (2captcha.com/h/how-to-configure-automatic-response-retrieval-via-pingback);
// the others POST a getTaskResult-shaped JSON document.
func FormBody(f Flavor) bool { return f == TwoCaptcha }

// Result is what a callback says: the task and its code or a status word (IsStatusWord).
type Result struct {
	TaskID string
	Code   string
}

// Error is a refused callback; "Field: Why" is the ingress's 400 and never echoes the code. Err is the body's read
// error (an *http.MaxBytesError is the ingress's 413).
type Error struct {
	Field, Why string
	Err        error
}

func (e *Error) Error() string { return e.Field + ": " + e.Why }
func (e *Error) Unwrap() error { return e.Err }

// ErrMalformed: an answer in neither protocol's documented shape.
var ErrMalformed = errors.New("malformed provider answer")

// taskIDPattern bounds a provider's task ID (providers use numeric IDs); it also keeps anything from being injected
// into the untokened route's visibility query.
var taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// multipartMemory: the ingress's body limit is far below it, so nothing spills to disk.
const multipartMemory = 1 << 20

// Parse reads the callback r carries: without a flavor (or 2captcha's) the in.php pingback's id and code from the form
// body (urlencoded or multipart, winning) or the query; else the flavor's getTaskResult-shaped JSON body, whose taskId
// is optional (CapMonster's has none: the tokened URL names the workflow).
func Parse(r *http.Request, f Flavor) (Result, error) {
	if f == "" || FormBody(f) {
		return parseForm(r)
	}
	if !slices.Contains(Flavors, f) {
		return Result{}, &Error{Field: "flavor", Why: fmt.Sprintf("%.20q is not a flavor", string(f))}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return Result{}, &Error{Field: "body", Why: "cannot be read", Err: err}
	}
	res, err := parseJSON(body)
	switch {
	case err != nil:
		return Result{}, &Error{Field: "body", Why: fmt.Sprintf("not a %s callback body", f), Err: err}
	case res.TaskID != "" && !taskIDPattern.MatchString(res.TaskID):
		return Result{}, &Error{Field: "taskId", Why: "must be 1-64 characters of A-Z a-z 0-9 _ -"}
	case len(res.Code) > captchaflow.MaxCodeBytes:
		return Result{TaskID: res.TaskID}, &Error{Field: "solution", Why: codeTooLong}
	}
	return res, nil
}

var codeTooLong = fmt.Sprintf("longer than %d bytes", captchaflow.MaxCodeBytes)

func parseForm(r *http.Request) (Result, error) {
	var err error
	if media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); media == "multipart/form-data" {
		err = r.ParseMultipartForm(multipartMemory)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		return Result{}, &Error{Field: "form", Why: "the query string or form body cannot be parsed", Err: err}
	}
	get := func(k string) string { return cmp.Or(r.PostForm.Get(k), r.Form.Get(k)) } // a multipart body's too
	res := Result{TaskID: get("id"), Code: get("code")}
	switch {
	case res.TaskID == "":
		return Result{}, &Error{Field: "id", Why: "required (the provider's task ID)"}
	case !taskIDPattern.MatchString(res.TaskID):
		return Result{}, &Error{Field: "id", Why: "must be 1-64 characters of A-Z a-z 0-9 _ -"}
	case res.Code == "":
		return Result{TaskID: res.TaskID}, &Error{Field: "code", Why: "required (the solved CAPTCHA)"}
	case len(res.Code) > captchaflow.MaxCodeBytes:
		return Result{TaskID: res.TaskID}, &Error{Field: "code", Why: codeTooLong}
	}
	return res, nil
}

// parseJSON reads a getTaskResult-shaped callback; an error (errorId other than 0) is only ever its status word.
func parseJSON(body []byte) (Result, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return Result{}, err
	}
	var out Result
	var n json.Number
	if len(env.TaskID) > 0 && json.Unmarshal(env.TaskID, &n) == nil {
		out.TaskID = n.String()
	} else if len(env.TaskID) > 0 && json.Unmarshal(env.TaskID, &out.TaskID) != nil {
		return Result{}, errors.New("taskId is neither a number nor a string")
	}
	switch {
	case env.Failed() && !IsStatusWord(Canonical(env.ErrorCode)): // else its text would be taken for a solution
		return Result{}, fmt.Errorf("errorCode %s is not a status word", Snippet([]byte(env.ErrorCode)))
	case env.Failed():
		out.Code = Canonical(env.ErrorCode)
	case env.Status == "failed":
		out.Code = CodeUnsolvable
	case env.Status == "ready":
		out.Code, err = InferCode(env.Solution)
	default:
		err = fmt.Errorf("status %s", Snippet([]byte(strings.TrimSpace(env.Status))))
	}
	return out, err
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
