package captchaflow

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults and bounds that other code names (docs/contract.md has them all).
const (
	DefaultCallbackTimeoutSeconds = 120
	DefaultMaxRefreshes           = 1
	MaxProviders                  = 16 // in PROVIDERS_FILE and Input.providers
)

// Input starts one SolveCaptcha workflow (docs/contract.md); durations are whole seconds, for any JSON client.
type Input struct {
	Method                 string   `json:"method"` // the provider's in.php method, e.g. "userrecaptcha"
	Params                 Params   `json:"params"` // sent to in.php as they are
	CallbackTimeoutSeconds int      `json:"callback_timeout_seconds,omitempty"`
	PollIntervalSeconds    int      `json:"poll_interval_seconds,omitempty"`
	DeadlineSeconds        int      `json:"deadline_seconds,omitempty"`
	MaxSubmits             int      `json:"max_submits,omitempty"`
	NotifyURL              string   `json:"notify_url,omitempty"`
	DeliveryTimeoutSeconds int      `json:"delivery_timeout_seconds,omitempty"`
	TokenTTLSeconds        int      `json:"token_ttl_seconds,omitempty"` // 0: the method's TokenLifetimes entry
	MaxRefreshes           *int     `json:"max_refreshes,omitempty"`     // nil: DefaultMaxRefreshes; 0: off
	LostAnswerWaitSeconds  int      `json:"lost_answer_wait_seconds,omitempty"`
	Providers              []string `json:"providers,omitempty"` // PROVIDERS_FILE names, in order; empty: all
	Caller                 string   `json:"caller,omitempty"`    // whose burst this is: callers share an account's pace fairly

	decodeErr error // for Validate: a bad start must fail InvalidInput, not a task forever
}

// FieldError is an input problem; Field names the JSON field (params.<key> for a parameter).
type FieldError struct{ Field, Problem string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldError(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// UnmarshalJSON decodes leniently and never fails; Validate reports what was wrong.
func (in *Input) UnmarshalJSON(data []byte) error {
	type plain Input
	var p plain
	err := json.Unmarshal(data, &p)
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && typeErr.Field != "" {
		err = fieldError(typeErr.Field, "must be %s, got %s", jsonKinds[typeErr.Type.Kind().String()], typeErr.Value)
	} else if err != nil && !errors.As(err, new(*FieldError)) {
		err = fmt.Errorf("input is not a JSON object of the SolveCaptcha shape: %v", err)
	}
	*in = Input(p)
	if err != nil {
		*in = Input{decodeErr: err}
	}
	return nil
}

var jsonKinds = map[string]string{"int": "an integer", "string": "a string", "map": "an object", "struct": "an object", "slice": "an array", "ptr": "an integer"}

// Params are in.php parameters. JSON numbers and booleans are kept in their literal form (a TypeScript client
// sends {"invisible": 1}); objects and arrays are refused.
type Params map[string]string

func (p *Params) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fieldError("params", "must be an object of in.php parameters")
	} else if raw == nil { // null
		*p = nil
		return nil
	}
	*p = make(Params, len(raw))
	// Sorted, so of several bad values the same one is named on every replay.
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		var s string
		switch v := raw[k]; {
		case bytes.ContainsAny(v[:1], "{[n"):
			return fieldError("params."+k, "must be a string, number or boolean")
		case json.Unmarshal(v, &s) != nil: // a number or boolean, in its literal form
			s = string(v)
		}
		(*p)[k] = s
	}
	return nil
}

// The caller's task ID is the workflow ID and one segment of the callback URL.
var workflowIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// ValidateWorkflowID reports whether id can be a SolveCaptcha workflow ID (the caller's task ID).
func ValidateWorkflowID(id string) error {
	if !workflowIDPattern.MatchString(id) {
		return fmt.Errorf("workflow ID %.60q: must be 1-200 characters of A-Z a-z 0-9 . _ : -", id)
	} else if id == "." || id == ".." { // a client resolving dot segments would call back elsewhere
		return fmt.Errorf("workflow ID %q: must not be . or .. (a path segment URL clients drop)", id)
	}
	return nil
}

