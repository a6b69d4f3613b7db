package providers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// InPHP is a client of the 2captcha-compatible in.php / res.php protocol (CaptchaAI, 2captcha API v1).
type InPHP struct {
	conn
	inURL, resURL string
	lookups       lookups // Get calls waiting to share a res.php request
}

// NewInPHP returns a client for baseURL (absolute http/https, optionally with a path prefix).
func NewInPHP(baseURL, apiKey string, opts ...Option) (*InPHP, error) {
	c, base, err := newConn("captchaai", baseURL, apiKey, opts)
	if err != nil {
		return nil, err
	}
	return &InPHP{conn: c, inURL: base.JoinPath("in.php").String(), resURL: base.JoinPath("res.php").String(),
		lookups: lookups{tally: map[string]int{}}}, nil
}

// Supports is nil: in.php takes every method, and refuses what it does not know itself.
func (c *InPHP) Supports(string, map[string]string) error { return nil }

// Submit calls in.php with method, params as-is and pingback (omitted if ""); "post" uploads params["file"] as a file.
func (c *InPHP) Submit(ctx context.Context, method string, params map[string]string, pingback string) (id, code string, err error) {
	contentType, body, err := encodeSubmit(c.apiKey, method, params, pingback)
	if err != nil {
		return "", "", c.fail("submit", callback.ClassConfig, err)
	}
	ans, err := c.call(ctx, "submit", http.MethodPost, c.inURL, contentType, body)
	if err != nil {
		return "", "", withoutProxyPassword(err, params)
	}
	if !taskIDPattern.MatchString(ans.Value) {
		return "", "", c.invalid("submit", "task id %s is not an id (want 1-64 of [0-9A-Za-z_-])",
			callback.Snippet([]byte(redactText(ans.Value, c.apiKey))))
	}
	return ans.Value, "", nil
}

// Get calls res.php action=get: not ready is ClassNotReady; an empty or oversized code is an ErrInvalidAnswer.
// Lookups waiting at once share one action=get&ids= request (WithResultBatching); each obeys its own ctx.
func (c *InPHP) Get(ctx context.Context, taskID string) (string, error) {
	method, _ := ctx.Value(methodKey{}).(string)
	if !taskIDPattern.MatchString(taskID) || !c.batching(method) { // "," or "|" would shift its batch
		return c.getOne(ctx, taskID)
	}
	l := &lookup{ctx: ctx, id: taskID, method: method, done: make(chan result, 1)}
	c.enqueue(l)
	select {
	case r := <-l.done:
		return r.code, r.err
	case <-ctx.Done():
		return "", c.fail("get", callback.ClassTransient, ctx.Err())
	}
}

func (c *InPHP) getOne(ctx context.Context, taskID string) (string, error) {
	ans, err := c.res(ctx, "get", taskID)
	if err != nil {
		return "", err
	}
	return c.checkCode("get", ans.Value)
}

// Answer is Get with res.php's useragent and cookies; a kind ("": any) that names one is asked alone, never in an ids=
// batch, which drops them. Where res.php answers a Set-Cookie line (2captcha's DataDome), the code is the cookie's value.
func (c *InPHP) Answer(ctx context.Context, taskID string, kind Kind) (Answer, error) {
	if kind == "" {
		code, err := c.Get(ctx, taskID)
		return Answer{Code: code}, err
	}
	ans, err := c.res(ctx, "get", taskID)
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Code: ans.Value, UserAgent: ans.UserAgent, Cookies: ans.Cookies}
	if name := solutions[kind].Cookie; callback.SetCookie(a.Code)[name] != "" {
		a.Cookies = maps.Collect(maps.All(a.Cookies)) // a copy even of nil: the cookie joins it
		maps.Copy(a.Cookies, callback.SetCookie(a.Code))
		a.Code = a.Cookies[name]
	}
	return c.checkAnswer("get", a)
}

func (c *InPHP) Balance(ctx context.Context) (float64, error) {
	ans, err := c.res(ctx, "getbalance", "")
	return c.balance("getbalance", ans.Value, err)
}

// Report is reportgood / reportbad, for any kind.
func (c *InPHP) Report(ctx context.Context, _ Kind, taskID string, good bool) error {
	_, err := c.res(ctx, map[bool]string{false: "reportbad", true: "reportgood"}[good], taskID)
	return err
}

// res performs res.php's action (the op) on taskID ("" for getbalance); the key is in its query, so errors redact.
func (c *InPHP) res(ctx context.Context, action, taskID string) (answer, error) {
	query := url.Values{"action": {action}, "key": {c.apiKey}, "json": {"1"}}
	if action != "getbalance" {
		if taskID == "" {
			return answer{}, c.fail(action, callback.ClassConfig, errors.New("task id is required"))
		}
		query.Set("id", taskID)
	}
	return c.call(ctx, action, http.MethodGet, c.resURL+"?"+query.Encode(), "", nil)
}

// call runs one request and decodes its answer; a 5xx whose body is the provider's own ERROR_… word is that answer.
func (c *InPHP) call(ctx context.Context, op, method, target, contentType string, body []byte) (answer, error) {
	var ans answer
	err := c.do(ctx, op, method, target, contentType, body, func(status int, body []byte) (_ *Error, err error) {
		if ans, err = parseAnswer(body); err != nil || ans.OK || status != 0 && (status < 500 || !callback.IsStatusWord(ans.Code)) {
			return nil, err
		}
		return c.codeError(op, ans.Code, ans.ErrorText, status), nil
	})
	return ans, err
}

