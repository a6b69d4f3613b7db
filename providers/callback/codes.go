// Package callback reads what a provider says outside a client's request, and the words it says it with: the
// in.php pingback form and the createTask callback JSON, the status words (error codes) both protocols answer, what
// each means and how long to wait after it. It holds no client and no key, so the ingress links it alone.
package callback

import (
	"strconv"
	"strings"
	"time"
)

// Class tells the caller what to do about a provider's answer.
type Class string

const (
	ClassConfig    Class = "config"    // non-retryable configuration / parameter problem
	ClassTransient Class = "transient" // retry after RetryAfter(code) when it has a documented wait, else with backoff
	ClassResubmit  Class = "resubmit"  // this task failed; submit a new one
	ClassNotReady  Class = "not_ready" // CAPCHA_NOT_READY (keep polling)
	ClassUnknown   Class = "unknown"   // unknown provider code: non-retryable, code in message
)

// code is one documented status word: its class and, for a busy or ban answer, the documented wait before the next
// request (every code with a wait is ClassTransient: TestRetryAfterCodesAreTransient).
type code struct {
	class Class
	wait  time.Duration
}

// codes are the documented in.php / res.php codes (2captcha, CaptchaAI) and the createTask providers' own
// (https://anti-captcha.com/apidoc/errors, https://2captcha.com/api-docs/error-codes, CapMonster's Error Types,
// https://docs.capsolver.com/guide/api-error). Same code, same class, same wait, whichever protocol answered it.
var codes = map[string]code{
	// Not solved yet: keep polling. CaptchaAI spells it CAPCHA (sic); accept both.
	"CAPCHA_NOT_READY":  {class: ClassNotReady},
	"CAPTCHA_NOT_READY": {class: ClassNotReady},

	// The provider could not solve this task; a fresh submission may succeed.
	"ERROR_CAPTCHA_UNSOLVABLE":      {class: ClassResubmit},
	"ERROR_BAD_DUPLICATES":          {class: ClassResubmit},
	"ERROR_PROXY_CONNECTION_FAILED": {class: ClassResubmit},
	"ERROR_RECAPTCHA_TIMEOUT":       {class: ClassResubmit}, // a worker gave up (often a slow proxy)
	"ERROR_TASK_TIMEOUT":            {class: ClassResubmit}, // CapSolver: not solved within 120 s
	"ERROR_CAPTCHA_SOLVE_FAILED":    {class: ClassResubmit}, // CapSolver's getTaskResult for a task it failed

	// Capacity, rate limiting and provider-side hiccups: retry later.
	"ERROR_NO_SLOT_AVAILABLE":     {ClassTransient, 5 * time.Second},  // CaptchaAI: every thread of the plan is busy
	"MAX_USER_TURN":               {ClassTransient, 10 * time.Second}, // too many in.php requests in a row
	"ERROR_TOO_MUCH_REQUESTS":     {ClassTransient, 10 * time.Second}, // rate limited (CapMonster: 1 per 2 s)
	"ERROR_RATE_LIMIT":            {ClassTransient, 10 * time.Second}, // CapSolver's spelling of it
	"ERROR_ZERO_BALANCE":          {ClassTransient, time.Minute},      // 2captcha: no money; CaptchaAI: no free thread
	"IP_BANNED":                   {ClassTransient, 5 * time.Minute},  // lifted automatically after 5 minutes
	"ERROR_IP_BLOCKED":            {ClassTransient, 5 * time.Minute},  // banned for improper use, like IP_BANNED
	"ERROR_IP_BANNED":             {ClassTransient, 5 * time.Minute},  // CapMonster: too many wrong keys; "try again later"
	"TOO_MANY_BAD_IMAGES":         {class: ClassTransient},
	"ERROR_SERVER_ERROR":          {class: ClassTransient},
	"ERROR_INTERNAL_SERVER_ERROR": {class: ClassTransient},
	"ERROR_SERVICE_UNAVALIABLE":   {class: ClassTransient}, // CapSolver's spelling

	// Account / key problems: retrying will not help until someone fixes config.
	"ERROR_WRONG_USER_KEY":     {class: ClassConfig},
	"ERROR_KEY_DOES_NOT_EXIST": {class: ClassConfig},
	"ERROR_IP_NOT_ALLOWED":     {class: ClassConfig},
	"ERROR_IP_ADDRES":          {class: ClassConfig},
	"ERROR_ACCOUNT_SUSPENDED":  {class: ClassConfig},
	"ERROR_DOMAIN_NOT_ALLOWED": {class: ClassConfig},

	// Task parameters the provider rejected.
	"ERROR_PAGEURL":                   {class: ClassConfig},
	"ERROR_GOOGLEKEY":                 {class: ClassConfig},
	"ERROR_WRONG_GOOGLEKEY":           {class: ClassConfig},
	"ERROR_SITEKEY":                   {class: ClassConfig},
	"ERROR_BAD_TOKEN_OR_PAGEURL":      {class: ClassConfig},
	"ERROR_BAD_TOKEN":                 {class: ClassConfig},
	"ERROR_TOKEN_EXPIRED":             {class: ClassConfig},
	"ERROR_BAD_PARAMETERS":            {class: ClassConfig},
	"ERROR_BAD_PROXY":                 {class: ClassConfig},
	"ERROR_PROXY_FORMAT":              {class: ClassConfig},
	"ERROR_METHOD_CALL":               {class: ClassConfig},
	"ERROR_NO_SUCH_METHOD":            {class: ClassConfig},
	"ERROR_EMPTY_ACTION":              {class: ClassConfig},
	"ERROR_TASK_NOT_SUPPORTED":        {class: ClassConfig},
	"ERROR_RECAPTCHA_INVALID_SITEKEY": {class: ClassConfig},
	"ERROR_RECAPTCHA_INVALID_DOMAIN":  {class: ClassConfig},
	"ERROR_INVALID_TASK_DATA":         {class: ClassConfig},
	"ERROR_BAD_REQUEST":               {class: ClassConfig},

	// Image problems (method post / base64).
	"ERROR_WRONG_FILE_EXTENSION":     {class: ClassConfig},
	"ERROR_TOO_BIG_CAPTCHA_FILESIZE": {class: ClassConfig},
	"ERROR_ZERO_CAPTCHA_FILESIZE":    {class: ClassConfig},
	"ERROR_IMAGE_TYPE_NOT_SUPPORTED": {class: ClassConfig},
	"ERROR_UPLOAD":                   {class: ClassConfig},
	"ERROR_CAPTCHAIMAGE_BLOCKED":     {class: ClassConfig},

	// The task id is wrong or unknown to the provider.
	"ERROR_WRONG_ID_FORMAT":   {class: ClassConfig},
	"ERROR_WRONG_CAPTCHA_ID":  {class: ClassConfig},
	"ERROR_NO_SUCH_CAPCHA_ID": {class: ClassConfig},
	"ERROR_TASK_ABSENT":       {class: ClassConfig},
	"ERROR_TASKID_INVALID":    {class: ClassConfig},
	"WRONG_CAPTCHA_ID":        {class: ClassConfig},

	// Reports the provider refused to record; repeating them is pointless.
	"ERROR_DUPLICATE_REPORT":    {class: ClassConfig},
	"ERROR_REPORT_NOT_RECORDED": {class: ClassConfig},
}

