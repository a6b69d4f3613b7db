package tests

// A reset of a reset: a stray grant that names the middle run (its ask could not be answered, so it submitted without
// a slot, and the semaphore granted later) is sent back by the middle run, a ReleaseSlot marker in its history. The
// run reset from it replays that history under its own run ID: it must send the grant back too, or its replay
// lacks the marker (a non-determinism error, the reset run stuck).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/workflows"
)

func TestE2E_ResetOfAResetReplaysAStrayGrantsRelease(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	queue := "reset-twice-" + s.runID
	var mu sync.Mutex
	var released []activities.SlotRequest
	w := worker.New(s.c, queue, worker.Options{})
	workflows.Register(w, &activities.Activities{ProviderThreads: 1}, workflows.Settings{ProviderThreads: 1})
	override := func(fn any, name string) {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name, DisableAlreadyRegisteredCheck: true})
	}
	override(func(context.Context, activities.SlotAsk) (activities.SlotTicket, error) { // its signal may have landed
		return activities.SlotTicket{}, temporal.NewNonRetryableApplicationError("the semaphore did not answer", "Unavailable", nil)
	}, activities.AcquireSlotName)
	override(func(_ context.Context, rel activities.SlotRequest) error {
		mu.Lock()
		defer mu.Unlock()
		released = append(released, rel)
		return nil
	}, activities.ReleaseSlotName)
	override(func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
		return activities.SubmitResult{ProviderTaskID: "P1"}, nil
	}, "Submit")
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	id := queue
	in := captchaflow.Input{Method: "userrecaptcha", Params: captchaflow.Params{"googlekey": "6Le-key", "pageurl": "https://example.com/"},
		CallbackTimeoutSeconds: 600, DeadlineSeconds: 900}
	_, err := captchaflow.Start(ctx, s.c, id, in, captchaflow.StartOptions{TaskQueue: queue})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.c.TerminateWorkflow(context.Background(), id, "", "test over") })
	submitted := func() bool {
		v, err := s.c.QueryWorkflow(ctx, id, "", captchaflow.StatusQuery)
		var st captchaflow.Status
		return err == nil && v.Get(&st) == nil && st.ProviderTaskID == "P1"
	}
	require.Eventually(t, submitted, 30*time.Second, 100*time.Millisecond, "the first run submitted without a slot")
	resetTo(ctx, t, s, id, false)
	require.Eventually(t, submitted, 30*time.Second, 100*time.Millisecond, "the reset run asked and submitted as itself")
	desc, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	middle := desc.WorkflowExecution.RunID

	grant := activities.SlotRequest{Seq: 1, RunID: middle, Semaphore: activities.ThreadsWorkflowID(queue, "")}
	require.NoError(t, s.c.SignalWorkflow(ctx, id, middle, activities.SlotGrantedSignal, grant))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(released) == 1 }, 30*time.Second,
		100*time.Millisecond, "the middle run sends the stray grant back")
	// One more workflow task after it (a grant naming no run is ignored), so that a reset to the last one replays it.
	require.NoError(t, s.c.SignalWorkflow(ctx, id, middle, activities.SlotGrantedSignal, activities.SlotRequest{Seq: 9}))
	require.Eventually(t, func() bool { return taskCompletedAfterSignals(ctx, s, id, middle, 2) }, 30*time.Second,
		100*time.Millisecond, "the middle run took both signals")
	h, err := s.runHistory(ctx, id, middle)
	require.NoError(t, err)
	recordNew(t, s, map[string]string{"slot-stray-grant-reset-run": id})
	assert.NoError(t, replay(newReplayer(), h, "00000000-0000-4000-8000-0000reset-two"), "the middle run replayed as its reset run")

	resetTo(ctx, t, s, id, true)
	final, err := s.c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err)
	var failed *historypb.WorkflowTaskFailedEventAttributes
	require.Eventually(t, func() bool {
		fh, err := s.runHistory(ctx, id, final.WorkflowExecution.RunID)
		if err != nil {
			return false
		}
		evs := fh.GetEvents()
		for _, ev := range evs {
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil && f.GetCause() != enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				failed = f
				return true
			}
		}
		return evs[len(evs)-1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	}, 30*time.Second, 100*time.Millisecond, "the final run's first workflow task ended")
	assert.Nil(t, failed, "the final run's workflow task failed: %v", failed.GetFailure().GetMessage())
}

// taskCompletedAfterSignals tells whether run runID of id took n signals and completed a workflow task after them.
func taskCompletedAfterSignals(ctx context.Context, s *stack, id, runID string, n int) bool {
	h, err := s.runHistory(ctx, id, runID)
	if err != nil {
		return false
	}
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			n--
		} else if n <= 0 && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}