// RequiredParams are the in.php fields each method 1.0 knew cannot do without, KindParams those of the kinds added
// with proxies (checked last, as the proxy: a build before judged neither); the simulator refuses the same (Required).
var (
	RequiredParams = map[string][]string{
		"userrecaptcha": {"googlekey", "pageurl"},
		"hcaptcha":      {"sitekey", "pageurl"},
		"turnstile":     {"sitekey", "pageurl"},
		"funcaptcha":    {"publickey", "pageurl"},
		"geetest":       {"gt", "challenge", "pageurl"},
		"geetest_v4":    {"captcha_id", "pageurl"},
		"base64":        {"body"},
		"post":          {"file"},
	}
	KindParams = map[string][]string{
		"datadome":         {"captcha_url", "pageurl", "userAgent"},
		"cf_clearance":     {"pageurl"},
		"amazon_waf":       {"sitekey", "iv", "context", "pageurl"},
		"mt_captcha":       {"sitekey", "pageurl"},
		"friendly_captcha": {"sitekey", "pageurl"},
	}
)

// Required are the fields method cannot do without, and whether captchaflow knows the method.
func Required(method string) ([]string, bool) {
	if r, ok := RequiredParams[method]; ok {
		return r, true
	}
	r, ok := KindParams[method]
	return r, ok
}

// ProxiedMethods go through the user's proxy only: every provider that sells them requires params.proxy.
var ProxiedMethods = []string{"datadome", "cf_clearance"}

