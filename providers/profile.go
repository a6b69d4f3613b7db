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

// Profile is what differs between the createTask providers, each value from the provider's own API documentation.
type Profile struct {
	Flavor  Flavor
	BaseURL string // the documented API host
	// NumericTaskID: integer task IDs, wanted back as JSON numbers (else a string: CapSolver's UUIDs).
	NumericTaskID bool
	// MinPollInterval: never ask for one task's result more often than this (0: none documented).
	MinPollInterval time.Duration
	// Reports are the verdict calls; a verdict no rule covers is ErrReportUnsupported.
	Reports []ReportRule
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
	// Sources of every value below: docs/providers.md (the table and its links).
	callback.AntiCaptcha: {
		Flavor: callback.AntiCaptcha, BaseURL: "https://api.anti-captcha.com", NumericTaskID: true,
		Reports: []ReportRule{
			{Kinds: recaptchaKinds, Endpoint: "reportIncorrectRecaptcha"},
			{Kinds: recaptchaKinds, Good: true, Endpoint: "reportCorrectRecaptcha"},
			{Kinds: []Kind{KindImage}, Endpoint: "reportIncorrectImageCaptcha"}, // https://anti-captcha.com/apidoc (methods list)
			{Kinds: []Kind{KindHCaptcha}, Endpoint: "reportIncorrectHcaptcha"},  // https://anti-captcha.com/apidoc/methods/reportIncorrectHcaptcha
		},
	},
	callback.TwoCaptcha: {
		Flavor: callback.TwoCaptcha, BaseURL: "https://api.2captcha.com", NumericTaskID: true,
		MinPollInterval: 5 * time.Second,
		Reports:         []ReportRule{{Endpoint: "reportIncorrect"}},
	},
	callback.CapMonster: {
		Flavor: callback.CapMonster, BaseURL: "https://api.capmonster.cloud", NumericTaskID: true,
		MinPollInterval: 2 * time.Second,
		Reports: []ReportRule{{Endpoint: "reportIncorrectTokenCaptcha", Kinds: append(slices.Clone(recaptchaKinds),
			KindHCaptcha, KindGeeTest3, KindGeeTest4, KindFunCaptcha, KindTurnstile)}},
	},
	callback.CapSolver: {
		Flavor: callback.CapSolver, BaseURL: "https://api.capsolver.com",
		MinPollInterval: 3 * time.Second,
		Reports:         []ReportRule{{Endpoint: "feedbackTask", Feedback: true}, {Endpoint: "feedbackTask", Feedback: true, Good: true}},
	},
}

// ProfileOf returns the flavor's profile.
func ProfileOf(f Flavor) (Profile, bool) {
	p, ok := profiles[f]
	return p, ok
}
