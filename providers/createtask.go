package providers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// CreateTask is a client of the JSON createTask protocol, a Profile per Flavor; the key travels in the body only.
type CreateTask struct {
	conn
	profile Profile
	base    *url.URL
}

// ErrReportUnsupported marks a verdict the provider has no call for (a good one on 2captcha); nothing is sent.
var ErrReportUnsupported = errors.New("the provider has no report call for this verdict")

// NewCreateTask returns a client for the flavor at baseURL ("": the flavor's documented host).
func NewCreateTask(flavor Flavor, baseURL, apiKey string, opts ...Option) (*CreateTask, error) {
	profile, ok := ProfileOf(flavor)
	if !ok {
		return nil, fmt.Errorf("createtask: flavor %.20q is not one of %v", string(flavor), Flavors)
	}
	c, base, err := newConn("createtask "+string(flavor), cmp.Or(baseURL, profile.BaseURL), apiKey, opts)
	if err != nil {
		return nil, err
	}
	return &CreateTask{conn: c, profile: profile, base: base}, nil
}

func (c *CreateTask) Supports(method string, params map[string]string) error {
	return Supports(c.profile.Flavor, method, params)
}

// Submit calls createTask with the flavor's task (one it cannot serve is never sent), and any code in the answer.
func (c *CreateTask) Submit(ctx context.Context, method string, params map[string]string, callbackURL string) (id, code string, err error) {
	task, spec, err := buildTask(c.profile.Flavor, method, params)
	if err != nil {
		return "", "", c.fail("createTask", callback.ClassConfig, err)
	}
	body := map[string]any{"task": task}
	if callbackURL != "" {
		body["callbackUrl"] = callbackURL
	}
	env, err := c.call(ctx, "createTask", body)
	if err != nil {
		return "", "", withoutProxyPassword(err, params)
	}
	// A solution that answers more than its code is read from getTaskResult (Answer), as the task's kind asks.
	if id, err = c.taskID(env.TaskID); err != nil || env.Status != "ready" || len(env.Solution) == 0 || spec.Solution.More {
		return id, "", err
	}
	a, err := c.answer("createTask", spec.Solution, env.Solution)
	if err != nil {
		return "", "", err
	}
	return id, a.Code, nil
}

// Get calls getTaskResult: "processing" (CapSolver: "idle") is ClassNotReady, "failed" ClassResubmit.
func (c *CreateTask) Get(ctx context.Context, taskID string) (string, error) {
	a, err := c.Answer(ctx, taskID, "")
	return a.Code, err
}

type Answer = callback.Answer

// Answerer is a Client whose result request may answer a user agent, cookies or the solve's cost; kind ("": not
// known) says where the code is, and asks for a request of the task's own (never batched).
type Answerer interface {
	Answer(ctx context.Context, taskID string, kind Kind) (Answer, error)
}

// maxTaskCostUSD bounds one task's getTaskResult cost in USD (docs/providers.md): a figure over it is a price per 1 000.
const maxTaskCostUSD = 0.1

// Answer is Get with the answer's user agent, cookies and cost (0: not stated, not a number, or not one task's).
func (c *CreateTask) Answer(ctx context.Context, taskID string, kind Kind) (Answer, error) {
	const op = "getTaskResult"
	id, err := c.idValue(taskID)
	if err != nil {
		return Answer{}, c.fail(op, callback.ClassConfig, err)
	}
	env, err := c.call(ctx, op, map[string]any{"taskId": id})
	if err != nil {
		return Answer{}, err
	}
	switch env.Status {
	case "processing", "idle":
		return Answer{}, c.codeError(op, callback.CodeNotReady, "status "+env.Status, 0)
	case "ready":
		a, err := c.answer(op, solutions[kind], env.Solution)
		if cost, _ := strconv.ParseFloat(strings.Trim(string(env.Cost), `"`), 64); cost > 0 && cost <= maxTaskCostUSD {
			a.CostUSD = cost
		}
		return a, err
	case "failed":
		return Answer{}, c.codeError(op, callback.CodeUnsolvable, "status failed", 0)
	}
	return Answer{}, c.fail(op, callback.ClassTransient,
		fmt.Errorf("%w: status %s", callback.ErrMalformed, callback.Snippet([]byte(env.Status))))
}

// answer reads and bounds a solution; one that cannot be one is an ErrInvalidAnswer.
func (c *CreateTask) answer(op string, s callback.Solution, raw json.RawMessage) (Answer, error) {
	a, err := s.Answer(raw)
	if err != nil {
		return Answer{}, c.invalid(op, "%w", err)
	}
	return c.checkAnswer(op, a)
}

