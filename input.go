package captchaflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Defaults for the optional input fields.
const (
	DefaultCallbackTimeoutSeconds = 120
	DefaultPollIntervalSeconds    = 5
	DefaultDeadlineSeconds        = 600
	DefaultMaxSubmits             = 2
	// DefaultLostAnswerWaitSeconds covers the providers' solve times: a submission whose in.php answer was lost may
	// still call back this long, so no second in.php request is made before it passes.
	DefaultLostAnswerWaitSeconds  = 180
	DefaultDeliveryTimeoutSeconds = 24 * 60 * 60
	// DefaultMaxRefreshes: one fresh solve (one more paid submission) when the token expires before notify_url
	// took it.
	DefaultMaxRefreshes = 1
	// MaxMaxRefreshes bounds max_refreshes: each refresh is a paid solve.
	MaxMaxRefreshes = 5
	// MinTokenTTLSeconds is the shortest token_ttl_seconds accepted.
	MinTokenTTLSeconds = 10
)

// Input starts one SolveCaptcha workflow. Durations are whole seconds so that any client (TypeScript, Python, the
// Temporal CLI) can start it with a plain JSON object. Only Method and Params are required.
type Input struct {
	// Method is the provider's in.php method, e.g. "userrecaptcha", "hcaptcha", "turnstile", "base64", "post".
	Method string `json:"method"`
	// Params go to in.php as they are, so every provider method works.
	Params Params `json:"params"`
	// CallbackTimeoutSeconds is how long to wait for the pingback before polling res.php.
	CallbackTimeoutSeconds int `json:"callback_timeout_seconds,omitempty"`
	// PollIntervalSeconds spaces res.php requests while polling.
	PollIntervalSeconds int `json:"poll_interval_seconds,omitempty"`
	// DeadlineSeconds bounds the whole solve (submissions, waiting and polling; not delivery).
	DeadlineSeconds int `json:"deadline_seconds,omitempty"`
	// MaxSubmits bounds submissions; an unsolvable answer is resubmitted until then.
	MaxSubmits int `json:"max_submits,omitempty"`
	// NotifyURL, if set, receives the result as a signed Standard Webhooks POST.
	NotifyURL string `json:"notify_url,omitempty"`
	// DeliveryTimeoutSeconds bounds the retries of the delivery to NotifyURL.
	DeliveryTimeoutSeconds int `json:"delivery_timeout_seconds,omitempty"`
	// TokenTTLSeconds overrides the method's token lifetime (TokenLifetimes): the result expires this long after
	// it is received (MinTokenTTLSeconds to 24 h). Zero (unset) keeps the table's lifetime, or no expiry for a
	// method the table does not list.
	TokenTTLSeconds int `json:"token_ttl_seconds,omitempty"`
	// MaxRefreshes bounds the fresh solves made when delivery to NotifyURL is still failing as the token expires
	// (each is a new, paid submission, counted apart from MaxSubmits). Unset (nil) is DefaultMaxRefreshes; 0
	// turns refreshing off: the task fails TokenExpired as soon as the token expires undelivered.
	MaxRefreshes *int `json:"max_refreshes,omitempty"`
	// LostAnswerWaitSeconds is how long a submission whose in.php answer was lost may still answer by callback
	// before the task submits again (cut to the deadline); its answer is taken whenever it comes before the task ends.
	LostAnswerWaitSeconds int `json:"lost_answer_wait_seconds,omitempty"`
	// Providers restricts and orders the worker's PROVIDERS_FILE providers for this task (names; empty: all, in the
	// file's order). A task naming one provider waits for it. A worker without the file ignores it.
	Providers []string `json:"providers,omitempty"`

	// decodeErr keeps a JSON decoding problem for Validate: a start with bad JSON must end in a clear, typed
	// InvalidInput failure, not in a workflow task that fails to decode its input forever.
	decodeErr error
}

// UnmarshalJSON decodes leniently and never fails; Validate reports what was wrong.
func (in *Input) UnmarshalJSON(data []byte) error {
	type plain Input
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		*in = Input{decodeErr: describeDecodeError(err)}
		return nil
	}
	*in = Input(p)
	return nil
}

func describeDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%s: must be %s, got %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	var fieldErr *paramError
	if errors.As(err, &fieldErr) {
		return fieldErr
	}
	return fmt.Errorf("input is not a JSON object of the SolveCaptcha shape: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	}
	return goKind
}

// Params are in.php parameters. JSON numbers and booleans are accepted and kept in their literal form (a
// TypeScript client will send {"invisible": 1}); objects and arrays are refused.
type Params map[string]string

type paramError struct{ key string }

func (e *paramError) Error() string {
	return fmt.Sprintf("params.%s: must be a string, number or boolean", e.key)
}

