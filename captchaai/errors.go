package captchaai

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
)

// Class tells the caller what to do about a failed call.
type Class string

const (
	ClassConfig    Class = "config"    // non-retryable configuration / parameter problem
	ClassTransient Class = "transient" // retry after RetryAfter(code) when it has a documented wait, else with backoff
	ClassResubmit  Class = "resubmit"  // this task failed; submit a new one
	ClassNotReady  Class = "not_ready" // CAPCHA_NOT_READY (keep polling)
	ClassUnknown   Class = "unknown"   // unknown provider code: non-retryable, code in message
)

// Error is every error the client returns. Network and context failures are
// wrapped in it too, so callers only ever need errors.As(err, *Error) or ClassOf.
type Error struct {
	Op         string // "submit", "get", "getbalance", "reportgood", "reportbad"
	Code       string // provider code, e.g. "ERROR_NO_SLOT_AVAILABLE"; "" for network/HTTP/decode errors
	Class      Class
	HTTPStatus int   // when the failure was an HTTP status
	Err        error // underlying cause, already redacted (never contains the API key)
	// Written is set on a failure without a provider answer (network, timeout, unreadable answer, a 5xx that is not
	// the provider's own error word) that came after the request was written, or partly written, to the
	// connection: the provider may have acted on it. See OutcomeUnknown.
	Written bool
	// Provider names who answered, as the message's prefix; "" is this client ("captchaai"). The createTask client
	// sets its flavor.
	Provider string
}

// OutcomeUnknown reports whether err is a failed request that may nevertheless have reached the provider and been
// acted on: after the request was written, the connection broke or timed out, the answer was unreadable, or a 5xx
// came that is not the provider's own error word (a gateway in front of the provider answers 502, 504 or a CDN's
// 52x after forwarding the request). For in.php that means a task may exist (and be paid for) whose ID the caller
// never learned; submitting again at once could pay twice. A failure before anything was written (DNS, connection
// refused, TLS handshake), a 4xx status and any provider code are known outcomes: false.
func OutcomeUnknown(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce != nil && ce.Written && ce.Code == "" && (ce.HTTPStatus == 0 || ce.HTTPStatus >= 500)
}

func (e *Error) Error() string {
	if e == nil {
		return "captchaai: <nil error>"
	}
	var b strings.Builder
	if e.Provider != "" {
		b.WriteString(e.Provider)
	} else {
		b.WriteString("captchaai")
	}
	b.WriteString(" ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	switch {
	case e.Code != "":
		b.WriteString(e.Code)
	case e.HTTPStatus != 0:
		b.WriteString("HTTP ")
		b.WriteString(strconv.Itoa(e.HTTPStatus))
	}
	if e.Err != nil {
		if e.Code != "" || e.HTTPStatus != 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	b.WriteString(" (")
	b.WriteString(string(e.Class))
	b.WriteString(")")
	return b.String()
}

func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// ClassOf classifies any error: the Class of a wrapped *Error; transient for
// context cancellation/deadline and network errors; "" for nil; unknown otherwise.
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	var ce *Error
	if errors.As(err, &ce) && ce != nil {
		return ce.Class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassTransient
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ClassTransient
	}
	return ClassUnknown
}