// taskID reads createTask's taskId (a JSON number's exact digits, or a string) and checks its shape.
func (c *CreateTask) taskID(raw json.RawMessage) (string, error) {
	id := string(bytes.TrimSpace(raw))
	if _, err := strconv.ParseUint(id, 10, 64); err != nil && json.Unmarshal(raw, &id) != nil || !taskIDPattern.MatchString(id) {
		return "", c.invalid("createTask", "taskId %s is not an id", callback.Snippet([]byte(redactText(string(raw), c.apiKey))))
	}
	return id, nil
}

// idValue is a task ID as the provider wants it back: a JSON number for integer IDs, else a string.
func (c *CreateTask) idValue(taskID string) (any, error) {
	switch _, err := strconv.ParseUint(taskID, 10, 64); {
	case !taskIDPattern.MatchString(taskID):
		return nil, errors.New("task id is required and must be 1-64 of [0-9A-Za-z_-]")
	case !c.profile.NumericTaskID:
		return taskID, nil
	case err != nil:
		return nil, fmt.Errorf("task id %.20q is not an integer, as %s hands out", taskID, c.profile.Flavor)
	}
	return json.Number(taskID), nil
}

func (c *CreateTask) Balance(ctx context.Context) (float64, error) {
	env, err := c.call(ctx, "getBalance", map[string]any{})
	return c.balance("getBalance", strings.Trim(string(env.Balance), `"`), err) // a number, or one in a string
}

// Report sends a verdict through the flavor's call for kind (Profile.Reports); one refused unsent is Op "report".
func (c *CreateTask) Report(ctx context.Context, kind Kind, taskID string, good bool) error {
	i := slices.IndexFunc(c.profile.Reports, func(r ReportRule) bool {
		return r.Good == good && (r.Kinds == nil || slices.Contains(r.Kinds, kind))
	})
	if i < 0 {
		return c.fail("report", callback.ClassConfig, fmt.Errorf("%s, %s, good=%t: %w", c.profile.Flavor, kind, good, ErrReportUnsupported))
	}
	id, err := c.idValue(taskID)
	if err != nil {
		return c.fail("report", callback.ClassConfig, err)
	}
	rule, body := c.profile.Reports[i], map[string]any{"taskId": id}
	if rule.Feedback {
		body["result"] = map[string]any{"invalid": !good}
	}
	_, err = c.call(ctx, rule.Endpoint, body)
	return err
}

// call POSTs body with the key to the endpoint op: an envelope with errorId 0, or a classified *Error.
func (c *CreateTask) call(ctx context.Context, op string, body map[string]any) (callback.Envelope, error) {
	body["clientKey"] = c.apiKey
	data, err := json.Marshal(body)
	if err != nil {
		return callback.Envelope{}, c.fail(op, callback.ClassConfig, fmt.Errorf("encode request: %w", err))
	}
	var env callback.Envelope
	target := c.base.JoinPath(op).String()
	err = c.do(ctx, op, http.MethodPost, target, "application/json", data, func(status int, raw []byte) (_ *Error, err error) {
		if env, err = callback.ParseEnvelope(raw); err != nil || !env.Failed() {
			return nil, err // CapSolver answers errors with 400/401 and the envelope
		}
		return c.providerError(op, env, status), nil
	})
	return env, err
}

// providerError is the *Error for an errorId > 0 answer.
func (c *CreateTask) providerError(op string, env callback.Envelope, status int) *Error {
	code := callback.Canonical(env.ErrorCode)
	if code == "" {
		return &Error{Op: op, Class: callback.ClassUnknown, HTTPStatus: status, Provider: c.name,
			Err: fmt.Errorf("%w: errorId %s without an errorCode", callback.ErrMalformed, env.ErrorID)}
	}
	if op == "getTaskResult" && code == c.profile.TaskRateCode { // one task asked too often, not the account: that task waits
		code = callback.CodeNotReady
	}
	e := c.codeError(op, code, env.ErrorDescription, status)
	if e.Class == callback.ClassUnknown && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		e.Class = callback.ClassConfig // an undocumented code on 401/403 is still the key's or the account's problem
	}
	return e
}

// Flavor names a createTask provider; Flavors lists them in a fixed order.
type Flavor = callback.Flavor

var Flavors = callback.Flavors

