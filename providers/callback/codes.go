// Package callback reads providers' callbacks and status words (class, wait): no client, no key, so the ingress links it alone.
package callback

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Class tells the caller what to do about a provider's answer.
type Class string

const (
	ClassConfig      Class = "config"      // non-retryable configuration / parameter problem
	ClassUnsupported Class = "unsupported" // this provider lacks the task type (or method): another may take it
	ClassTransient   Class = "transient"   // retry after RetryAfter(code) when it has a documented wait, else with backoff
	ClassResubmit    Class = "resubmit"    // this task failed; submit a new one
	ClassNotReady    Class = "not_ready"   // CAPCHA_NOT_READY (keep polling)
	ClassUnknown     Class = "unknown"     // unknown provider code: non-retryable, code in message
	ClassProxy       Class = "proxy"       // the user's proxy (or user agent) failed: the task ends, nothing resubmitted
)

// codes: the in.php/res.php codes (2captcha, CaptchaAI) and the createTask providers' documented errors, one class each.
var codes = map[string]Class{}

func init() {
	for class, words := range map[Class]string{
		ClassNotReady: "CAPCHA_NOT_READY CAPTCHA_NOT_READY", // CaptchaAI spells it CAPCHA (sic)
		// ERROR_TASK_TIMEOUT: CapSolver did not solve it within 120 s; ERROR_CAPTCHA_SOLVE_FAILED: its failed task.
		ClassResubmit: `ERROR_CAPTCHA_UNSOLVABLE ERROR_BAD_DUPLICATES ERROR_RECAPTCHA_TIMEOUT
			ERROR_TASK_TIMEOUT ERROR_CAPTCHA_SOLVE_FAILED`,
		ClassTransient: `TOO_MANY_BAD_IMAGES ERROR_SERVER_ERROR ERROR_INTERNAL_SERVER_ERROR ERROR_SERVICE_UNAVALIABLE ERROR_NO_SLOT_AVAILABLE
			MAX_USER_TURN ERROR_TOO_MUCH_REQUESTS ERROR_RATE_LIMIT ERROR_ZERO_BALANCE IP_BANNED ERROR_IP_BLOCKED ERROR_IP_BANNED`,
		// Each provider's proxy words (docs/providers.md#proxies); a wrong user agent is the user's as well.
		ClassProxy: `ERROR_PROXY_CONNECT_REFUSED ERROR_PROXY_CONNECT_TIMEOUT ERROR_PROXY_READ_TIMEOUT ERROR_PROXY_BANNED
			ERROR_PROXY_TRANSPARENT ERROR_PROXY_INCOMPATIBLE_HTTP_VERSION ERROR_PROXY_NOT_AUTHORISED ERROR_PROXY_CONNECTION_FAILED
			ERROR_BAD_PROXY ERROR_WRONG_USERAGENT`,
		// createTask's "type … not supported" (2captcha v2, Anti-Captcha); ERROR_NO_SUCH_METHOD: a method (CapMonster:
		// a task type) the provider lacks (docs/providers.md#errors).
		ClassUnsupported: "ERROR_TASK_NOT_SUPPORTED ERROR_NO_SUCH_METHOD",
		// Key, account, task parameters, images, task ids and refused reports: retrying will not help.
		ClassConfig: `ERROR_WRONG_USER_KEY ERROR_KEY_DOES_NOT_EXIST ERROR_IP_NOT_ALLOWED ERROR_IP_ADDRES ERROR_ACCOUNT_SUSPENDED ERROR_DOMAIN_NOT_ALLOWED
			ERROR_PAGEURL ERROR_GOOGLEKEY ERROR_WRONG_GOOGLEKEY ERROR_SITEKEY ERROR_BAD_TOKEN_OR_PAGEURL ERROR_BAD_TOKEN ERROR_TOKEN_EXPIRED
			ERROR_BAD_PARAMETERS ERROR_PROXY_FORMAT ERROR_PROXY_MISSING ERROR_METHOD_CALL ERROR_EMPTY_ACTION
			ERROR_RECAPTCHA_INVALID_SITEKEY ERROR_RECAPTCHA_INVALID_DOMAIN ERROR_INVALID_TASK_DATA ERROR_BAD_REQUEST ERROR_WRONG_FILE_EXTENSION
			ERROR_TOO_BIG_CAPTCHA_FILESIZE ERROR_ZERO_CAPTCHA_FILESIZE ERROR_IMAGE_TYPE_NOT_SUPPORTED ERROR_UPLOAD ERROR_CAPTCHAIMAGE_BLOCKED
			ERROR_WRONG_ID_FORMAT ERROR_WRONG_CAPTCHA_ID ERROR_NO_SUCH_CAPCHA_ID ERROR_TASK_ABSENT ERROR_TASKID_INVALID WRONG_CAPTCHA_ID
			ERROR_DUPLICATE_REPORT ERROR_REPORT_NOT_RECORDED`,
	} {
		for _, w := range strings.Fields(words) {
			codes[w] = class
		}
	}
}

