package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
)

// wfState is what Temporal itself (not the worker) says about a workflow.
type wfState struct {
	Status         enumspb.WorkflowExecutionStatus
	Phase          string
	ProviderTaskID string
	Pending        []*workflowpb.PendingActivityInfo
}

// state asks Temporal (DescribeWorkflow) for the status, the pending activities and the phase and
// provider-task-ID search attributes.
func (s *stack) state(ctx context.Context, id string) (wfState, error) {
	desc, err := s.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return wfState{}, err
	}
	resp := desc.RawResponse
	info := resp.GetWorkflowExecutionInfo()
	st := wfState{Status: info.GetStatus(), Pending: resp.GetPendingActivities()}
	fields := info.GetSearchAttributes().GetIndexedFields()
	dc := converter.GetDefaultDataConverter()
	if p := fields[captchaflow.PhaseKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &st.Phase)
	}
	if p := fields[captchaflow.TaskIDKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &st.ProviderTaskID)
	}
	return st, nil
}

// awaitingQuietly: the task waits for its callback and no activity is running on a worker, so a worker or server
// crash now cannot lose an activity attempt.
func awaitingQuietly(st wfState) bool {
	return st.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
		st.Phase == string(captchaflow.PhaseAwaitingCallback) && len(st.Pending) == 0
}

// waitStates polls Temporal until cond holds for every task in ids, and returns their last states.
func (sc *scenario) waitStates(ctx context.Context, ids []string, what string, timeout time.Duration, cond func(wfState) bool) map[string]wfState {
	sc.t.Helper()
	deadline := time.Now().Add(timeout)
	states := map[string]wfState{}
	pending := slices.Clone(ids)
	for {
		var still []string
		for _, id := range pending {
			st, err := sc.s.state(ctx, id)
			if err == nil {
				states[id] = st
			}
			if err != nil || !cond(st) {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			return states
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, id := range pending {
				desc = append(desc, fmt.Sprintf("%s: %+v", id, states[id]))
			}
			sc.t.Fatalf("%s: %d of %d tasks not there within %s:\n%s", what, len(pending), len(ids), timeout, strings.Join(desc, "\n"))
		}
		time.Sleep(150 * time.Millisecond) // poll interval of a bounded wait
	}
}

// awaitResult waits for the workflow's result, riding out transient errors (a restarting server) until ctx ends.
func (s *stack) awaitResult(ctx context.Context, id string) (captchaflow.Result, error) {
	var res captchaflow.Result
	backoff := 100 * time.Millisecond
	for {
		err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &res)
		if err == nil {
			return res, nil
		}
		var execErr *temporal.WorkflowExecutionError
		if errors.As(err, &execErr) {
			return res, err // the workflow itself failed: that is the answer
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// eventually polls cond (which says why it is not yet true) every interval until it returns "" or timeout passes.
func eventually(t *testing.T, what string, timeout, interval time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(interval)
	}
}
