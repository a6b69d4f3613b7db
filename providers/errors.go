package providers

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Error is every error a client returns. Network and context failures are wrapped in it too, so callers only ever
// need errors.As(err, *Error) or ClassOf. Its text never contains the API key.
type Error struct {
	Op         string // "submit", "get", "createTask", "getTaskResult", …
	Code       string // provider code, e.g. "ERROR_NO_SLOT_AVAILABLE"; "" for network/HTTP/decode errors
	Class      callback.Class
	HTTPStatus int   // when the failure was an HTTP status
	Err        error // underlying cause, already redacted
	// Written is set on a failure without a provider answer (network, timeout, unreadable answer, a 5xx that is not
	// the provider's own error word) that came after the request was written, or partly written, to the
	// connection: the provider may have acted on it. See OutcomeUnknown.
	Written bool
	// Provider names who answered, as the message's prefix ("captchaai", "createtask capsolver").
	Provider string
}

// ErrInvalidAnswer marks a success answer that cannot be what it claims: a task id that is not an id, an empty
// code, a code over the size bound. Such errors are *Error with ClassUnknown.
var ErrInvalidAnswer = errors.New("invalid provider answer")

// OutcomeUnknown reports whether err is a failed request that may nevertheless have reached the provider and been
// acted on: after the request was written, the connection broke or timed out, the answer was unreadable, or a 5xx
// came that is not the provider's own error word (a gateway answers 502, 504 or a CDN's 52x after forwarding the
// request). For a submission that means a task may exist (and be paid for) whose ID the caller never learned;
// submitting again at once could pay twice. A failure before anything was written, a 4xx and any provider code are
// known outcomes: false.
func OutcomeUnknown(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce != nil && ce.Written && ce.Code == "" && (ce.HTTPStatus == 0 || ce.HTTPStatus >= 500)
}

func (e *Error) Error() string {
	if e == nil {
		return "provider: <nil error>"
	}
	what := e.Code
	if what == "" && e.HTTPStatus != 0 {
		what = "HTTP " + strconv.Itoa(e.HTTPStatus)
	}
	if e.Err != nil && what != "" {
		what += ": " + e.Err.Error()
	} else if e.Err != nil {
		what = e.Err.Error()
	}
	return e.Provider + " " + e.Op + ": " + what + " (" + string(e.Class) + ")"
}

func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// ClassOf classifies any error: the Class of a wrapped *Error; transient for context cancellation/deadline and
// network errors; "" for nil; unknown otherwise.
func ClassOf(err error) callback.Class {
	if err == nil {
		return ""
	}
	var ce *Error
	if errors.As(err, &ce) && ce != nil {
		return ce.Class
	}
	var ne net.Error
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) {
		return callback.ClassTransient
	}
	return callback.ClassUnknown
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
		if ce.Code != "" || ce.HTTPStatus != 0 || ce.Class != callback.ClassTransient {
			return false
		}
		return !errors.Is(ce.Err, callback.ErrMalformed) && !errors.Is(ce.Err, ErrInvalidAnswer)
	}
	return ClassOf(err) == callback.ClassTransient // a bare network or context error
}

// classifyStatus maps a non-2xx HTTP status to a Class: the providers answer 200 even for their errors (CapSolver
// aside, whose envelope is read first), so a bad status means the HTTP layer (front end, proxy) failed.
func classifyStatus(status int) callback.Class {
	switch {
	case status >= 500, status == 429, status == 408:
		return callback.ClassTransient
	case status == 401, status == 403:
		return callback.ClassConfig
	default:
		return callback.ClassUnknown
	}
}

// IsTaskID reports whether s has the shape of a provider task id: 1–64 characters of [0-9A-Za-z_-], the first a
// letter or digit. The real services hand out digits (CapSolver: a UUID); the wider set admits compatible
// providers without admitting anything that could change a URL, a log line or a search query.
func IsTaskID(s string) bool {
	if len(s) == 0 || len(s) > 64 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