// waits are the documented waits after a busy, rate-limited, zero-balance (CaptchaAI: no free thread) or banned answer.
var waits = map[string]time.Duration{"ERROR_NO_SLOT_AVAILABLE": 5 * time.Second, "MAX_USER_TURN": 10 * time.Second,
	"ERROR_TOO_MUCH_REQUESTS": 10 * time.Second, "ERROR_RATE_LIMIT": 10 * time.Second, "ERROR_ZERO_BALANCE": time.Minute,
	"IP_BANNED": 5 * time.Minute, "ERROR_IP_BLOCKED": 5 * time.Minute, "ERROR_IP_BANNED": 5 * time.Minute}

// rateLimits say the account sent too many requests: its pace drops for every worker, no task fails.
var rateLimits = strings.Fields("MAX_USER_TURN ERROR_TOO_MUCH_REQUESTS ERROR_RATE_LIMIT")

func IsRateLimit(code string) bool { return slices.Contains(rateLimits, Canonical(code)) }

const (
	CodeNotReady     = "CAPTCHA_NOT_READY"        // also a "processing" (CapSolver: "idle") getTaskResult
	CodeUnsolvable   = "ERROR_CAPTCHA_UNSOLVABLE" // also a "failed" status without a code
	CodeZeroBalance  = "ERROR_ZERO_BALANCE"
	CodeNoSlot       = "ERROR_NO_SLOT_AVAILABLE"
	CodeDuplicate    = "ERROR_DUPLICATE_REPORT"
	CodeNotRecorded  = "ERROR_REPORT_NOT_RECORDED"
	CodeProxyMissing = "ERROR_PROXY_MISSING"   // a proxied type sent without a proxy: captchaflow's own bug
	CodeWrongUA      = "ERROR_WRONG_USERAGENT" // names params.userAgent rather than the proxy
)

// Canonical is a code as the table spells it: trimmed, upper case.
func Canonical(c string) string { return strings.ToUpper(strings.TrimSpace(c)) }

// ClassifyCode maps a status word to what to do about it; 2captcha's numbered "ERROR: 1001".."ERROR: 1005" are bans.
func ClassifyCode(c string) Class {
	c = Canonical(c)
	if class, ok := codes[c]; ok {
		return class
	}
	if strings.HasPrefix(c, "ERROR:") && IsCode(c) {
		return ClassTransient
	}
	return ClassUnknown
}

// RetryAfter is the documented wait after code, or 0 (the caller's own backoff applies).
func RetryAfter(c string) time.Duration { return waits[Canonical(c)] }

// KnownCode is a documented code's canonical spelling: a fixed set, so a metric label it makes cannot grow.
func KnownCode(c string) (string, bool) {
	if _, ok := codes[Canonical(c)]; ok {
		return Canonical(c), true
	}
	return "", false
}

// IsStatusWord: a documented code, ERROR_… or "ERROR: 1001", upper case only (a text CAPTCHA's "error_x" is a solution).
func IsStatusWord(s string) bool {
	s = strings.TrimSpace(s)
	_, known := codes[s]
	return IsCode(s) && (known || strings.HasPrefix(s, "ERROR_") || strings.HasPrefix(s, "ERROR:"))
}

// IsCode reports whether s has a provider code's shape: ERROR_FOO, IP_BANNED, CAPCHA_NOT_READY, or "ERROR: 1001".
func IsCode(s string) bool {
	if n, ok := strings.CutPrefix(s, "ERROR:"); ok {
		_, err := strconv.Atoi(strings.TrimSpace(n))
		return err == nil
	}
	return s != "" && s[0] >= 'A' && s[0] <= 'Z' && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

// Snippet quotes the start of an unparseable body for diagnostics (at most 64 bytes).
func Snippet(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "..."
	}
	return strconv.Quote(string(b))
}
