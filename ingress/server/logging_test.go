package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
)

func logLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		lines = append(lines, line)
	}
	return lines
}

func TestOneLogLinePerCallbackWithSafeFields(t *testing.T) {
	e := newTestEnv(t)
	rec := e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"73491"}, "code": {"x"}}))
	require.Equal(t, http.StatusOK, rec.Code)

	lines := logLines(t, e.logs.String())
	require.Len(t, lines, 1)
	line := lines[0]
	assert.Equal(t, "callback", line["msg"])
	assert.Equal(t, "INFO", line["level"])
	assert.Equal(t, testWorkflowID, line["workflow_id"])
	assert.Equal(t, "73491", line["provider_task_id"])
	assert.Equal(t, outcomeSignalled, line["outcome"])
	assert.Equal(t, routeTokened, line["callback_route"])
	assert.Equal(t, "192.0.2.1", line["client_ip"], "httptest's client: where an operator learns the provider's sources")
	assert.Equal(t, "/callback/:workflow_id", line["route"])
	assert.EqualValues(t, http.StatusOK, line["status"])
	assert.Contains(t, line, "duration_ms")
}

func TestLogsNeverContainTokenSecretOrQuery(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.CallbackSecretPrevious = testPreviousSecret })
	tokens := []string{
		callbackauth.Token(testSecret, testWorkflowID),
		callbackauth.Token(testPreviousSecret, testWorkflowID),
		callbackauth.Token("attacker-guess", testWorkflowID),
	}
	fields := url.Values{"id": {"73491"}, "code": {"secret-solution-code"}}

	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))
	e.get(t, tokenedURL(testWorkflowID, testPreviousSecret, fields))
	e.get(t, tokenedURL(testWorkflowID, "attacker-guess", fields))
	e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"73491"}}))
	body, ct := multipartBody(t, map[string]string{"id": "73491", "code": "secret-solution-code"})
	e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil), body, ct)
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewUnavailable("down") }
	e.get(t, tokenedURL(testWorkflowID, testSecret, fields))
	e.fake.listFn = func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return found(testWorkflowID), nil
	}
	e.get(t, "/callback?id=73491&code=secret-solution-code")
	e.drainQueue(t) // the untokened callback's lookup and signal run in the background, and log their own line
	e.get(t, "/readyz")

	logs := e.logs.String()
	require.Len(t, logLines(t, logs), 9, "one line per request, and one for the untokened callback's background half")
	for _, secret := range append(tokens, testSecret, testPreviousSecret, "secret-solution-code", "t=", "?") {
		assert.NotContains(t, logs, secret)
	}
}
