package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorTypesAgreeWithWhatTheServerAnswers checks, for each error a handler can return, that the status, public
// message and outcome it resolves to are the ones the response, the callbacks counter, the access log and the
// HTTP metrics show.
func TestErrorTypesAgreeWithWhatTheServerAnswers(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want resolvedError
	}{
		{"bad request", badRequest("id", "required"),
			resolvedError{http.StatusBadRequest, "id: required", outcomeBadRequest, 0}},
		{"wrapped bad request", fmt.Errorf("parsing: %w", badRequest("code", "too long")),
			resolvedError{http.StatusBadRequest, "code: too long", outcomeBadRequest, 0}},
		{"forbidden", errForged,
			resolvedError{http.StatusForbidden, "missing or invalid callback token", outcomeForged, 0}},
		{"unavailable", unavailable(errors.New("secret temporal detail")),
			resolvedError{http.StatusServiceUnavailable, unavailableMessage, outcomeUnavailable, 5 * time.Second}},
		{"rate limited", rateLimited(2 * time.Second),
			resolvedError{http.StatusTooManyRequests, "too many untokened callbacks, retry later", outcomeRateLimited, 2 * time.Second}},
		{"queue full", errQueueFull,
			resolvedError{http.StatusServiceUnavailable, unavailableMessage, outcomeDropped, 5 * time.Second}},
		{"echo 413", echo.ErrStatusRequestEntityTooLarge,
			resolvedError{http.StatusRequestEntityTooLarge, "Request Entity Too Large", outcomeBadRequest, 0}},
		{"echo 4xx without a string message", echo.NewHTTPError(http.StatusConflict, map[string]int{"n": 1}),
			resolvedError{http.StatusConflict, "Conflict", outcomeBadRequest, 0}},
		{"echo 5xx", echo.NewHTTPError(http.StatusBadGateway, "upstream"),
			resolvedError{http.StatusBadGateway, "upstream", "", 0}},
		{"unknown", errors.New("secret internal detail"),
			resolvedError{http.StatusInternalServerError, "Internal Server Error", "", 0}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, resolveError(tc.err))

			e := newTestEnv(t)
			path := fmt.Sprintf("/test-error/%d", i)
			e.srv.echo.GET(path, func(echo.Context) error { return tc.err }, e.srv.observeCallback(routeTokened))
			before := sumCallbacks(t, e)
			rec := e.get(t, path)

			// The response.
			require.Equal(t, tc.want.status, rec.Code)
			var body errorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			assert.Equal(t, tc.want.message, body.Error)
			if tc.want.retryAfter > 0 {
				assert.Equal(t, strconv.Itoa(int(tc.want.retryAfter/time.Second)), rec.Header().Get("Retry-After"))
			} else {
				assert.Empty(t, rec.Header().Get("Retry-After"))
			}

			// The callbacks counter.
			if tc.want.outcome == "" {
				assert.Equal(t, before, sumCallbacks(t, e), "no outcome must not be counted")
			} else {
				assert.Equal(t, 1.0, e.callbacks(routeTokened, tc.want.outcome))
				assert.Equal(t, before+1, sumCallbacks(t, e))
			}

			// The access log.
			lines := logLines(t, e.logs.String())
			require.Len(t, lines, 1)
			assert.EqualValues(t, tc.want.status, lines[0]["status"])
			assert.Equal(t, tc.want.outcome, lines[0]["outcome"])

			// The HTTP metrics.
			assert.Contains(t, e.srv.metricsText(t), fmt.Sprintf(
				`captchaflow_ingress_requests_total{code="%d",host="",method="GET",url="%s"} 1`, tc.want.status, path))
		})
	}
}
