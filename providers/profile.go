package providers

import (
	"slices"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Flavor names a createTask provider whose differences a Profile declares.
type Flavor = callback.Flavor

// Flavors lists every flavor, in a fixed order.
var Flavors = callback.Flavors

// Profile is what differs between the providers that speak createTask. Everything here comes from the provider's
// own API documentation; the URL is next to each value.
type Profile struct {
	Flavor Flavor
	// BaseURL is the provider's documented API host.
	BaseURL string
	// NumericTaskID: the provider hands out integer task IDs and wants them back as JSON numbers. Otherwise the ID
	// is a string (CapSolver: a UUID). Either way the client keeps it as a string.
	NumericTaskID bool
	// MinPollInterval: never ask for one task's result more often than this (0: none documented).
	MinPollInterval time.Duration
	// Reports are the provider's verdict calls; a verdict no rule covers is ErrReportUnsupported.
	Reports []ReportRule
	// ErrorsWithStatus: error answers come with a 4xx status and the JSON error envelope in the body, so a non-2xx
	// body is read for a provider code before the status alone decides.
	ErrorsWithStatus bool
	// SyncKinds are kinds whose createTask answer already carries the solution.
	SyncKinds []Kind
}

// ReportRule is one verdict call: for the kinds listed (nil: every kind), a good (or bad) verdict goes to Endpoint.
type ReportRule struct {
	Kinds    []Kind
	Good     bool
	Endpoint string
	// Feedback: the body is CapSolver's {taskId, result: {invalid}} rather than {taskId}.
	Feedback bool
}

// reportRule finds the rule for a verdict on a task of kind.
func (p Profile) reportRule(kind Kind, good bool) (ReportRule, bool) {
	for _, r := range p.Reports {
		if r.Good == good && (r.Kinds == nil || slices.Contains(r.Kinds, kind)) {
			return r, true
		}
	}
	return ReportRule{}, false
}

// recaptchaKinds are the kinds Anti-Captcha's reCAPTCHA reports cover ("V2 and V3 reCaptchas only, including
// Enterprise": https://anti-captcha.com/apidoc/methods/reportIncorrectRecaptcha).
var recaptchaKinds = []Kind{KindRecaptchaV2, KindRecaptchaV2Enterprise, KindRecaptchaV3, KindRecaptchaV3Enterprise}

// profiles declares each flavor once.
var profiles = map[Flavor]Profile{
	// https://anti-captcha.com/apidoc/methods/createTask (api host, integer taskId, callbackUrl);
	// https://anti-captcha.com/apidoc/errors (ERROR_NO_SUCH_CAPCHA_ID: a task is removed 60 s after it was solved,
	// polls and reports must come before); https://anti-captcha.com/apidoc/methods/reportIncorrectRecaptcha and
	// reportCorrectRecaptcha ("Reports must be sent within 60 seconds of task completion"). The callback body is not
	// described on Anti-Captcha's page; clones of its API document it as the getTaskResult answer.
	callback.AntiCaptcha: {
		Flavor: callback.AntiCaptcha, BaseURL: "https://api.anti-captcha.com", NumericTaskID: true,
		Reports: []ReportRule{
			{Kinds: recaptchaKinds, Endpoint: "reportIncorrectRecaptcha"},
			{Kinds: recaptchaKinds, Good: true, Endpoint: "reportCorrectRecaptcha"},
			{Kinds: []Kind{KindImage}, Endpoint: "reportIncorrectImageCaptcha"}, // https://anti-captcha.com/apidoc (methods list)
			{Kinds: []Kind{KindHCaptcha}, Endpoint: "reportIncorrectHcaptcha"},  // https://anti-captcha.com/apidoc/methods/reportIncorrectHcaptcha
		},
	},
	// https://2captcha.com/api-docs/create-task (api.2captcha.com, integer taskId, callbackUrl);
	// https://2captcha.com/api-docs/limits ("If captcha is not solved yet - retry in 5 seconds");
	// https://2captcha.com/h/how-to-configure-automatic-response-retrieval-via-pingback (the pingback is
	// application/x-www-form-urlencoded id + code, to a registered domain or IP);
	// https://2captcha.com/api-docs/report-incorrect (reportIncorrect, any task).
	callback.TwoCaptcha: {
		Flavor: callback.TwoCaptcha, BaseURL: "https://api.2captcha.com", NumericTaskID: true,
		MinPollInterval: 5 * time.Second,
		Reports:         []ReportRule{{Endpoint: "reportIncorrect"}},
	},
	// https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989 (createTask:
	// api.capmonster.cloud, integer taskId; callbackUrl gets the getTaskResult content by POST and must be accepted
	// within 2 seconds); https://zennolab.atlassian.net/wiki/spaces/APIS/pages/295396/Error+Types
	// (ERROR_TOO_MUCH_REQUESTS: "no more than 1 time in 2 seconds");
	// https://zennolab.atlassian.net/wiki/pages/diffpagesbyversion.action?pageId=2281504769 (reportIncorrectTokenCaptcha
	// for reCAPTCHA 2/3/Enterprise, hCaptcha, GeeTest, FunCaptcha, Turnstile).
	callback.CapMonster: {
		Flavor: callback.CapMonster, BaseURL: "https://api.capmonster.cloud", NumericTaskID: true,
		MinPollInterval: 2 * time.Second,
		Reports: []ReportRule{{Endpoint: "reportIncorrectTokenCaptcha", Kinds: append(slices.Clone(recaptchaKinds),
			KindHCaptcha, KindGeeTest3, KindGeeTest4, KindFunCaptcha, KindTurnstile)}},
	},
	// https://docs.capsolver.com/zh/guide/api-createtask (string taskId; image recognition answers "ready" with the
	// solution in createTask itself; callbackUrl gets the token by POST, its body is not described);
	// https://docs.capsolver.com/zh/guide/api-gettaskresult (at most 120 polls per task, within 5 minutes of
	// creation; "processing": retry after 3 seconds); https://docs.capsolver.com/guide/api-error (errors answer
	// HTTP 400, or 401 for a wrong key, with the JSON envelope); https://docs.capsolver.com/guide/api-feedback.html
	// (feedbackTask, result.invalid).
	callback.CapSolver: {
		Flavor: callback.CapSolver, BaseURL: "https://api.capsolver.com",
		MinPollInterval:  3 * time.Second,
		Reports:          []ReportRule{{Endpoint: "feedbackTask", Feedback: true}, {Endpoint: "feedbackTask", Feedback: true, Good: true}},
		ErrorsWithStatus: true,
		SyncKinds:        []Kind{KindImage},
	},
}

// ProfileOf returns the flavor's profile.
func ProfileOf(f Flavor) (Profile, bool) {
	p, ok := profiles[f]
	return p, ok
}

// ReportEndpoints lists every verdict endpoint the flavor declares (for the simulator's routes).
func (p Profile) ReportEndpoints() []string {
	var out []string
	for _, r := range p.Reports {
		if !slices.Contains(out, r.Endpoint) {
			out = append(out, r.Endpoint)
		}
	}
	return out
}