// UnmarshalJSON accepts scalars of any JSON type.
func (p *Params) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*p = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return &json.UnmarshalTypeError{Value: "non-object", Type: mapType, Field: "params"}
	}
	// The map is walked in sorted key order so that, of several bad values, the error always names the smallest
	// key: this decoding re-runs whenever the workflow replays, and its InvalidInput message must not change.
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(Params, len(raw))
	for _, k := range keys {
		v := bytes.TrimSpace(raw[k])
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return &paramError{key: k}
			}
			out[k] = s
		case len(v) > 0 && (v[0] == '{' || v[0] == '[' || string(v) == "null"):
			return &paramError{key: k}
		default:
			out[k] = string(v)
		}
	}
	*p = out
	return nil
}

// workflowIDPattern is the caller's task ID, used as the workflow ID and as one segment of the callback URL.
var workflowIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// ValidateWorkflowID reports whether id can be a SolveCaptcha workflow ID (the caller's task ID).
func ValidateWorkflowID(id string) error {
	if !workflowIDPattern.MatchString(id) {
		return fmt.Errorf("workflow ID %.60q: must be 1-200 characters of A-Z a-z 0-9 . _ : -", id)
	}
	return nil
}

// RequiredParams are the in.php fields each known method cannot do without (the provider would refuse the task
// anyway, after we paid a round trip and possibly a retry budget). The simulator refuses the same.
var RequiredParams = map[string][]string{
	"userrecaptcha": {"googlekey", "pageurl"},
	"hcaptcha":      {"sitekey", "pageurl"},
	"turnstile":     {"sitekey", "pageurl"},
	"funcaptcha":    {"publickey", "pageurl"},
	"geetest":       {"gt", "challenge", "pageurl"},
	"geetest_v4":    {"captcha_id", "pageurl"},
	"base64":        {"body"},
	"post":          {"file"},
}

// ReservedParams are in.php / res.php fields captchaflow sets itself. "key" in particular must never be passed in:
// it would put the provider key into workflow history.
var ReservedParams = []string{"key", "json", "method", "pingback", "id", "action"}

var methodPattern = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// WithDefaults returns in with every optional field that is zero set to its default.
func (in Input) WithDefaults() Input {
	if in.CallbackTimeoutSeconds == 0 {
		in.CallbackTimeoutSeconds = DefaultCallbackTimeoutSeconds
	}
	if in.PollIntervalSeconds == 0 {
		in.PollIntervalSeconds = DefaultPollIntervalSeconds
	}
	if in.DeadlineSeconds == 0 {
		in.DeadlineSeconds = DefaultDeadlineSeconds
	}
	if in.MaxSubmits == 0 {
		in.MaxSubmits = DefaultMaxSubmits
	}
	if in.LostAnswerWaitSeconds == 0 {
		in.LostAnswerWaitSeconds = DefaultLostAnswerWaitSeconds
	}
	if in.DeliveryTimeoutSeconds == 0 {
		in.DeliveryTimeoutSeconds = DefaultDeliveryTimeoutSeconds
	}
	if in.MaxRefreshes == nil {
		n := DefaultMaxRefreshes
		in.MaxRefreshes = &n
	}
	return in
}

// Validate checks in (after WithDefaults) and names the first field that is wrong.
func (in Input) Validate() error {
	if in.decodeErr != nil {
		return in.decodeErr
	}
	if err := in.validateMethodParams(); err != nil {
		return err
	}
	if err := in.validateWaits(); err != nil {
		return err
	}
	return in.validateTokenAndNotify()
}

// validateMethodParams checks the method and its in.php parameters: none that captchaflow sets itself, every one
// the method requires, and a page URL a provider can open.
func (in Input) validateMethodParams() error {
	switch {
	case in.Method == "":
		return errors.New("method: required")
	case !methodPattern.MatchString(in.Method):
		return fmt.Errorf("method: %.40q is not a provider method name", in.Method)
	case in.Params == nil:
		return errors.New("params: required (an object of in.php parameters)")
	}
	keys := make([]string, 0, len(in.Params))
	for k := range in.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report problems in a stable order
	for _, k := range keys {
		if slices.Contains(ReservedParams, strings.ToLower(k)) {
			return fmt.Errorf("params.%s: set by captchaflow, must not be passed", k)
		}
	}
	for _, k := range RequiredParams[in.Method] {
		if strings.TrimSpace(in.Params[k]) == "" {
			return fmt.Errorf("params.%s: required for method %s", k, in.Method)
		}
	}
	if u, ok := in.Params["pageurl"]; ok {
		if err := checkHTTPURL(u); err != nil {
			return fmt.Errorf("params.pageurl: %w", err)
		}
	}
	return nil
}

