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

	"github.com/captchaflow/captchaflow/providers/callback"
)

// InPHP is a client of the 2captcha-compatible in.php / res.php protocol (CaptchaAI, 2captcha API v1).
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

// NewInPHP returns a client for baseURL (absolute http/https, optionally with a path prefix).
func NewInPHP(baseURL, apiKey string, opts ...Option) (*InPHP, error) {
	c, base, err := newConn("captchaai", baseURL, apiKey, opts)
	if err != nil {
		return nil, err
	}
	return &InPHP{conn: c, inURL: base.JoinPath("in.php").String(), resURL: base.JoinPath("res.php").String()}, nil
}

// Supports is nil: in.php takes every method, and refuses what it does not know itself.
func (c *InPHP) Supports(string, map[string]string) error { return nil }

// Submit calls in.php with method, params as-is and pingback (omitted if ""); "post" uploads params["file"] as a file.
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
	return c.balance(opGetBalance, ans.Value)
}

// Report is reportgood / reportbad, for any kind.
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

// call runs one request and decodes its answer; a 5xx whose body is the provider's own ERROR_… word is that answer.
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

// answer is one decoded in.php / res.php reply, whatever its wire form.
type answer struct {
	OK        bool
	Value     string // payload when OK: task id, token, balance, OK_REPORT_RECORDED
	Code      string // provider code when !OK, e.g. CAPCHA_NOT_READY
	ErrorText string // optional human-readable detail (JSON error_text)
}

// parseAnswer decodes JSON ({"status":1,"request":…}) or plain text (OK|…, ERROR_CODE, a balance), sniffed from the
// body: some providers and proxies answer plain text despite json=1.
func parseAnswer(body []byte) (answer, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return answer{}, fmt.Errorf("%w: empty body", callback.ErrMalformed)
	}
	if trimmed[0] == '{' {
		return parseJSONAnswer(trimmed)
	}
	return parsePlainAnswer(trimmed)
}

type jsonAnswer struct {
	Status    jsonStatus `json:"status"`
	Request   jsonText   `json:"request"`
	ErrorText string     `json:"error_text"`
}

func parseJSONAnswer(body []byte) (answer, error) {
	var raw jsonAnswer
	if err := json.Unmarshal(body, &raw); err != nil {
		if errors.Is(err, callback.ErrMalformed) {
			return answer{}, err
		}
		return answer{}, fmt.Errorf("%w: invalid JSON: %s", callback.ErrMalformed, callback.Snippet(body))
	}
	if !raw.Status.set {
		return answer{}, fmt.Errorf("%w: missing status", callback.ErrMalformed)
	}
	if raw.Status.ok {
		return answer{OK: true, Value: string(raw.Request)}, nil
	}
	if raw.Request == "" {
		return answer{}, fmt.Errorf("%w: status 0 without an error code", callback.ErrMalformed)
	}
	return answer{Code: string(raw.Request), ErrorText: raw.ErrorText}, nil
}

// jsonStatus accepts 1/0 as a number or a string.
type jsonStatus struct{ set, ok bool }

func (s *jsonStatus) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "1", `"1"`:
		*s = jsonStatus{set: true, ok: true}
	case "0", `"0"`:
		*s = jsonStatus{set: true}
	default:
		return fmt.Errorf("%w: unexpected status %s", callback.ErrMalformed, callback.Snippet(b))
	}
	return nil
}

// jsonText is "request" as text: a string unquoted, a number's exact digits, an object (GeeTest's) as raw JSON.
type jsonText string

func (t *jsonText) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*t = ""
	case b[0] != '"':
		*t = jsonText(b)
	default:
		return json.Unmarshal(b, (*string)(t))
	}
	return nil
}