// Profile is what differs between the createTask providers, each value from the provider's own API documentation.
type Profile struct {
	Flavor          Flavor
	BaseURL         string        // the documented API host
	NumericTaskID   bool          // integer task IDs, wanted back as JSON numbers (else a string: CapSolver's UUIDs)
	MinPollInterval time.Duration // never ask for one task's result more often (0: none documented)
	Reports         []ReportRule  // the verdict calls; a verdict no rule covers is ErrReportUnsupported
	// RefundsUnsolvable: an unsolvable task is not charged (2captcha.com/api-docs/error-codes; the others document none).
	RefundsUnsolvable bool
	Rates             Rates // the account's documented request budgets, none where none is published (docs/providers.md#account-limits)
	// TaskRateCode is a getTaskResult refusal for one task's polls (CapMonster: more than one per 2 s), not the account's.
	TaskRateCode string
	ProxyTypes   map[string]string // params.proxytype → the documented proxyType; a type not here is not taken
	ProxyIPOnly  bool              // proxyAddress takes an IP only, no host name
}

// ReportRule is one verdict call: for the kinds listed (nil: every kind), a good (or bad) verdict goes to Endpoint.
type ReportRule struct {
	Kinds    []Kind
	Good     bool
	Endpoint string
	Feedback bool // the body is CapSolver's {taskId, result: {invalid}} rather than {taskId}
}

// recaptchaKinds: "V2 and V3 reCaptchas only, including Enterprise" (anti-captcha.com/apidoc/methods/reportIncorrectRecaptcha).
var recaptchaKinds = []Kind{KindRecaptchaV2, KindRecaptchaV2Enterprise, KindRecaptchaV3, KindRecaptchaV3Enterprise}

// profiles declares each flavor once; docs/providers.md links the source of every value.
var profiles = map[Flavor]Profile{
	// "http - usual http/https proxy", "Proxy IP address ipv4/ipv6. No host names" (anti-captcha.com/apidoc/task-types/RecaptchaV2Task).
	callback.AntiCaptcha: {BaseURL: "https://api.anti-captcha.com", NumericTaskID: true, ProxyIPOnly: true,
		ProxyTypes: map[string]string{"HTTP": "http", "HTTPS": "http", "SOCKS4": "socks4", "SOCKS5": "socks5"}, Reports: []ReportRule{
			{Kinds: recaptchaKinds, Endpoint: "reportIncorrectRecaptcha"},
			{Kinds: recaptchaKinds, Good: true, Endpoint: "reportCorrectRecaptcha"},
			{Kinds: []Kind{KindImage}, Endpoint: "reportIncorrectImageCaptcha"}, // https://anti-captcha.com/apidoc (methods list)
			{Kinds: []Kind{KindHCaptcha}, Endpoint: "reportIncorrectHcaptcha"},  // https://anti-captcha.com/apidoc/methods/reportIncorrectHcaptcha
		}},
	callback.TwoCaptcha: {BaseURL: "https://api.2captcha.com", NumericTaskID: true, MinPollInterval: 5 * time.Second, RefundsUnsolvable: true,
		ProxyTypes: map[string]string{"HTTP": "http", "SOCKS4": "socks4", "SOCKS5": "socks5"}, // 2captcha.com/api-docs/recaptcha-v2
		Rates:      Rates{Submits: InPHPRates.Submits, Results: 20},                           // the account's in.php rule, as its limits page repeats
		Reports:    []ReportRule{{Endpoint: "reportIncorrect"}}},
	callback.CapMonster: {BaseURL: "https://api.capmonster.cloud", NumericTaskID: true, MinPollInterval: 2 * time.Second,
		TaskRateCode: "ERROR_TOO_MUCH_REQUESTS", // per task: docs.capmonster.cloud/docs/api/api-errors
		ProxyTypes:   map[string]string{"HTTP": "http", "HTTPS": "https", "SOCKS4": "socks4", "SOCKS5": "socks5"},
		Reports: []ReportRule{{Endpoint: "reportIncorrectTokenCaptcha", Kinds: append(slices.Clone(recaptchaKinds),
			KindHCaptcha, KindGeeTest3, KindGeeTest4, KindFunCaptcha, KindTurnstile, KindTurnstileChallenge)}}},
	callback.CapSolver: {BaseURL: "https://api.capsolver.com", MinPollInterval: 3 * time.Second, // "socks5 | http | https": docs.capsolver.com/guide/api-use-params
		ProxyTypes: map[string]string{"HTTP": "http", "HTTPS": "https", "SOCKS5": "socks5"},
		Reports:    []ReportRule{{Endpoint: "feedbackTask", Feedback: true}, {Endpoint: "feedbackTask", Feedback: true, Good: true}}},
}

func ProfileOf(f Flavor) (Profile, bool) {
	p, ok := profiles[f]
	p.Flavor = f
	return p, ok
}
