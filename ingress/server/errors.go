package server

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

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

// retryAfterError is an error whose answer tells the caller when to come back (the Retry-After header).
type retryAfterError interface {
	RetryAfter() time.Duration
}

var (
	_ callbackError   = (*badRequestError)(nil)
	_ callbackError   = forbiddenError{}
	_ callbackError   = sourceRefusedError{}
	_ callbackError   = (*unavailableError)(nil)
	_ callbackError   = (*rateLimitedError)(nil)
	_ callbackError   = (*overloadedError)(nil)
	_ callbackError   = echoError{}
	_ retryAfterError = (*unavailableError)(nil)
	_ retryAfterError = (*rateLimitedError)(nil)
	_ retryAfterError = (*overloadedError)(nil)
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

// sourceRefusedError is an untokened callback from a client outside UNTOKENED_ALLOW_CIDRS.
type sourceRefusedError struct{}

func (sourceRefusedError) Error() string {
	return "untokened callbacks are accepted only from the provider's addresses (UNTOKENED_ALLOW_CIDRS); use the tokened callback URL"
}
func (sourceRefusedError) Status() int             { return http.StatusForbidden }
func (e sourceRefusedError) PublicMessage() string { return e.Error() }
func (sourceRefusedError) Outcome() string         { return outcomeSourceRefused }

// unavailableError means Temporal did not accept the signal in time. The provider may retry; the workflow's
// fallback poll recovers the result anyway. cause is logged, never sent to the caller.
type unavailableError struct {
	cause error
}

func unavailable(cause error) error { return &unavailableError{cause: cause} }

func (e *unavailableError) Error() string             { return "temporal unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() error             { return e.cause }
func (e *unavailableError) Status() int               { return http.StatusServiceUnavailable }
func (e *unavailableError) PublicMessage() string     { return unavailableMessage }
func (e *unavailableError) Outcome() string           { return outcomeUnavailable }
func (e *unavailableError) RetryAfter() time.Duration { return unavailableRetryAfter }

const unavailableMessage = "temporarily unable to accept the callback, retry later"

// unavailableRetryAfter is the hint sent with a 503; providers honour it, and the workflow polls anyway.
const unavailableRetryAfter = 5 * time.Second

// rateLimitedError is an untokened callback over the global or the caller's rate limit.
type rateLimitedError struct {
	retryAfter time.Duration
}

func (e *rateLimitedError) Error() string             { return "too many untokened callbacks, retry later" }
func (e *rateLimitedError) Status() int               { return http.StatusTooManyRequests }
func (e *rateLimitedError) PublicMessage() string     { return e.Error() }
func (e *rateLimitedError) Outcome() string           { return outcomeRateLimited }
func (e *rateLimitedError) RetryAfter() time.Duration { return e.retryAfter }

// overloadedError is an untokened callback that found the background queue full: nothing was accepted, so the
// provider may retry, and the workflow's fallback poll recovers the result regardless.
type overloadedError struct{}

func (*overloadedError) Error() string             { return "untokened callback queue full" }
func (*overloadedError) Status() int               { return http.StatusServiceUnavailable }
func (*overloadedError) PublicMessage() string     { return unavailableMessage }
func (*overloadedError) Outcome() string           { return outcomeDropped }
func (*overloadedError) RetryAfter() time.Duration { return unavailableRetryAfter }

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
	status     int
	message    string        // the public message, safe to send to the caller
	outcome    string        // the callbacks counter's outcome label; "" for no callback outcome
	retryAfter time.Duration // the Retry-After hint; 0 for none
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
	resolved := resolvedError{status: ce.Status(), message: ce.PublicMessage(), outcome: ce.Outcome()}
	if ra, ok := ce.(retryAfterError); ok {
		resolved.retryAfter = ra.RetryAfter()
	}
	return resolved
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
	if resolved.retryAfter > 0 {
		// Whole seconds, rounded up: the header has no finer unit.
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((resolved.retryAfter+time.Second-1)/time.Second)))
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
