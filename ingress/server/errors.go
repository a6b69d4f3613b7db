package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Handlers return these errors. Each one carries its HTTP status, the message the caller is told and the callback
// outcome; resolveError reads all three from any error, and the error handler, the access log and the metrics all
// go through it, so they always agree.

// callbackError is an error that knows how it is answered and counted.
type callbackError interface {
	error
	// Status is the HTTP status the error is answered with.
	Status() int
	// PublicMessage is what the caller is told: never a Temporal error text, never an internal detail.
	PublicMessage() string
	// Outcome is the `outcome` label of the callbacks counter, or "" if the error is not a callback outcome.
	Outcome() string
}

var (
	_ callbackError = (*badRequestError)(nil)
	_ callbackError = forbiddenError{}
	_ callbackError = (*unavailableError)(nil)
	_ callbackError = echoError{}
)

// badRequestError is input the provider must fix; it names the field.
type badRequestError struct {
	field, msg string
}

func badRequest(field, msg string) error { return &badRequestError{field: field, msg: msg} }

func (e *badRequestError) Error() string         { return e.field + ": " + e.msg }
func (e *badRequestError) Status() int           { return http.StatusBadRequest }
func (e *badRequestError) PublicMessage() string { return e.Error() }
func (e *badRequestError) Outcome() string       { return outcomeBadRequest }

// forbiddenError is a callback whose token is missing or does not match the workflow ID.
type forbiddenError struct{}

func (forbiddenError) Error() string           { return "missing or invalid callback token" }
func (forbiddenError) Status() int             { return http.StatusForbidden }
func (e forbiddenError) PublicMessage() string { return e.Error() }
func (forbiddenError) Outcome() string         { return outcomeForged }

// unavailableError means Temporal did not accept the signal in time. The provider may retry; the workflow's
// fallback poll recovers the result anyway. cause is logged, never sent to the caller.
type unavailableError struct {
	cause error
}

func unavailable(cause error) error { return &unavailableError{cause: cause} }

func (e *unavailableError) Error() string         { return "temporal unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() error         { return e.cause }
func (e *unavailableError) Status() int           { return http.StatusServiceUnavailable }
func (e *unavailableError) PublicMessage() string { return unavailableMessage }
func (e *unavailableError) Outcome() string       { return outcomeUnavailable }

const unavailableMessage = "temporarily unable to accept the callback, retry later"

// echoError gives Echo's own errors (404, 405, 413 from the body limit) the callbackError methods, since
// *echo.HTTPError cannot get them itself.
type echoError struct {
	*echo.HTTPError
}

func (e echoError) Status() int { return e.Code }

// PublicMessage is Echo's message when it is a string (Echo's defaults are), else the status text.
func (e echoError) PublicMessage() string {
	if msg, ok := e.Message.(string); ok {
		return msg
	}
	return http.StatusText(e.Code)
}

// Outcome counts a 4xx from Echo as bad_request (e.g. an oversized body); anything else is no callback outcome.
func (e echoError) Outcome() string {
	if e.Code >= 400 && e.Code < 500 {
		return outcomeBadRequest
	}
	return ""
}

// resolvedError is how one error is answered and counted.
type resolvedError struct {
	status  int
	message string // the public message, safe to send to the caller
	outcome string // the callbacks counter's outcome label; "" for no callback outcome
}

// resolveError is the one place an error becomes a status, public message and outcome. An error of a type that is
// not ours is a bug: 500 with only the status text, and no callback outcome (it shows in requests_total and the
// log instead).
func resolveError(err error) resolvedError {
	var ce callbackError
	var httpErr *echo.HTTPError
	switch {
	case errors.As(err, &ce):
	case errors.As(err, &httpErr):
		ce = echoError{httpErr}
	default:
		return resolvedError{
			status:  http.StatusInternalServerError,
			message: http.StatusText(http.StatusInternalServerError),
		}
	}
	return resolvedError{status: ce.Status(), message: ce.PublicMessage(), outcome: ce.Outcome()}
}

type errorBody struct {
	Error string `json:"error"`
}

// handleError is Echo's one HTTPErrorHandler: every error becomes {"error": "..."} with its status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	resolved := resolveError(err)
	if resolved.status == http.StatusServiceUnavailable {
		// Providers honour Retry-After; the workflow polls anyway, so a short hint is enough.
		c.Response().Header().Set("Retry-After", "5")
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(resolved.status)
	} else {
		werr = c.JSON(resolved.status, errorBody{Error: resolved.message})
	}
	if werr != nil {
		s.log.Warn("writing error response failed", slog.String("error", werr.Error()))
	}
}
