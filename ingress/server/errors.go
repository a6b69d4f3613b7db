package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Error is the one error handlers return: Outcome picks the status (statusOf) and the callbacks counter's label,
// Message is all the caller is told, Err is logged and never sent.
type Error struct {
	Outcome    string
	Message    string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// statusOf is the one outcome→status table.
var statusOf = map[string]int{
	outcomeBadRequest:    http.StatusBadRequest,
	outcomeForged:        http.StatusForbidden,
	outcomeSourceRefused: http.StatusForbidden,
	outcomeRateLimited:   http.StatusTooManyRequests,
	outcomeUnavailable:   http.StatusServiceUnavailable,
	outcomeDropped:       http.StatusServiceUnavailable,
}

// unavailableRetryAfter is the hint sent with a 503; providers honour it, and the workflow polls anyway.
const unavailableRetryAfter = 5 * time.Second

const unavailableMessage = "temporarily unable to accept the callback, retry later"

var (
	errForged        = &Error{Outcome: outcomeForged, Message: "missing or invalid callback token"}
	errSourceRefused = &Error{Outcome: outcomeSourceRefused, Message: "untokened callbacks are accepted only from " +
		"the provider's addresses (UNTOKENED_ALLOW_CIDRS); use the tokened callback URL"}
	errQueueFull = &Error{Outcome: outcomeDropped, Message: unavailableMessage, RetryAfter: unavailableRetryAfter,
		Err: errors.New("untokened callback queue full")}
	errDraining = errors.New("shutting down")
)

// badRequest is input the provider must fix; the message names the field.
func badRequest(field, msg string) error {
	return &Error{Outcome: outcomeBadRequest, Message: field + ": " + msg}
}

// unavailable means Temporal did not take the callback in time: the provider may retry, and the poll recovers it.
func unavailable(cause error) error {
	return &Error{Outcome: outcomeUnavailable, Message: unavailableMessage, RetryAfter: unavailableRetryAfter, Err: cause}
}

func rateLimited(retryAfter time.Duration) error {
	return &Error{Outcome: outcomeRateLimited, Message: "too many untokened callbacks, retry later", RetryAfter: retryAfter}
}

// resolvedError is how one error is answered and counted.
type resolvedError struct {
	status     int
	message    string
	outcome    string // "" for no callback outcome
	retryAfter time.Duration
}

// resolveError is the one place an error becomes a response; an error not of ours is a bug: a bare 500.
func resolveError(err error) resolvedError {
	var e *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
		return resolvedError{statusOf[e.Outcome], e.Message, e.Outcome, e.RetryAfter}
	case errors.As(err, &he):
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		r := resolvedError{status: he.Code, message: msg}
		if he.Code < 500 {
			r.outcome = outcomeBadRequest // an oversized body, mostly
		}
		return r
	}
	return resolvedError{status: http.StatusInternalServerError, message: http.StatusText(http.StatusInternalServerError)}
}

type errorBody struct {
	Error string `json:"error"`
}

// handleError is Echo's one HTTPErrorHandler: every error becomes {"error": "..."} with its status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	r := resolveError(err)
	if r.retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((r.retryAfter+time.Second-1)/time.Second)))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(r.status)
		return
	}
	_ = c.JSON(r.status, errorBody{Error: r.message})
}