// Status words the createTask client reports for answers that carry none of their own.
const (
	// CodeNotReady is a "processing" (CapSolver: "idle") getTaskResult, in the in.php family's spelling
	// (CapMonster lists it among its codes), so it is counted and treated as res.php's.
	CodeNotReady = "CAPTCHA_NOT_READY"
	// CodeUnsolvable is a "failed" status that came without an error code.
	CodeUnsolvable = "ERROR_CAPTCHA_UNSOLVABLE"
)

// Canonical is a code as the table spells it: trimmed, upper case.
func Canonical(c string) string { return strings.ToUpper(strings.TrimSpace(c)) }

// ClassifyCode maps a status word to what to do about it (pure: the workflow uses it on callback codes); 2captcha's
// numbered "ERROR: 1001" .. "ERROR: 1005" are temporary bans.
func ClassifyCode(c string) Class {
	c = Canonical(c)
	if e, ok := codes[c]; ok {
		return e.class
	}
	if n, ok := strings.CutPrefix(c, "ERROR:"); ok {
		if _, err := strconv.Atoi(strings.TrimSpace(n)); err == nil {
			return ClassTransient
		}
	}
	return ClassUnknown
}

// RetryAfter is the documented wait after code, or 0 (the caller's own backoff applies).
func RetryAfter(c string) time.Duration { return codes[Canonical(c)].wait }

// KnownCode returns a documented code's canonical spelling and true: a fixed set, so it can label a metric without
// letting a provider grow the label's cardinality.
func KnownCode(c string) (string, bool) {
	if _, ok := codes[Canonical(c)]; ok {
		return Canonical(c), true
	}
	return "", false
}

// IsStatusWord reports whether s is a status word rather than a solution (pingbacks put "the token, the answer, or
// an error code" in one field): a documented code, any ERROR_… word or "ERROR: 1001", upper case only, so a text
// CAPTCHA's answer ("error_x") is never mistaken for one.
func IsStatusWord(s string) bool {
	s = strings.TrimSpace(s)
	if !IsCode(s) {
		return false
	}
	if _, ok := codes[s]; ok {
		return true
	}
	return strings.HasPrefix(s, "ERROR_") || strings.HasPrefix(s, "ERROR:")
}

// IsCode reports whether s has a provider code's shape: ERROR_FOO, IP_BANNED, CAPCHA_NOT_READY, or "ERROR: 1001".
func IsCode(s string) bool {
	if n, ok := strings.CutPrefix(s, "ERROR:"); ok {
		_, err := strconv.Atoi(strings.TrimSpace(n))
		return err == nil
	}
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// Snippet quotes the start of an unparseable body for diagnostics (at most 64 bytes).
func Snippet(b []byte) string {
	const maxSnippet = 64
	if len(b) > maxSnippet {
		return strconv.Quote(string(b[:maxSnippet])) + "..."
	}
	return strconv.Quote(string(b))
}