var (
	// ReservedParams are the in.php client's own fields (and res.php's id), refused in params by both; "key" passed in
	// would put the provider key into history. in.php's form has no action: a reCAPTCHA v3 or Turnstile action is a param.
	ReservedParams = []string{"key", "json", "method", "pingback", "id"}
	// MethodPattern is a provider method's name (Input.method, CALLBACK_TIMEOUT_BY_METHOD).
	MethodPattern = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)
	// ProviderNamePattern is a provider's name (PROVIDERS_FILE, Input.providers): a metric label and a search attribute.
	ProviderNamePattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	// CallerPattern is Input.caller: the fairness key of its Submits (the server takes up to 64 bytes).
	CallerPattern = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,64}$`)
)

// WithDefaults returns in with every optional field that is zero set to its default.
func (in Input) WithDefaults() Input {
	in.CallbackTimeoutSeconds = cmp.Or(in.CallbackTimeoutSeconds, DefaultCallbackTimeoutSeconds)
	in.PollIntervalSeconds = cmp.Or(in.PollIntervalSeconds, 5)
	in.DeadlineSeconds = cmp.Or(in.DeadlineSeconds, 600)
	in.MaxSubmits = cmp.Or(in.MaxSubmits, 2)
	in.LostAnswerWaitSeconds = cmp.Or(in.LostAnswerWaitSeconds, 180) // covers the providers' solve times
	in.DeliveryTimeoutSeconds = cmp.Or(in.DeliveryTimeoutSeconds, 24*60*60)
	in.MaxRefreshes = cmp.Or(in.MaxRefreshes, new(DefaultMaxRefreshes))
	return in
}

// ValidBeforeProxies is Validate as builds before proxies, and the kinds added with them, judged in: its checks first.
func (in Input) ValidBeforeProxies() error {
	if err := cmp.Or(in.decodeErr, in.validateMethodParams()); err != nil {
		return err
	}
	const day = 24 * 60 * 60
	for _, r := range []struct {
		field     string
		v, lo, hi int
	}{
		{"callback_timeout_seconds", in.CallbackTimeoutSeconds, 1, day},
		{"poll_interval_seconds", in.PollIntervalSeconds, 1, 60 * 60},
		{"deadline_seconds", in.DeadlineSeconds, 1, 7 * day},
		{"max_submits", in.MaxSubmits, 1, 10},
		{"delivery_timeout_seconds", in.DeliveryTimeoutSeconds, 1, 30 * day},
		{"lost_answer_wait_seconds", in.LostAnswerWaitSeconds, 1, 60 * 60},
		// 0: the method's lifetime. Shorter, a token could not even be offered to notify_url before it expired.
		{"token_ttl_seconds", cmp.Or(in.TokenTTLSeconds, 10), 10, day},
		{"max_refreshes", in.Refreshes(), 0, 5}, // each refresh is a paid solve
	} {
		if r.v < r.lo || r.v > r.hi {
			return fieldError(r.field, "%d is out of range [%d, %d]", r.v, r.lo, r.hi)
		}
	}
	if in.Caller != "" && !CallerPattern.MatchString(in.Caller) {
		return fieldError("caller", "%.80q must match %s (the server's fairness key)", in.Caller, CallerPattern)
	}
	if in.NotifyURL != "" && !isHTTPURL(in.NotifyURL) {
		return fieldError("notify_url", "%.80q is not an absolute http(s) URL", in.NotifyURL)
	}
	return checkProviders(in.Providers)
}

// Validate checks in (after WithDefaults) and returns a *FieldError naming the first field that is wrong.
func (in Input) Validate() error {
	return cmp.Or(in.ValidBeforeProxies(), in.checkProxy(), in.checkRequired(KindParams))
}

// validateMethodParams: a method name, none of the reserved params, every required one, a page URL a provider can open.
func (in Input) validateMethodParams() error {
	switch {
	case in.Method == "":
		return fieldError("method", "required")
	case !MethodPattern.MatchString(in.Method):
		return fieldError("method", "%.40q is not a provider method name", in.Method)
	case in.Params == nil:
		return fieldError("params", "required (an object of in.php parameters)")
	}
	for _, k := range slices.Sorted(maps.Keys(in.Params)) {
		if slices.Contains(ReservedParams, strings.ToLower(k)) {
			return fieldError("params."+k, "set by captchaflow, must not be passed")
		}
	}
	if err := in.checkRequired(RequiredParams); err != nil {
		return err
	}
	if u, ok := in.Params["pageurl"]; ok && !isHTTPURL(u) {
		return fieldError("params.pageurl", "%.80q is not an absolute http(s) URL", u)
	}
	return nil
}

// checkRequired: every field the table requires of in's method.
func (in Input) checkRequired(table map[string][]string) error {
	for _, k := range table[in.Method] {
		if strings.TrimSpace(in.Params[k]) == "" {
			return fieldError("params."+k, "required for method %s", in.Method)
		}
	}
	return nil
}

func checkProviders(names []string) error {
	if len(names) > MaxProviders {
		return fieldError("providers", "at most %d names", MaxProviders)
	}
	for i, name := range names {
		field := fmt.Sprintf("providers[%d]", i)
		if !ProviderNamePattern.MatchString(name) {
			return fieldError(field, "%.40q is not a provider name (%s)", name, ProviderNamePattern)
		}
		if slices.Contains(names[:i], name) {
			return fieldError(field, "%q is named twice", name)
		}
	}
	return nil
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func (in Input) CallbackTimeout() time.Duration { return seconds(in.CallbackTimeoutSeconds) }
func (in Input) PollInterval() time.Duration    { return seconds(in.PollIntervalSeconds) }
func (in Input) SolveBudget() time.Duration     { return seconds(in.DeadlineSeconds) } // submitting, waiting, polling
func (in Input) LostAnswerWait() time.Duration  { return seconds(in.LostAnswerWaitSeconds) }
func (in Input) DeliveryTimeout() time.Duration { return seconds(in.DeliveryTimeoutSeconds) }

// Refreshes is max_refreshes after defaults: how many fresh solves an expired, undelivered token may cost.
func (in Input) Refreshes() int { return *cmp.Or(in.MaxRefreshes, new(DefaultMaxRefreshes)) }

// ExpiresAt is when a result received at receivedAt expires (token_ttl_seconds, else TokenLifetimes), or zero.
func (in Input) ExpiresAt(receivedAt time.Time) time.Time {
	if ttl := cmp.Or(seconds(in.TokenTTLSeconds), TokenLifetimes[in.Method]); ttl > 0 {
		return receivedAt.Add(ttl)
	}
	return time.Time{}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
