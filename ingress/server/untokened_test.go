package server

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
)

func found(workflowID string) *workflowservice.ListWorkflowExecutionsResponse {
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflow.WorkflowExecutionInfo{{
		Execution: &common.WorkflowExecution{WorkflowId: workflowID, RunId: "run-1"},
	}}}
}

func TestUntokenedCallbackResolvesAndSignalsUnauthenticated(t *testing.T) {
	for name, send := range map[string]func(e *testEnv) int{
		"GET": func(e *testEnv) int { return e.get(t, "/callback?id=73491&code=abc").Code },
		"POST form": func(e *testEnv) int {
			return e.do(t, http.MethodPost, "/callback", formBody(url.Values{"id": {"73491"}, "code": {"abc"}}),
				"application/x-www-form-urlencoded").Code
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			e.fake.listFn = func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
				return found("task-7"), nil
			}
			require.Equal(t, http.StatusOK, send(e))
			e.drainQueue(t)
			assert.Equal(t, []string{"CaptchaTaskId = '73491' AND ExecutionStatus = 'Running'"}, e.fake.listQueries())
			assert.Equal(t, []sentSignal{{
				WorkflowID: "task-7",
				Name:       captchaflow.CallbackSignal,
				Callback:   captchaflow.Callback{ProviderTaskID: "73491", Code: "abc", Authenticated: false},
			}}, e.fake.sent())
			assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeSignalled))
		})
	}
}

func TestUntokenedCallbackRetriesUntilVisible(t *testing.T) {
	e := newTestEnv(t)
	e.fake.listFn = func(_ context.Context, call int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		switch call {
		case 1:
			return &workflowservice.ListWorkflowExecutionsResponse{}, nil // not indexed yet
		case 2:
			return nil, serviceerror.NewUnavailable("visibility hiccup")
		}
		return found("task-7"), nil
	}
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=abc").Code)
	e.drainQueue(t)
	assert.Len(t, e.fake.listQueries(), 3)
	require.Len(t, e.fake.sent(), 1)
	assert.Equal(t, "task-7", e.fake.sent()[0].WorkflowID)
}

func TestUntokenedCallbackNotFoundIsANoOp(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.LookupTimeout = 100 * time.Millisecond })
	start := time.Now()
	rec := e.get(t, "/callback?id=1&code=abc")
	elapsed := time.Since(start)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok"}`, rec.Body.String(), "must not tell an anonymous caller whether the task exists")
	assert.Less(t, elapsed, 50*time.Millisecond, "answered before the lookup, not after its timeout")
	e.drainQueue(t)
	assert.Empty(t, e.fake.sent())
	assert.Greater(t, len(e.fake.listQueries()), 1, "an empty answer is retried")
	assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeLateOrUnknown))
	assert.Contains(t, e.logs.String(), `"msg":"untokened callback processed"`)
	assert.Contains(t, e.logs.String(), `"outcome":"queued"`, "the request's own line says the outcome comes later")
}

func TestUntokenedCallbackWorkflowCompletedMeanwhile(t *testing.T) {
	e := newTestEnv(t)
	e.fake.listFn = func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return found("task-7"), nil
	}
	e.fake.signalFn = func(context.Context) error { return serviceerror.NewNotFound("workflow execution already completed") }
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=abc").Code)
	e.drainQueue(t)
	assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeLateOrUnknown))
}

func TestUntokenedCallbackTemporalDown(t *testing.T) {
	for name, list := range map[string]func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error){
		"unavailable": func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			return nil, serviceerror.NewUnavailable("down")
		},
		"hangs": func(ctx context.Context, _ int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			return nil, blockUntilDone(ctx)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, func(c *config.Ingress) { c.CallbackBurst = 1 })
			e.fake.listFn = list
			start := time.Now()
			// Answered before Temporal is asked: the outage shows in the count and the log, not the answer.
			require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=abc").Code)
			assert.Less(t, time.Since(start), 50*time.Millisecond)
			e.drainQueue(t)
			assert.Empty(t, e.fake.sent())
			assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeUnavailable))
			assert.Contains(t, e.logs.String(), `"level":"WARN","msg":"untokened callback processed"`)
			// Not handed to Temporal, so the task's budget (burst 1 here) was given back for a later callback.
			assert.True(t, e.srv.untokenedBudget.take("1", e.srv.now()))
		})
	}
}

func TestUntokenedCallbackRejectsIDsThatCouldEscapeTheQuery(t *testing.T) {
	for _, id := range []string{"1' OR '1'='1", "1 OR 1=1", "a\"b", "", "x" + string(make([]byte, 64))} {
		e := newTestEnv(t)
		rec := e.get(t, "/callback?"+url.Values{"id": {id}, "code": {"abc"}}.Encode())
		requireError(t, rec, http.StatusBadRequest, "id:")
		assert.Empty(t, e.fake.listQueries(), "id %q must not reach visibility", id)
		assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeBadRequest))
	}
	e := newTestEnv(t)
	requireError(t, e.get(t, "/callback?id=1"), http.StatusBadRequest, "code: required")
}
