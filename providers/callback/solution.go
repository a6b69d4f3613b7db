package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Solution says where the code is in a getTaskResult solution; the code reads as res.php answers the same method.
type Solution struct {
	Fields []string // Object: the code is res.php's JSON object of them, each named Prefix+field (GeeTest's); else the first set
	Object bool
	Prefix string
}

// The solutions as the providers document them; a task's table entry names one.
var (
	RecaptchaToken = Solution{Fields: []string{"gRecaptchaResponse"}}
	PlainToken     = Solution{Fields: []string{"token"}}
	AnyToken       = Solution{Fields: []string{"gRecaptchaResponse", "token"}} // 2captcha's hCaptcha
	ImageText      = Solution{Fields: []string{"text"}}
	GeeTest3       = Solution{Fields: []string{"challenge", "validate", "seccode"}, Object: true, Prefix: "geetest_"}
	GeeTest4       = Solution{Fields: []string{"captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output"}, Object: true}
)

var errNoCode = errors.New("the solution has no code")

// InferCode extracts the code from a solution of unknown kind: the shapes' fields are disjoint enough for the first match.
func InferCode(raw json.RawMessage) (string, error) {
	for _, s := range []Solution{AnyToken, GeeTest3, GeeTest4, ImageText} {
		if code, err := s.Code(raw); err == nil {
			return code, nil
		}
	}
	return "", fmt.Errorf("%w of any declared shape", errNoCode)
}

// Code extracts the code from a raw solution object; a field is a string or a number's literal digits (GeeTest's gen_time).
func (s Solution) Code(raw json.RawMessage) (string, error) {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return "", fmt.Errorf("%w: the solution is not an object", errNoCode)
	}
	var object []string
	for _, name := range s.Fields {
		v, _ := fields[name].(string)
		if n, ok := fields[name].(json.Number); ok {
			v = n.String()
		}
		switch {
		case !s.Object && v != "":
			return v, nil
		case s.Object && v == "":
			return "", fmt.Errorf("%w: %s is missing", errNoCode, name)
		case s.Object:
			key, _ := json.Marshal(s.Prefix + name)
			val, _ := json.Marshal(v)
			object = append(object, string(key)+":"+string(val))
		}
	}
	if !s.Object {
		return "", fmt.Errorf("%w: none of %v is set", errNoCode, s.Fields)
	}
	return "{" + strings.Join(object, ",") + "}", nil
}
