package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// answer is one decoded in.php / res.php reply, whatever its wire form.
type answer struct {
	OK        bool
	Value     string // payload when OK: task id, token, balance, OK_REPORT_RECORDED
	Code      string // provider code when !OK, e.g. CAPCHA_NOT_READY
	ErrorText string // optional human-readable detail (JSON error_text)
}

// parseAnswer decodes both wire forms of the 2captcha protocol:
//
//	JSON:  {"status":1,"request":"<value>"} / {"status":0,"request":"ERROR_CODE","error_text":"..."}
//	plain: OK|<value> / ERROR_CODE / CAPCHA_NOT_READY / <balance>
//
// The form is sniffed from the body, not taken from the json=1 we asked for,
// because some providers and proxies answer plain text regardless.
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

// jsonText is the "request" field as text: strings are unquoted, numbers
// (balance, numeric task ids) keep their exact digits, and objects or arrays
// (structured tokens such as GeeTest's) are kept as raw JSON.
type jsonText string

func (t *jsonText) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*t = ""
	case b[0] != '"':
		*t = jsonText(b)
	case bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b):
		// Fast path for the common escape-free token: json.Unmarshal has
		// already validated the document, so the quotes can just be cut.
		// (Invalid UTF-8 takes the slow path, which turns it into U+FFFD as
		// any JSON decoder does; found by FuzzParseAnswerJSON.)
		*t = jsonText(b[1 : len(b)-1])
	default:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = jsonText(s)
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
