package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// Slots of PROVIDER_THREADS, on the task's side: before each in.php request the task queues for a slot (phase
// queued) and holds it until that submission resolves.

// acquireStartToClose bounds one AcquireSlot attempt (one signal-with-start).
const acquireStartToClose = 10 * time.Second

// slotsInEffect decides, once per task, whether it takes slots. It asks changeProviderThreads only when this
// worker has PROVIDER_THREADS set or the task is being replayed (so the recorded answer is found whatever this
// worker's setting): a task that runs on a worker without the setting calls nothing new and records no marker.
func (s *solver) slotsInEffect(ctx workflow.Context) bool {
	if s.slotsDecided {
		return s.slots
	}
	s.slotsDecided = true
	s.slots = (s.threads > 0 || workflow.IsReplaying(ctx)) && changed(ctx, changeProviderThreads)
	if s.slots {
		s.grants = workflow.GetSignalChannel(ctx, activities.SlotGrantedSignal)
	}
	return s.slots
}

// acquireSlot queues this submission for a slot and waits, in PhaseQueued, until the semaphore grants it or the
// deadline comes. On any error the caller still releases (which also takes the task out of the queue).
func (s *solver) acquireSlot(ctx workflow.Context, seq int) error {
	s.setPhaseSearchable(ctx, captchaflow.PhaseQueued)
	info := workflow.GetInfo(ctx)
	queuedAt := workflow.Now(ctx)
	req := activities.SlotRequest{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		Seq: seq, Threads: s.threads, RequestedAt: queuedAt}
	remaining := s.remaining(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(acquireStartToClose, remaining),
		ScheduleToCloseTimeout: remaining,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
	})
	if err := workflow.ExecuteActivity(actx, acts.AcquireSlot, req).Get(ctx, nil); err != nil {
		if retryBudgetSpent(err) {
			return deadlineExceeded(s.in.DeadlineSeconds)
		}
		return err
	}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	deadline := workflow.NewTimer(timerCtx, s.remaining(ctx))
	for {
		var granted, expired bool
		var err error
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.grants, func(c workflow.ReceiveChannel, _ bool) {
			var g activities.SlotGrant
			if c.ReceiveAsync(&g) && g.Seq == seq {
				granted = true
			}
		})
		sel.AddFuture(deadline, func(f workflow.Future) {
			expired = true
			err = f.Get(ctx, nil)
		})
		sel.Select(ctx)
		switch {
		case granted:
			workflow.GetMetricsHandler(ctx).Timer(MetricSlotQueueWait).Record(workflow.Now(ctx).Sub(queuedAt))
			return nil
		case expired && err != nil:
			return err // cancelled
		case expired:
			return deadlineExceeded(s.in.DeadlineSeconds)
		}
	}
}

// releaseSlot gives the slot of submission seq back (or leaves the queue), on every way out of the attempt:
// result, unsolvable, failure, cancellation (a disconnected context, so a cancelled task still releases). A
// failure to signal is logged: the semaphore's reclaim check frees the slot once the task has ended.
func (s *solver) releaseSlot(ctx workflow.Context, seq int) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	info := workflow.GetInfo(ctx)
	err := workflow.SignalExternalWorkflow(dctx, activities.ThreadsWorkflowID(info.TaskQueueName), "",
		activities.ReleaseSlotSignal, activities.SlotRelease{WorkflowID: info.WorkflowExecution.ID,
			RunID: info.WorkflowExecution.RunID, Seq: seq}).Get(dctx, nil)
	if err != nil {
		s.logger.Warn("could not release the provider slot; the semaphore reclaims it when the task ends", "Error", err)
	}
}

// drainGrants consumes grants that crossed a release (they change nothing), so completing is not held up.
func (s *solver) drainGrants() {
	if s.grants == nil {
		return
	}
	var g activities.SlotGrant
	for s.grants.ReceiveAsync(&g) {
	}
}

func fmtSlots(st activities.SemaphoreState) string {
	return fmt.Sprintf("**provider threads:** %d/%d in use · %d queued", len(st.Holders), st.Threads, len(st.Queue))
}
