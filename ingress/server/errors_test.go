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
		want Error
	}{
		{"bad request", badRequest("id", "required"),
			Error{Status: http.StatusBadRequest, Message: "id: required", Outcome: outcomeBadRequest}},
		{"wrapped bad request", fmt.Errorf("parsing: %w", badRequest("code", "too long")),
			Error{Status: http.StatusBadRequest, Message: "code: too long", Outcome: outcomeBadRequest}},
		{"forbidden", errForged,
			Error{Status: http.StatusForbidden, Message: "missing or invalid callback token", Outcome: outcomeForged}},
		{"unavailable", unavailable(errors.New("secret temporal detail")),
			Error{Status: http.StatusServiceUnavailable, Message: unavailableMessage, Outcome: outcomeUnavailable, RetryAfter: 5 * time.Second}},
		{"rate limited", rateLimited(2 * time.Second),
			Error{Status: http.StatusTooManyRequests, Message: "too many untokened callbacks, retry later", Outcome: outcomeRateLimited, RetryAfter: 2 * time.Second}},
		{"queue full", errQueueFull,
			Error{Status: http.StatusServiceUnavailable, Message: unavailableMessage, Outcome: outcomeDropped, RetryAfter: 5 * time.Second}},
		{"echo 413", echo.ErrStatusRequestEntityTooLarge,
			Error{Status: http.StatusRequestEntityTooLarge, Message: "Request Entity Too Large", Outcome: outcomeBadRequest}},
		{"echo 4xx without a string message", echo.NewHTTPError(http.StatusConflict, map[string]int{"n": 1}),
			Error{Status: http.StatusConflict, Message: "Conflict", Outcome: outcomeBadRequest}},
		{"echo 5xx", echo.NewHTTPError(http.StatusBadGateway, "upstream"),
			Error{Status: http.StatusBadGateway, Message: "upstream", Outcome: ""}},
		{"unknown", errors.New("secret internal detail"),
			Error{Status: http.StatusInternalServerError, Message: "Internal Server Error", Outcome: ""}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := *resolveError(tc.err)
			got.Err = nil // logged, never sent
			require.Equal(t, tc.want, got)

			e := newTestEnv(t)
			path := fmt.Sprintf("/test-error/%d", i)
			e.srv.echo.GET(path, func(echo.Context) error { return tc.err }, e.srv.callbackRoute(routeTokened))
			before := sumCallbacks(t, e)
			rec := e.get(t, path)

			// The response.
			require.Equal(t, tc.want.Status, rec.Code)
			var body struct{ Error string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			assert.Equal(t, tc.want.Message, body.Error)
			if tc.want.RetryAfter > 0 {
				assert.Equal(t, strconv.Itoa(int(tc.want.RetryAfter/time.Second)), rec.Header().Get("Retry-After"))
			} else {
				assert.Empty(t, rec.Header().Get("Retry-After"))
			}

			// The callbacks counter.
			if tc.want.Outcome == "" {
				assert.Equal(t, before, sumCallbacks(t, e), "no outcome must not be counted")
			} else {
				assert.Equal(t, 1.0, e.callbacks(routeTokened, tc.want.Outcome))
				assert.Equal(t, before+1, sumCallbacks(t, e))
			}

			// The access log.
			lines := logLines(t, e.logs.String())
			require.Len(t, lines, 1)
			assert.EqualValues(t, tc.want.Status, lines[0]["status"])
			assert.Equal(t, tc.want.Outcome, lines[0]["outcome"])

			// The HTTP metrics.
			assert.Contains(t, e.srv.metricsText(t), fmt.Sprintf(
				`captchaflow_ingress_requests_total{code="%d",host="",method="GET",url="%s"} 1`, tc.want.Status, path))
		})
	}
}
