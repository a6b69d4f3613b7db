package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Shape is how a solution object becomes the code captchaflow delivers. The code is what in.php's res.php answers
// for the same method, so a result reads the same whichever protocol solved it.
type Shape string

const (
	// ShapeText: the code is the first non-empty string of Solution.Fields (a token, an image's text).
	ShapeText Shape = "text"
	// ShapeGeeTest3: challenge, validate and seccode, as res.php's JSON object with geetest_-prefixed names.
	ShapeGeeTest3 Shape = "geetest3"
	// ShapeGeeTest4: the five GeeTest v4 values, as res.php's JSON object with the same names.
	ShapeGeeTest4 Shape = "geetest4"
)

// Solution says where the code is in a getTaskResult solution.
type Solution struct {
	Shape  Shape
	Fields []string // ShapeText only
}

// geetestNames maps each GeeTest shape's solution fields to the code's names, in the code's order.
var geetestNames = map[Shape][][2]string{
	ShapeGeeTest3: {{"challenge", "geetest_challenge"}, {"validate", "geetest_validate"}, {"seccode", "geetest_seccode"}},
	ShapeGeeTest4: {{"captcha_id", "captcha_id"}, {"lot_number", "lot_number"}, {"pass_token", "pass_token"},
		{"gen_time", "gen_time"}, {"captcha_output", "captcha_output"}},
}

// The solutions as the providers document them; a task's table entry names one.
var (
	RecaptchaToken = Solution{Shape: ShapeText, Fields: []string{"gRecaptchaResponse"}}
	PlainToken     = Solution{Shape: ShapeText, Fields: []string{"token"}}
	AnyToken       = Solution{Shape: ShapeText, Fields: []string{"gRecaptchaResponse", "token"}} // 2captcha's hCaptcha
	ImageText      = Solution{Shape: ShapeText, Fields: []string{"text"}}
	GeeTest3       = Solution{Shape: ShapeGeeTest3}
	GeeTest4       = Solution{Shape: ShapeGeeTest4}
)

// inferOrder is the order a solution of unknown kind is tried in: the shapes' fields are disjoint enough (a token,
// GeeTest's objects, a text) for the first match to be the right one.
var inferOrder = []Solution{AnyToken, GeeTest3, GeeTest4, ImageText}

// InferCode extracts the code from a solution of unknown kind.
func InferCode(raw json.RawMessage) (string, error) {
	for _, s := range inferOrder {
		if code, err := s.Code(raw); err == nil {
			return code, nil
		}
	}
	return "", fmt.Errorf("%w of any declared shape", errNoCode)
}

// errNoCode marks a solution without the fields its shape needs.
var errNoCode = errors.New("the solution has no code")

// Code extracts the code from a raw solution object.
func (s Solution) Code(raw json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", fmt.Errorf("%w: the solution is not an object", errNoCode)
	}
	if s.Shape == ShapeText {
		for _, name := range s.Fields {
			if v := stringField(fields[name]); v != "" {
				return v, nil
			}
		}
		return "", fmt.Errorf("%w: none of %v is set", errNoCode, s.Fields)
	}
	return geetestCode(geetestNames[s.Shape], fields)
}

// geetestCode builds res.php's JSON object from the solution's fields; every field must be there.
func geetestCode(names [][2]string, fields map[string]json.RawMessage) (string, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		v := stringField(fields[n[0]])
		if v == "" {
			return "", fmt.Errorf("%w: %s is missing", errNoCode, n[0])
		}
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(n[1])
		val, _ := json.Marshal(v)
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// stringField reads a JSON string, or a number's literal digits (GeeTest's gen_time may come as a number); anything
// else is "".
func stringField(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}
