package server

import (
	"context"
	"errors"
	"fmt"
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
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
)

func found(workflowID string) *workflowservice.ListWorkflowExecutionsResponse {
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflow.WorkflowExecutionInfo{{
		Execution: &common.WorkflowExecution{WorkflowId: workflowID, RunId: "run-1"},
	}}}
}

// #15 §3a: an untokened callback reaches the workflow as the UntokenedUpdate, waiting only for its acceptance, and
// carries no code; the lookup matches only a task waiting for its callback or polling.
func TestUntokenedCallbackIsAnUpdateWithoutTheCode(t *testing.T) {
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
			assert.Equal(t, []string{"CaptchaTaskId = '73491' AND ExecutionStatus = 'Running' AND " +
				"CaptchaPhase IN ('awaiting_callback', 'polling')"}, e.fake.listQueries())
			assert.Equal(t, []sentUpdate{{
				WorkflowID: "task-7",
				Name:       captchaflow.UntokenedUpdate,
				Stage:      client.WorkflowUpdateStageAccepted,
				Hint:       captchaflow.UntokenedHint{ProviderTaskID: "73491"},
			}}, e.fake.sentUpdates())
			assert.Empty(t, e.fake.sent(), "no signal: the code never reaches history")
			assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeSignalled))
		})
	}
}

// A rejected update (the validator said no) is answered like any accepted callback, counted untokened_rejected,
// and final for its provider task: later callbacks for it cost neither a lookup nor an update.
func TestRejectedUntokenedUpdateIsFinalForTheProviderTask(t *testing.T) {
	e := newTestEnv(t)
	findsWaitingTask(e)
	e.fake.updateFn = func(_ context.Context, u sentUpdate) (error, error) {
		if u.Hint.ProviderTaskID == waitingProviderID {
			return errors.New("untokened hints spent"), nil
		}
		return nil, nil
	}
	rec := e.get(t, "/callback?id="+waitingProviderID+"&code=first")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
	require.Eventually(t, func() bool { return e.callbacks(routeUntokened, outcomeUntokenedRejected) == 1 },
		5*time.Second, time.Millisecond)

	for i := range 10 {
		require.Equal(t, http.StatusOK, e.get(t, fmt.Sprintf("/callback?id=%s&code=more-%d", waitingProviderID, i)).Code)
	}
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=other&code=c").Code)
	e.drainQueue(t)
	assert.Equal(t, 10.0, e.callbacks(routeUntokened, outcomeSuppressed))
	assert.Len(t, e.fake.listQueries(), 2, "only the first one and the other provider task were looked up")
	assert.Empty(t, e.fake.sent(), "a rejection is no reason to signal")
}

// #15 §3e: one request causes one visibility query at most, taken untokenedLookupDelay after it arrived (so it
// does not race its task's own search-attribute update); a task not visible then is left to the workflow's poll.
func TestUntokenedCallbackGetsOneLookupAfterTheDelay(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.LookupTimeout = time.Second })
	e.srv.lookupDelay = 100 * time.Millisecond
	var lookedUpAfter time.Duration
	sent := time.Now()
	e.fake.listFn = func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		lookedUpAfter = time.Since(sent)
		return &workflowservice.ListWorkflowExecutionsResponse{}, nil // not (or no longer) waiting
	}
	rec := e.get(t, "/callback?id=1&code=abc")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Less(t, time.Since(sent), 50*time.Millisecond, "answered before the lookup, not after its delay")
	e.drainQueue(t)
	assert.Len(t, e.fake.listQueries(), 1)
	assert.GreaterOrEqual(t, lookedUpAfter, 100*time.Millisecond)
	assert.Empty(t, e.fake.sentUpdates())
	assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeLateOrUnknown))
	assert.Contains(t, e.logs.String(), `"msg":"untokened callback processed"`)
	assert.Contains(t, e.logs.String(), `"outcome":"queued"`, "the request's own line says the outcome comes later")
}

func TestUntokenedCallbackWorkflowCompletedMeanwhile(t *testing.T) {
	e := newTestEnv(t)
	findsWaitingTask(e)
	e.fake.updateFn = func(context.Context, sentUpdate) (error, error) {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=abc").Code)
	e.drainQueue(t)
	assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeLateOrUnknown))
}

func TestUntokenedCallbackTemporalDown(t *testing.T) {
	unavailableList := func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return nil, serviceerror.NewUnavailable("down")
	}
	hangingList := func(ctx context.Context, _ int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return nil, blockUntilDone(ctx)
	}
	// A workflow whose worker is down cannot accept an update: the call waits until its own bound.
	hangingUpdate := func(ctx context.Context, _ sentUpdate) (error, error) {
		return nil, client.NewWorkflowUpdateServiceTimeoutOrCanceledError(blockUntilDone(ctx))
	}
	for name, tc := range map[string]struct {
		list   func(context.Context, int) (*workflowservice.ListWorkflowExecutionsResponse, error)
		update func(context.Context, sentUpdate) (error, error)
	}{
		"visibility unavailable": {list: unavailableList},
		"visibility hangs":       {list: hangingList},
		"update never accepted":  {update: hangingUpdate},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, func(c *config.Ingress) { c.CallbackBurst = 1 })
			findsWaitingTask(e)
			if tc.list != nil {
				e.fake.listFn = tc.list
			}
			e.fake.updateFn = tc.update
			start := time.Now()
			// Answered before Temporal is asked: the outage shows in the count and the log, not the answer.
			require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=abc").Code)
			assert.Less(t, time.Since(start), 50*time.Millisecond)
			e.drainQueue(t)
			assert.Less(t, time.Since(start), 2*time.Second, "bounded by LookupTimeout and SignalTimeout")
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
