package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Handlers return these errors; errorHandler turns them into responses, and the metrics and the access log derive
// the status and the callback outcome from them, so all three always agree.

// badRequestError is input the provider must fix; it names the field.
type badRequestError struct {
	field, msg string
}

func badRequest(field, msg string) error { return &badRequestError{field: field, msg: msg} }

func (e *badRequestError) Error() string { return e.field + ": " + e.msg }

// forbiddenError is a callback whose token is missing or does not match the workflow ID.
type forbiddenError struct{}

func (forbiddenError) Error() string { return "missing or invalid callback token" }

// unavailableError means Temporal did not accept the signal in time. The provider may retry; the workflow's
// fallback poll recovers the result anyway. cause is logged, never sent to the caller.
type unavailableError struct {
	cause error
}

func unavailable(cause error) error { return &unavailableError{cause: cause} }

func (e *unavailableError) Error() string { return "temporal unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() error { return e.cause }

const unavailableMessage = "temporarily unable to accept the callback, retry later"

// statusOf is the HTTP status err is answered with.
func statusOf(err error) int {
	var (
		bad     *badRequestError
		forbid  forbiddenError
		unavail *unavailableError
		httpErr *echo.HTTPError
	)
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest
	case errors.As(err, &forbid):
		return http.StatusForbidden
	case errors.As(err, &unavail):
		return http.StatusServiceUnavailable
	case errors.As(err, &httpErr):
		return httpErr.Code
	}
	return http.StatusInternalServerError
}

// publicMessage is what the caller is told about err: never a Temporal error text, never an internal detail.
func publicMessage(err error) string {
	var (
		bad     *badRequestError
		forbid  forbiddenError
		httpErr *echo.HTTPError
	)
	switch {
	case errors.As(err, &bad):
		return bad.Error()
	case errors.As(err, &forbid):
		return forbid.Error()
	case errors.As(err, &httpErr):
		if msg, ok := httpErr.Message.(string); ok {
			return msg
		}
		return http.StatusText(httpErr.Code)
	}
	status := statusOf(err)
	if status == http.StatusServiceUnavailable {
		return unavailableMessage
	}
	return http.StatusText(status)
}

type errorBody struct {
	Error string `json:"error"`
}

// handleError is Echo's one HTTPErrorHandler: every error becomes {"error": "..."} with its status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := statusOf(err)
	if status == http.StatusServiceUnavailable {
		// Providers honour Retry-After; the workflow polls anyway, so a short hint is enough.
		c.Response().Header().Set("Retry-After", "5")
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(status)
	} else {
		werr = c.JSON(status, errorBody{Error: publicMessage(err)})
	}
	if werr != nil {
		s.log.Warn("writing error response failed", slog.String("error", werr.Error()))
	}
}
