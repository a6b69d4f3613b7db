package providers

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strconv"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Error is every error a client returns, network and context failures included; its text never holds the API key.
type Error struct {
	Op         string // "submit", "get", "createTask", "getTaskResult", …
	Code       string // the provider's code, e.g. "ERROR_NO_SLOT_AVAILABLE"; "" for network/HTTP/decode errors
	Class      callback.Class
	HTTPStatus int   // when the failure was an HTTP status
	Err        error // the cause, already redacted
	// Written: no provider answer came, after (part of) the request was written: the provider may have acted on it.
	Written  bool
	Provider string // who answered, the message's prefix ("captchaai", "createtask capsolver")
}

// ErrInvalidAnswer marks a success answer that cannot be what it claims (not an id, an empty or oversized code).
var ErrInvalidAnswer = errors.New("invalid provider answer")

// OutcomeUnknown reports whether err may have reached the provider and been acted on: after the request was
// written, the connection broke, the answer was unreadable or a 5xx came that is not the provider's own word (a
// gateway's 502/504/52x after forwarding). A submission may then exist, paid, whose ID was never learned.
func OutcomeUnknown(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce != nil && ce.Written && ce.Code == "" && (ce.HTTPStatus == 0 || ce.HTTPStatus >= 500)
}

func (e *Error) Error() string {
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

func (e *Error) Unwrap() error { return e.Err }

// ClassOf classifies any error: an *Error's Class; transient for context and network errors; "" for nil; else unknown.
func ClassOf(err error) callback.Class {
	var ce *Error
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce) && ce != nil:
		return ce.Class
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne):
		return callback.ClassTransient
	}
	return callback.ClassUnknown
}

// IsTransportError reports whether err is a failure to get an answer at all (connection, TLS, timeout, cancellation,
// a body cut off); a code, a status, a malformed or invalid answer or an unbuildable request is not.
func IsTransportError(err error) bool {
	var ce *Error
	if errors.As(err, &ce) && ce != nil {
		return ce.Code == "" && ce.HTTPStatus == 0 && ce.Class == callback.ClassTransient &&
			!errors.Is(ce.Err, callback.ErrMalformed) && !errors.Is(ce.Err, ErrInvalidAnswer)
	}
	return err != nil && ClassOf(err) == callback.ClassTransient
}

// classifyStatus maps a non-2xx status: the providers answer their own errors with 200 (CapSolver's envelope is read
// first), so a bad status is the HTTP layer's (front end, proxy).
func classifyStatus(status int) callback.Class {
	switch {
	case status >= 500, status == 429, status == 408:
		return callback.ClassTransient
	case status == 401, status == 403:
		return callback.ClassConfig
	}
	return callback.ClassUnknown
}

// taskIDPattern is a provider task id's shape: digits (CapSolver: a UUID), widened for compatible providers to what
// can change no URL, log line or search query.
var taskIDPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,63}$`)

// IsTaskID reports whether s has the shape of a provider task id.
func IsTaskID(s string) bool { return taskIDPattern.MatchString(s) }