// validateWaits keeps every wait and budget within bounds a workflow can honour.
func (in Input) validateWaits() error {
	for _, r := range []struct {
		field  string
		v, max int
	}{
		{"callback_timeout_seconds", in.CallbackTimeoutSeconds, 24 * 60 * 60},
		{"poll_interval_seconds", in.PollIntervalSeconds, 60 * 60},
		{"deadline_seconds", in.DeadlineSeconds, 7 * 24 * 60 * 60},
		{"max_submits", in.MaxSubmits, 10},
		{"delivery_timeout_seconds", in.DeliveryTimeoutSeconds, 30 * 24 * 60 * 60},
		{"lost_answer_wait_seconds", in.LostAnswerWaitSeconds, 60 * 60},
	} {
		if err := checkRange(r.field, r.v, 1, r.max); err != nil {
			return err
		}
	}
	return nil
}

// validateTokenAndNotify checks the token's lifetime, its refresh budget and where the result is delivered.
func (in Input) validateTokenAndNotify() error {
	if in.TokenTTLSeconds != 0 { // 0: the method's lifetime
		// Under MinTokenTTLSeconds a token could not even be offered to notify_url before it expired, and every
		// refresh would be paid for nothing.
		if err := checkRange("token_ttl_seconds", in.TokenTTLSeconds, MinTokenTTLSeconds, 24*60*60); err != nil {
			return err
		}
	}
	if in.MaxRefreshes != nil {
		if err := checkRange("max_refreshes", *in.MaxRefreshes, 0, MaxMaxRefreshes); err != nil {
			return err
		}
	}
	if in.NotifyURL != "" {
		if err := checkHTTPURL(in.NotifyURL); err != nil {
			return fmt.Errorf("notify_url: %w", err)
		}
	}
	return checkProviders(in.Providers)
}

// ProviderNamePattern is what a provider's name may be (PROVIDERS_FILE and Input.providers): it is a metric label,
// a search attribute value and a JSON field.
var ProviderNamePattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// MaxProviders bounds PROVIDERS_FILE and Input.providers.
const MaxProviders = 16

func checkProviders(names []string) error {
	if len(names) > MaxProviders {
		return fmt.Errorf("providers: at most %d names", MaxProviders)
	}
	for i, name := range names {
		if !ProviderNamePattern.MatchString(name) {
			return fmt.Errorf("providers[%d]: %.40q is not a provider name (%s)", i, name, ProviderNamePattern)
		}
		if slices.Contains(names[:i], name) {
			return fmt.Errorf("providers[%d]: %q is named twice", i, name)
		}
	}
	return nil
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: %d is out of range [%d, %d]", field, v, lo, hi)
	}
	return nil
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%.80q is not an absolute http(s) URL", s)
	}
	return nil
}

// CallbackTimeout is callback_timeout_seconds as a duration.
func (in Input) CallbackTimeout() time.Duration { return seconds(in.CallbackTimeoutSeconds) }

// PollInterval is poll_interval_seconds as a duration.
func (in Input) PollInterval() time.Duration { return seconds(in.PollIntervalSeconds) }

// SolveBudget is deadline_seconds as a duration: how long submitting, waiting and polling may take in all.
func (in Input) SolveBudget() time.Duration { return seconds(in.DeadlineSeconds) }

// LostAnswerWait is lost_answer_wait_seconds as a duration.
func (in Input) LostAnswerWait() time.Duration { return seconds(in.LostAnswerWaitSeconds) }

// DeliveryTimeout is delivery_timeout_seconds as a duration.
func (in Input) DeliveryTimeout() time.Duration { return seconds(in.DeliveryTimeoutSeconds) }

// TokenTTL is how long a result of this task stays usable after it is received: token_ttl_seconds if set, else
// the method's TokenLifetime; zero means it does not expire.
func (in Input) TokenTTL() time.Duration {
	if in.TokenTTLSeconds > 0 {
		return seconds(in.TokenTTLSeconds)
	}
	return TokenLifetime(in.Method)
}

// Refreshes is max_refreshes after defaults: how many fresh solves an expired, undelivered token may cost.
func (in Input) Refreshes() int {
	if in.MaxRefreshes == nil {
		return DefaultMaxRefreshes
	}
	return *in.MaxRefreshes
}

// ExpiresAt is when a result of this task received at receivedAt expires; zero when it does not.
func (in Input) ExpiresAt(receivedAt time.Time) time.Time {
	ttl := in.TokenTTL()
	if ttl <= 0 {
		return time.Time{}
	}
	return receivedAt.Add(ttl)
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

var mapType = reflect.TypeOf(map[string]string{})