func parsePlainAnswer(body []byte) (answer, error) {
	s := string(body)
	switch {
	case strings.HasPrefix(s, "OK|"):
		return answer{OK: true, Value: s[len("OK|"):]}, nil
	case s == "OK":
		return answer{OK: true}, nil
	case strings.HasPrefix(s, "OK_") && callback.IsCode(s): // OK_REPORT_RECORDED
		return answer{OK: true, Value: s}, nil
	case callback.IsCode(s):
		return answer{Code: s}, nil
	case isNumber(s): // plain getbalance answers are the bare amount
		return answer{OK: true, Value: s}, nil
	default:
		return answer{}, fmt.Errorf("%w: %s", callback.ErrMalformed, callback.Snippet(body))
	}
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// methodPost is the in.php method that uploads the image as a multipart file.
const methodPost = "post"

// submitBody is an encoded in.php request body.
type submitBody struct {
	contentType string
	data        []byte
}

// encodeSubmit builds the in.php POST body; the key travels in the body, never in a URL an error could print.
func encodeSubmit(apiKey, method string, params map[string]string, pingback string) (submitBody, error) {
	if strings.TrimSpace(method) == "" {
		return submitBody{}, errors.New("method is required")
	}
	fields := url.Values{"key": {apiKey}, "method": {method}, "json": {"1"}, "pingback": {pingback}}
	// A param may not change the account, the answer format or where the provider calls back.
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if _, ok := params[name]; ok {
			return submitBody{}, fmt.Errorf("param %q is set by the client and must not be passed", name)
		}
	}
	if pingback == "" {
		fields.Del("pingback")
	}
	if method == methodPost {
		return encodeMultipart(fields, params)
	}
	for name, value := range params {
		fields.Set(name, value)
	}
	return submitBody{
		contentType: "application/x-www-form-urlencoded",
		data:        []byte(fields.Encode()),
	}, nil
}

// encodeMultipart sends params["file"] (base64) as method=post's file upload, every other field as a form value.
func encodeMultipart(fields url.Values, params map[string]string) (submitBody, error) {
	encoded, ok := params["file"]
	if !ok || strings.TrimSpace(encoded) == "" {
		return submitBody{}, errors.New(`method "post" needs params["file"] with the base64 image`)
	}
	image, err := decodeImage(encoded)
	if err != nil {
		return submitBody{}, err
	}
	for name, value := range params {
		if name != "file" {
			fields.Set(name, value)
		}
	}

	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(fields)) { // sorted: a deterministic body
		if err := w.WriteField(name, fields.Get(name)); err != nil {
			return submitBody{}, fmt.Errorf("encode multipart field: %w", err)
		}
	}
	contentType, fileName := imageFileType(image)
	header := make(textproto.MIMEHeader)
	header.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	header.Set("Content-Type", contentType)
	part, err := w.CreatePart(header)
	if err != nil {
		return submitBody{}, fmt.Errorf("encode multipart file: %w", err)
	}
	if _, err := part.Write(image); err != nil {
		return submitBody{}, fmt.Errorf("encode multipart file: %w", err)
	}
	if err := w.Close(); err != nil {
		return submitBody{}, fmt.Errorf("encode multipart: %w", err)
	}
	return submitBody{contentType: w.FormDataContentType(), data: buf.Bytes()}, nil
}

// decodeImage accepts standard or URL-safe base64, padded or not, after an optional data: URI prefix.
func decodeImage(encoded string) ([]byte, error) {
	s := strings.TrimSpace(encoded)
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ","); i >= 0 {
			s = s[i+1:]
		}
	}
	s = strings.TrimRight(strings.Join(strings.Fields(s), ""), "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if image, err := enc.DecodeString(s); err == nil {
			if len(image) == 0 {
				break
			}
			return image, nil
		}
	}
	return nil, errors.New(`params["file"] is not valid base64 image data`)
}

// imageNames name the file with its type's extension: the provider refuses others (ERROR_WRONG_FILE_EXTENSION).
var imageNames = map[string]string{"image/jpeg": "captcha.jpg", "image/gif": "captcha.gif", "image/png": "captcha.png"}

func imageFileType(image []byte) (contentType, fileName string) {
	ct := http.DetectContentType(image)
	if name, ok := imageNames[ct]; ok {
		return ct, name
	}
	return "application/octet-stream", "captcha.png" // a supported extension keeps a rejection about the content
}