// codeClasses maps documented 2captcha / CaptchaAI in.php and res.php codes to
// what the caller should do. Codes not listed here are ClassUnknown.
var codeClasses = map[string]Class{
	// Not solved yet: keep polling. CaptchaAI spells it CAPCHA (sic); accept both.
	"CAPCHA_NOT_READY":  ClassNotReady,
	"CAPTCHA_NOT_READY": ClassNotReady,

	// The provider could not solve this task; a fresh submission may succeed.
	"ERROR_CAPTCHA_UNSOLVABLE":      ClassResubmit,
	"ERROR_BAD_DUPLICATES":          ClassResubmit,
	"ERROR_PROXY_CONNECTION_FAILED": ClassResubmit,

	// Capacity, rate limiting and provider-side hiccups: retry later (how much later: RetryAfter, pacing.go).
	"ERROR_NO_SLOT_AVAILABLE":     ClassTransient,
	"ERROR_ZERO_BALANCE":          ClassTransient, // CaptchaAI: no free thread right now
	"MAX_USER_TURN":               ClassTransient,
	"IP_BANNED":                   ClassTransient, // lifted automatically after 5 minutes
	"TOO_MANY_BAD_IMAGES":         ClassTransient,
	"ERROR_TOO_MUCH_REQUESTS":     ClassTransient,
	"ERROR_SERVER_ERROR":          ClassTransient,
	"ERROR_INTERNAL_SERVER_ERROR": ClassTransient,

	// Account / key problems: retrying will not help until someone fixes config.
	"ERROR_WRONG_USER_KEY":     ClassConfig,
	"ERROR_KEY_DOES_NOT_EXIST": ClassConfig,
	"ERROR_IP_NOT_ALLOWED":     ClassConfig,
	"ERROR_IP_ADDRES":          ClassConfig,

	// Task parameters the provider rejected.
	"ERROR_PAGEURL":              ClassConfig,
	"ERROR_GOOGLEKEY":            ClassConfig,
	"ERROR_WRONG_GOOGLEKEY":      ClassConfig,
	"ERROR_SITEKEY":              ClassConfig,
	"ERROR_BAD_TOKEN_OR_PAGEURL": ClassConfig,
	"ERROR_BAD_TOKEN":            ClassConfig,
	"ERROR_TOKEN_EXPIRED":        ClassConfig,
	"ERROR_BAD_PARAMETERS":       ClassConfig,
	"ERROR_BAD_PROXY":            ClassConfig,
	"ERROR_PROXY_FORMAT":         ClassConfig,
	"ERROR_METHOD_CALL":          ClassConfig,
	"ERROR_NO_SUCH_METHOD":       ClassConfig,
	"ERROR_EMPTY_ACTION":         ClassConfig,

	// Image problems (method post / base64).
	"ERROR_WRONG_FILE_EXTENSION":     ClassConfig,
	"ERROR_TOO_BIG_CAPTCHA_FILESIZE": ClassConfig,
	"ERROR_ZERO_CAPTCHA_FILESIZE":    ClassConfig,
	"ERROR_IMAGE_TYPE_NOT_SUPPORTED": ClassConfig,
	"ERROR_UPLOAD":                   ClassConfig,
	"ERROR_CAPTCHAIMAGE_BLOCKED":     ClassConfig,

	// res.php: the task id is wrong or unknown to the provider.
	"ERROR_WRONG_ID_FORMAT":   ClassConfig,
	"ERROR_WRONG_CAPTCHA_ID":  ClassConfig,
	"ERROR_NO_SUCH_CAPCHA_ID": ClassConfig,

	// Reports the provider refused to record; repeating them is pointless.
	"ERROR_DUPLICATE_REPORT":    ClassConfig,
	"ERROR_REPORT_NOT_RECORDED": ClassConfig,
}

// ClassifyCode maps a provider status word (an in.php / res.php error code, CAPCHA_NOT_READY) to what the caller
// should do about it. It is pure: the workflow uses it on callback codes.
func ClassifyCode(code string) Class { return classifyCode(strings.TrimSpace(code)) }

// IsStatusWord reports whether s is a provider status word rather than a solution: a documented code
// (CAPCHA_NOT_READY, ERROR_CAPTCHA_UNSOLVABLE, MAX_USER_TURN, …), any other ERROR_… word, or 2captcha's
// "ERROR: 1001" form. 2captcha-style pingbacks put "the token, the answer, or an error code" in the same field,
// so a code must be checked with this before it is taken as a result. Only the upper-case code shape counts, so
// a text CAPTCHA's answer in lower or mixed case ("error_x") is never mistaken for one.
func IsStatusWord(s string) bool {
	s = strings.TrimSpace(s)
	if !isCode(s) {
		return false
	}
	if _, ok := codeClasses[s]; ok {
		return true
	}
	return strings.HasPrefix(s, "ERROR_") || strings.HasPrefix(s, "ERROR:")
}

// classifyCode maps a provider code to a Class.
func classifyCode(code string) Class {
	if c, ok := codeClasses[strings.ToUpper(code)]; ok {
		return c
	}
	// 2captcha answers "ERROR: 1001" .. "ERROR: 1005" for temporary bans.
	if n, ok := strings.CutPrefix(code, "ERROR:"); ok {
		if _, err := strconv.Atoi(strings.TrimSpace(n)); err == nil {
			return ClassTransient
		}
	}
	return ClassUnknown
}

// classifyStatus maps a non-2xx HTTP status to a Class. res.php and in.php
// answer 200 even for provider errors, so a bad status means the HTTP layer
// (provider front end, proxy, load balancer) failed.
func classifyStatus(status int) Class {
	switch {
	case status >= 500:
		return ClassTransient
	case status == 429, status == 408:
		return ClassTransient
	case status == 401, status == 403:
		return ClassConfig
	default:
		return ClassUnknown
	}
}
