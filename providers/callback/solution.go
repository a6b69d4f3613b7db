package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Solution says where the code is in a getTaskResult solution; the code reads as res.php answers the same method.
type Solution struct {
	Fields []string // Object: the code is res.php's JSON object of them, each named Prefix+field (GeeTest's); else the first set
	Object bool
	Prefix string
	Cookie string // the code is this cookie's value; the answer's Cookies hold it too
	More   bool   // the answer holds a user agent or cookies: read from a result request, never a callback's code alone
}

// Answer is a solved task: its code, what answers with it, and getTaskResult's cost (0: not said).
type Answer struct {
	Code, UserAgent string
	Cookies         map[string]string
	CostUSD         float64
}

// The solutions as the providers document them; a task's table entry names one.
var (
	RecaptchaToken = Solution{Fields: []string{"gRecaptchaResponse"}}
	PlainToken     = Solution{Fields: []string{"token"}}
	AnyToken       = Solution{Fields: []string{"gRecaptchaResponse", "token"}} // 2captcha's hCaptcha
	ImageText      = Solution{Fields: []string{"text"}}
	GeeTest3       = Solution{Fields: []string{"challenge", "validate", "seccode"}, Object: true, Prefix: "geetest_"}
	GeeTest4       = Solution{Fields: []string{"captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output"}, Object: true}
	TokenAndAgent  = Solution{Fields: []string{"token"}, More: true} // a challenge page's token, good with its user agent only
	DataDome       = Solution{Cookie: "datadome", More: true}
	CFClearance    = Solution{Cookie: "cf_clearance", More: true}
	AWSWAF         = Solution{Cookie: "aws-waf-token", More: true}
)

// Answer reads a solution: the code (a cookie kind's: its cookie's value), userAgent, and the cookies from cookies
// (an object or a Cookie header), cookie (a Set-Cookie line, or CapSolver's aws-waf-token value alone), CapMonster's
// domains.<host>.cookies or a field named like the cookie (CapMonster's cf_clearance).
func (s Solution) Answer(raw json.RawMessage) (Answer, error) {
	var sol struct {
		UserAgent       string `json:"userAgent"`
		Cookies, Cookie json.RawMessage
		Domains         map[string]struct{ Cookies map[string]string }
	}
	_ = json.Unmarshal(raw, &sol) // Code reports a solution that is no object
	a := Answer{UserAgent: sol.UserAgent, Cookies: map[string]string{}}
	var obj map[string]string // "null" would make a.Cookies nil
	var line, cookie string
	if json.Unmarshal(sol.Cookies, &obj) == nil {
		maps.Copy(a.Cookies, obj)
	} else if json.Unmarshal(sol.Cookies, &line) == nil {
		cookies, _ := http.ParseCookie(line)
		for _, c := range cookies {
			a.Cookies[c.Name] = c.Value
		}
	}
	for _, d := range sol.Domains {
		maps.Copy(a.Cookies, d.Cookies)
	}
	if _ = json.Unmarshal(sol.Cookie, &cookie); SetCookie(cookie) != nil {
		maps.Copy(a.Cookies, SetCookie(cookie))
	} else if cookie != "" && s.Cookie != "" {
		a.Cookies[s.Cookie] = cookie
	}
	if v, _ := (Solution{Fields: []string{s.Cookie}}).Code(raw); s.Cookie != "" && v != "" {
		a.Cookies[s.Cookie] = v
	}
	var err error
	switch {
	case s.Cookie != "" && a.Cookies[s.Cookie] == "":
		err = fmt.Errorf("%w: no %s cookie", errNoCode, s.Cookie)
	case s.Cookie != "":
		a.Code = a.Cookies[s.Cookie]
	case len(s.Fields) == 0: // a kind not known: the shapes' fields tell
		a.Code, err = InferCode(raw)
	default:
		a.Code, err = s.Code(raw)
	}
	return a, err
}

// JoinCookies is a Cookie header of cookies, sorted by name: the form a Result holds them in.
func JoinCookies(cookies map[string]string) string {
	pairs := make([]string, 0, len(cookies))
	for _, name := range slices.Sorted(maps.Keys(cookies)) {
		pairs = append(pairs, name+"="+cookies[name])
	}
	return strings.Join(pairs, "; ")
}

// SetCookie is a Set-Cookie line's one cookie, without its attributes (nil: no cookie).
func SetCookie(line string) map[string]string {
	if c, err := http.ParseSetCookie(line); err == nil {
		return map[string]string{c.Name: c.Value}
	}
	return nil
}

var errNoCode = errors.New("the solution has no code")

// InferCode extracts the code from a solution of unknown kind: the shapes' fields are disjoint enough for the first match.
func InferCode(raw json.RawMessage) (string, error) {
	for _, s := range []Solution{AnyToken, GeeTest3, GeeTest4, ImageText, DataDome, CFClearance, AWSWAF} {
		if a, err := s.Answer(raw); err == nil {
			return a.Code, nil
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