// answer is one decoded in.php / res.php reply, whatever its wire form.
type answer struct {
	OK        bool
	Value     string // payload when OK: task id, token, balance, OK_REPORT_RECORDED
	Code      string // provider code when !OK, e.g. CAPCHA_NOT_READY
	ErrorText string // optional human-readable detail (JSON error_text)
	UserAgent string // JSON useragent: what the code must be used with (a Cloudflare challenge page's)
	Cookies   map[string]string
}

// parseAnswer decodes JSON ({"status":1,"request":…}) or the plain text (OK|…, ERROR_CODE, a balance) some send.
func parseAnswer(body []byte) (answer, error) {
	trimmed := bytes.TrimSpace(body)
	s := string(trimmed)
	switch {
	case len(trimmed) == 0:
		return answer{}, fmt.Errorf("%w: empty body", callback.ErrMalformed)
	case trimmed[0] == '{':
		return parseJSONAnswer(body) // untrimmed: JSON's whitespace only, as encoding/json (TrimSpace also takes \v, \f)
	case s == "OK" || strings.HasPrefix(s, "OK|"):
		return answer{OK: true, Value: strings.TrimPrefix(s[len("OK"):], "|")}, nil
	case strings.HasPrefix(s, "OK_") && callback.IsCode(s): // OK_REPORT_RECORDED
		return answer{OK: true, Value: s}, nil
	case callback.IsCode(s):
		return answer{Code: s}, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil { // plain getbalance answers are the bare amount
		return answer{OK: true, Value: s}, nil
	}
	return answer{}, fmt.Errorf("%w: %s", callback.ErrMalformed, callback.Snippet(trimmed))
}

// parseJSONAnswer reads status 1/0 (number or string) and request as text (a number's digits, GeeTest's object raw).
func parseJSONAnswer(body []byte) (answer, error) {
	var raw struct {
		Status, Request json.RawMessage
		ErrorText       string `json:"error_text"`
		UserAgent       string `json:"useragent"`
		Cookies         json.RawMessage
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return answer{}, fmt.Errorf("%w: invalid JSON: %s", callback.ErrMalformed, callback.Snippet(body))
	}
	var request string
	if string(raw.Request) != "null" {
		request = string(raw.Request)
		_ = json.Unmarshal(raw.Request, &request) // a string's text; a number or object stays raw
	}
	switch string(raw.Status) {
	case "1", `"1"`:
		var cookies map[string]string
		_ = json.Unmarshal(raw.Cookies, &cookies) // an object of them, or none
		return answer{OK: true, Value: request, UserAgent: raw.UserAgent, Cookies: cookies}, nil
	case "0", `"0"`:
		if request == "" {
			return answer{}, fmt.Errorf("%w: status 0 without an error code", callback.ErrMalformed)
		}
		return answer{Code: request, ErrorText: raw.ErrorText}, nil
	case "":
		return answer{}, fmt.Errorf("%w: missing status", callback.ErrMalformed)
	}
	return answer{}, fmt.Errorf("%w: unexpected status %s", callback.ErrMalformed, callback.Snippet(raw.Status))
}

// encodeSubmit builds the in.php POST body (the key never in a URL); "post" uploads params["file"] as a file.
func encodeSubmit(apiKey, method string, params map[string]string, pingback string) (contentType string, body []byte, err error) {
	if strings.TrimSpace(method) == "" {
		return "", nil, errors.New("method is required")
	}
	fields := url.Values{"key": {apiKey}, "method": {method}, "json": {"1"}, "pingback": {pingback}}
	// A param may not change the account, the answer format or where the provider calls back.
	for _, name := range captchaflow.ReservedParams {
		if _, ok := params[name]; ok {
			return "", nil, fmt.Errorf("param %q is set by the client and must not be passed", name)
		}
	}
	if pingback == "" {
		fields.Del("pingback")
	}
	for name, value := range params {
		fields.Set(name, value)
	}
	if method != "post" {
		return "application/x-www-form-urlencoded", []byte(fields.Encode()), nil
	}
	if strings.TrimSpace(fields.Get("file")) == "" {
		return "", nil, errors.New(`method "post" needs params["file"] with the base64 image`)
	}
	image, err := decodeImage(fields.Get("file"))
	if err != nil {
		return "", nil, errors.New(`params["file"] is not valid base64 image data`)
	}
	fields.Del("file")
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(fields)) { // sorted: a deterministic body
		_ = w.WriteField(name, fields.Get(name)) // a bytes.Buffer takes every write
	}
	contentType = http.DetectContentType(image)
	fileName, ok := imageNames[contentType]
	if !ok { // a supported extension keeps a rejection about the content
		contentType, fileName = "application/octet-stream", "captcha.png"
	}
	part, _ := w.CreatePart(textproto.MIMEHeader{"Content-Type": {contentType},
		"Content-Disposition": {fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName)}})
	_, _ = part.Write(image)
	_ = w.Close()
	return w.FormDataContentType(), buf.Bytes(), nil
}

// imageNames name the file with its type's extension: the provider refuses others (ERROR_WRONG_FILE_EXTENSION).
var imageNames = map[string]string{"image/jpeg": "captcha.jpg", "image/gif": "captcha.gif", "image/png": "captcha.png"}

// decodeImage accepts standard or URL-safe base64, padded or not, after an optional data: URI prefix.
func decodeImage(encoded string) ([]byte, error) {
	s := strings.TrimSpace(encoded)
	if _, data, ok := strings.Cut(s, ","); ok && strings.HasPrefix(s, "data:") {
		s = data
	}
	s = strings.TrimRight(strings.Join(strings.Fields(s), ""), "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if image, err := enc.DecodeString(s); err == nil && len(image) > 0 {
			return image, nil
		}
	}
	return nil, errors.New("is not valid base64 image data")
}
