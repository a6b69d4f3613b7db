package captchaai

import (
	"errors"
	"strings"
	"time"
)

// retryAfter is how long to wait before the next in.php / res.php request after a busy or rate-limit answer, as the
// providers document it (2captcha-style guidance, which CaptchaAI's API follows; see issue #10). It is the one place
// these waits are declared; a code that is not listed has no documented wait, and the caller's own backoff applies.
//
//	code                     wait   meaning
//	ERROR_NO_SLOT_AVAILABLE  5 s    no free worker / slot right now (CaptchaAI: every thread of the plan is busy)
//	MAX_USER_TURN            10 s   too many in.php requests in a row: the account is held back for about 10 s
//	ERROR_TOO_MUCH_REQUESTS  10 s   rate limited: slow down (the same guidance as MAX_USER_TURN)
//	ERROR_ZERO_BALANCE       60 s   2captcha: no money on the account, so retry after a minute at the earliest; on
//	                                CaptchaAI (a plan of threads, no per-task balance) it means "no free thread"
//	IP_BANNED                5 min  too many bad requests from this IP; CaptchaAI lifts the ban after 5 minutes
//
// Every code here is ClassTransient (TestRetryAfterCodesAreTransient): a wait only makes sense before a retry.
var retryAfter = map[string]time.Duration{
	"ERROR_NO_SLOT_AVAILABLE": 5 * time.Second,
	"MAX_USER_TURN":           10 * time.Second,
	"ERROR_TOO_MUCH_REQUESTS": 10 * time.Second,
	"ERROR_ZERO_BALANCE":      60 * time.Second,
	"IP_BANNED":               5 * time.Minute,
}

// RetryAfter is the documented wait after the provider answered code (see retryAfter), or 0 when the code has no
// documented wait (the caller's own backoff applies). Surrounding spaces and case are ignored, as in ClassifyCode.
// It is pure.
func RetryAfter(code string) time.Duration {
	return retryAfter[strings.ToUpper(strings.TrimSpace(code))]
}

// KnownCode returns the canonical spelling of a documented provider code (any code ClassifyCode knows by name:
// CAPCHA_NOT_READY, ERROR_NO_SLOT_AVAILABLE, …) and true, or "" and false for anything else, including an
// undocumented ERROR_… word and 2captcha's numbered "ERROR: 1001" form. The set is fixed, so its values can label a
// metric without letting a provider (or whoever answers in its place) grow the label's cardinality.
func KnownCode(code string) (string, bool) {
	c := strings.ToUpper(strings.TrimSpace(code))
	if _, ok := codeClasses[c]; ok {
		return c, true
	}
	return "", false
}

// IsTransportError reports whether err is a failure to get an answer at all: the connection, TLS, a timeout or a
// cancellation, a body cut off while it was read. A provider code, an HTTP status, a malformed or invalid answer
// and a request that could not be built are not transport errors.
func IsTransportError(err error) bool {
	if err == nil {
		return false
	}
	var ce *Error
	if errors.As(err, &ce) && ce != nil {
		if ce.Code != "" || ce.HTTPStatus != 0 || ce.Class != ClassTransient {
			return false
		}
		return !errors.Is(ce.Err, errMalformed) && !errors.Is(ce.Err, ErrInvalidAnswer)
	}
	return ClassOf(err) == ClassTransient // a bare network or context error
}
