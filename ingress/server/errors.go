package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Error is the one error handlers return: Status is what the caller gets, Outcome the callbacks counter's label,
// Message all the caller is told; Err is logged and never sent.
type Error struct {
	Status     int
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

// unavailableRetryAfter is the hint sent with a 503; providers honour it, and the workflow polls anyway.
const unavailableRetryAfter = 5 * time.Second

const unavailableMessage = "temporarily unable to accept the callback, retry later"

var (
	errForged        = &Error{http.StatusForbidden, outcomeForged, "missing or invalid callback token", 0, nil}
	errSourceRefused = &Error{http.StatusForbidden, outcomeSourceRefused, "untokened callbacks are accepted only " +
		"from the provider's addresses (UNTOKENED_ALLOW_CIDRS); use the tokened callback URL", 0, nil}
	errQueueFull = &Error{http.StatusServiceUnavailable, outcomeDropped, unavailableMessage, unavailableRetryAfter,
		errors.New("untokened callback queue full")}
	errDraining = errors.New("shutting down")
)

// badRequest is input the provider must fix; the message names the field.
func badRequest(field, msg string) error {
	return &Error{Status: http.StatusBadRequest, Outcome: outcomeBadRequest, Message: field + ": " + msg}
}

// unavailable means Temporal did not take the callback in time: the provider may retry, and the poll recovers it.
func unavailable(cause error) error {
	return &Error{http.StatusServiceUnavailable, outcomeUnavailable, unavailableMessage, unavailableRetryAfter, cause}
}

func rateLimited(retryAfter time.Duration) error {
	return &Error{http.StatusTooManyRequests, outcomeRateLimited, "too many untokened callbacks, retry later", retryAfter, nil}
}

// resolveError is the one place an error becomes a response; an error not of ours is a bug: a bare 500.
func resolveError(err error) *Error {
	var e *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &he):
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		if he.Code < 500 {
			return &Error{Status: he.Code, Outcome: outcomeBadRequest, Message: msg} // an oversized body, mostly
		}
		return &Error{Status: he.Code, Message: msg}
	}
	return &Error{Status: http.StatusInternalServerError, Message: http.StatusText(http.StatusInternalServerError)}
}

// handleError is Echo's one HTTPErrorHandler: every error becomes {"error": "..."} with its status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	r := resolveError(err)
	if r.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((r.RetryAfter+time.Second-1)/time.Second)))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(r.Status)
		return
	}
	_ = c.JSON(r.Status, echo.Map{"error": r.Message})
}
