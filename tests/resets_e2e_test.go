package tests

// Operator resets on the real stack (issue #20, finding 2): a task is reset the way the Web UI and `temporal
// workflow reset` do it (ResetWorkflowExecution to a workflow task, the signals after it reapplied) at each point
// that matters. Every reset run must complete without a failed workflow task other than the reset's own, deliver
// its code, and, where a submission was accepted before the reset point, pay nothing again: a run takes the
// callbacks of the runs it was reset from.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// resetPoint is the WorkflowTaskCompleted event of a run's history to reset to, 0 while it is not there yet.
type resetPoint func(h *historypb.History) int64

type resetCase struct {
	name  string
	spec  taskSpec
	input func(*captchaflow.Input) // adjusts the harness's input (nil: as it is)
	// slots: on a PROVIDER_THREADS=1 task queue whose only slot a holder keeps while this task queues.
	slots bool
	// phase is where the task is when the operator resets it ("": anywhere, completed included).
	phase captchaflow.Phase
	// to are the reset points, one per reset, each in the run the reset before made.
	to []resetPoint
	// paid: the provider accepted a submission before the first reset point.
	paid bool
	// firstCodeWins: the reset run submits again, and the first submission's code, which comes first, is the result.
	firstCodeWins bool
	firstID       string // the provider task of the first run's submission

	tr          *taskRun
	failedTasks []string // the final run's failed workflow tasks, resets' own aside
}

func TestE2E_OperatorResets(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := testContext(t, 6*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "resets")
	cases := resetCases()
	for _, c := range cases {
		c.tr = sc.add(1, c.spec)[0]
		if c.firstCodeWins {
			c.tr.paidAgainByReset = 1
		}
	}
	// The holder keeps the slot past the queued task's first re-ask (activities.SlotReaskInterval after the reset),
	// so the reset run's grant comes by signal, not in an answer.
	holder := sc.add(1, taskSpec{Kind: "holding the only slot", SolveMS: 45000})[0]
	t.Cleanup(func() {
		for _, id := range sc.ids() { // a task failing its workflow tasks forever must not outlive the test
			_ = s.c.TerminateWorkflow(context.Background(), id, "", "test over")
		}
	})
	require.NoError(t, s.simRules(ctx, sc.rules()))
	slotQueue := startSlotHolder(ctx, t, s, holder)
	sc.started = time.Now()
	for _, c := range cases {
		queue := ""
		if c.slots {
			queue = slotQueue
		}
		startTask(ctx, t, s, c.tr, c.input, queue)
	}
	// All at once, each timed by its own task (t.Parallel would run only GOMAXPROCS of them at a time).
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() { t.Run(c.name, func(t *testing.T) { c.run(ctx, t, s) }) })
	}
	wg.Wait()
	holder.Result, holder.Err = s.awaitResult(ctx, holder.ID)
	sc.ended = time.Now()
	checkResetFigures(ctx, t, sc, cases)
}

// resetCases are the points that matter, one task each.
func resetCases() []*resetCase {
	lostWait := func(in *captchaflow.Input) { in.LostAnswerWaitSeconds = 60 } // outlasts the solve after the reset
	lostAnswer := after(submitFailed(activities.FailureSubmitOutcomeUnknown))
	return []*resetCase{
		{name: "AfterTheCallback", spec: taskSpec{Kind: "reset after its callback", Via: captchaflow.ViaCallback},
			to: []resetPoint{after(callbackSignalled)}, paid: true},
		{name: "AfterDelivery", spec: taskSpec{Kind: "reset after delivery", Via: captchaflow.ViaCallback},
			to: []resetPoint{lastTaskOnceCompleted}, paid: true},
		{name: "LostAnswerWait", spec: taskSpec{Kind: "reset during a lost-answer wait", Faults: sim.FaultSubmitLost,
			SolveMS: 10000, Via: captchaflow.ViaCallback}, input: lostWait, phase: captchaflow.PhaseAwaitingCallback,
			to: []resetPoint{lostAnswer}, paid: true},
		{name: "QueuedForASlot", spec: taskSpec{Kind: "reset while queued for a slot"}, slots: true,
			// A stranded request ends at the deadline rather than outliving the test.
			input: func(in *captchaflow.Input) { in.DeadlineSeconds = 150 },
			phase: captchaflow.PhaseQueued, to: []resetPoint{after(slotAsked)}},
		{name: "ZeroBalancePause", spec: taskSpec{Kind: "reset during a zero-balance pause",
			Faults: "fail_submit=1,submit_error=" + sim.ErrorZeroBalance}, phase: captchaflow.PhaseAwaitingBalance,
			to: []resetPoint{after(submitFailed(activities.FailureProviderZeroBalance))}},
		// Issue 29, finding 3: before, the first task's callback was confirmed against the reset run's own task, found
		// not ready and dropped: the first paid code was lost and the second paid for.
		{name: "BeforeItsSubmission", spec: taskSpec{Kind: "reset to before its submission while the provider solves it",
			SolveMS: 6000, Via: captchaflow.ViaCallback}, phase: captchaflow.PhaseAwaitingCallback,
			to: []resetPoint{beforeAnAcceptedSubmission}, firstCodeWins: true},
		{name: "ResetOfAReset", spec: taskSpec{Kind: "reset twice during a lost-answer wait", Faults: sim.FaultSubmitLost,
			SolveMS: 15000, Via: captchaflow.ViaCallback}, input: lostWait, phase: captchaflow.PhaseAwaitingCallback,
			to: []resetPoint{lostAnswer, after(resetFailure)}, paid: true},
	}
}

// startSlotHolder starts a PROVIDER_THREADS=1 worker on a task queue of its own and holder on it, and returns the
// queue once holder holds its only slot.
func startSlotHolder(ctx context.Context, t *testing.T, s *stack, holder *taskRun) string {
	slotQueue := "captcha-resets-" + s.runID
	startPlanWorker(ctx, t, s, slotQueue, 1)
	t.Cleanup(func() {
		_ = s.c.TerminateWorkflow(context.Background(), activities.ThreadsWorkflowID(slotQueue, ""), "", "test over")
	})
	startTask(ctx, t, s, holder, nil, slotQueue)
	eventually(t, "the holder holds the only slot", time.Minute, 200*time.Millisecond, func() string {
		if st, err := s.state(ctx, holder.ID); err != nil || st.ProviderTaskID == "" {
			return fmt.Sprintf("phase %q (%v)", st.Phase, err)
		}
		return ""
	})
	return slotQueue
}

// startTask starts tr on queue ("": the default) with the harness's input, adjusted by input.
func startTask(ctx context.Context, t *testing.T, s *stack, tr *taskRun, input func(*captchaflow.Input), queue string) {
	in := s.input(tr.taskSpec)
	if input != nil {
		input(&in)
	}
	_, err := captchaflow.Start(ctx, s.c, tr.ID, in, captchaflow.StartOptions{TaskQueue: queue})
	require.NoError(t, err, tr.ID)
}

// run resets the task at each of its points in turn, then waits for the last reset run to end.
func (c *resetCase) run(ctx context.Context, t *testing.T, s *stack) {
	c.tr.Err = errors.New("the reset run did not end")
	id, run := c.tr.ID, ""
	for i, point := range c.to {
		h := c.watch(ctx, t, s, run, fmt.Sprintf("reset point %d of %d", i+1, len(c.to)), func(h *historypb.History) bool {
			return point(h) != 0
		})
		if c.failed(t) {
			return
		}
		if c.phase != "" {
			st, err := s.state(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, string(c.phase), st.Phase, "%s: where the operator resets it", id)
		}
		if i == 0 && c.firstCodeWins {
			c.firstID = submittedID(t, h)
		}
		var err error
		run, err = s.resetRun(ctx, id, run, point(h), "e2e: an operator resets the task ("+c.name+")")
		require.NoError(t, err, "%s: reset %d to event %d", id, i+1, point(h))
	}
	h := c.watch(ctx, t, s, run, "the reset run ends", closed)
	if c.failed(t) {
		return
	}
	assert.Equal(t, len(c.to), eventCountWhere(h, resetFailure), "%s: the resets' own failed workflow tasks", id)
	c.tr.Err = s.c.GetWorkflow(ctx, id, run).Get(ctx, &c.tr.Result)
	assert.NoError(t, c.tr.Err, "%s (%s): the reset run completes", id, c.tr.Kind)
	if c.firstCodeWins {
		assert.Equal(t, c.firstID, c.tr.Result.ProviderTaskID, "%s: the discarded submission's code, paid and first, is the result", id)
	}
}

// beforeAnAcceptedSubmission is a run's first workflow task once the Submit it scheduled was accepted.
func beforeAnAcceptedSubmission(h *historypb.History) int64 {
	if after(func(ev *historypb.HistoryEvent, activity string) bool {
		return activity == "Submit" && ev.GetActivityTaskCompletedEventAttributes() != nil
	})(h) == 0 {
		return 0
	}
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return ev.GetEventId()
		}
	}
	return 0
}

// submittedID is the provider task ID of h's first accepted Submit.
func submittedID(t *testing.T, h *historypb.History) string {
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			var r activities.SubmitResult
			if converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &r) == nil && r.ProviderTaskID != "" {
				return r.ProviderTaskID
			}
		}
	}
	t.Errorf("no accepted Submit in the history")
	return ""
}

// watch polls the history of run until done holds for it or a workflow task failed (retried forever: that is the
// answer too).
func (c *resetCase) watch(ctx context.Context, t *testing.T, s *stack, run, what string, done func(*historypb.History) bool) *historypb.History {
	var h *historypb.History
	eventually(t, c.tr.ID+": "+what, 3*time.Minute, 250*time.Millisecond, func() string {
		var err error
		if h, err = s.runHistory(ctx, c.tr.ID, run); err != nil {
			return err.Error()
		}
		if c.failedTasks = failedTasks(h); len(c.failedTasks) > 0 || done(h) {
			return ""
		}
		return fmt.Sprintf("not yet (%d events)", len(h.GetEvents()))
	})
	return h
}

// failed reports the run's failed workflow tasks, if any, as the task's failure.
func (c *resetCase) failed(t *testing.T) bool {
	if len(c.failedTasks) == 0 {
		return false
	}
	c.tr.Err = fmt.Errorf("%d failed workflow task(s), the first: %s", len(c.failedTasks), c.failedTasks[0])
	t.Errorf("%s (%s): %v", c.tr.ID, c.tr.Kind, c.tr.Err)
	return true
}

// resetRun resets run runID of id ("": the current run) to the workflow task that finished with event eventID, as
// the Web UI and `temporal workflow reset` do (the signals after it reapplied: the server's default), and returns
// the new run's ID.
func (s *stack) resetRun(ctx context.Context, id, runID string, eventID int64, reason string) (string, error) {
	resp, err := s.c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 s.namespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    reason,
		WorkflowTaskFinishEventId: eventID,
		RequestId:                 uuid.NewString(),
	})
	return resp.GetRunId(), err
}

// checkResetFigures notes and checks the figures: reset runs with a failed workflow task, and tasks reset after a
// paid submission that paid again; then every scenario's invariants (one delivery each, the right codes).
func checkResetFigures(ctx context.Context, t *testing.T, sc *scenario, cases []*resetCase) {
	provider := sc.simTasksByWorkflow(ctx)
	failedRuns, paid, paidAgain := 0, 0, 0
	for _, c := range cases {
		if len(c.failedTasks) > 0 {
			failedRuns++
		}
		if c.paid {
			paid++
			if len(provider[c.tr.ID]) > 1 {
				paidAgain++
			}
		}
	}
	sc.note("%d of %d reset runs failed a workflow task; %d of %d tasks reset after a paid submission paid again",
		failedRuns, len(cases), paidAgain, paid)
	assert.Zero(t, failedRuns, "reset runs with a failed workflow task")
	assert.Zero(t, paidAgain, "tasks that paid again after a reset")
	deliveries := sc.s.down.Deliveries()
	for _, c := range cases {
		c.tr.redelivered = len(c.to) // a reset run may repeat what the run it was reset from delivered
		ids := 0
		for _, d := range deliveries {
			if d.Payload.TaskID == c.tr.ID {
				ids++
			}
		}
		assert.Equal(t, 1, ids, "%s: one webhook-id however often it was reset, so the receiver drops repeats", c.tr.ID)
	}
	sc.verify(ctx)
}

// eventMatch tells whether ev is the event a reset point follows; activity is the activity an activity's
// completion or failure is of.
type eventMatch func(ev *historypb.HistoryEvent, activity string) bool

// after is the point right after the first event that matches: the first workflow task completed after it.
func after(match eventMatch) resetPoint {
	return func(h *historypb.History) int64 {
		types := map[int64]string{}
		found := false
		for _, ev := range h.GetEvents() {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				types[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			if found && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return ev.GetEventId()
			}
			scheduled := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() +
				ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId() // at most one is set
			found = found || match(ev, types[scheduled])
		}
		return 0
	}
}

func callbackSignalled(ev *historypb.HistoryEvent, _ string) bool {
	return ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == captchaflow.CallbackSignal
}

// slotAsked matches AcquireSlot's marker: the only local activity SolveCaptcha runs.
func slotAsked(ev *historypb.HistoryEvent, _ string) bool {
	return ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity"
}

func resetFailure(ev *historypb.HistoryEvent, _ string) bool {
	return ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
}

// submitFailed matches a Submit that failed with the application failure type typ.
func submitFailed(typ string) eventMatch {
	return func(ev *historypb.HistoryEvent, activity string) bool {
		return activity == "Submit" &&
			ev.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType() == typ
	}
}

// lastTaskOnceCompleted is a completed run's last workflow task: `temporal workflow reset --type LastWorkflowTask`
// after delivery.
func lastTaskOnceCompleted(h *historypb.History) int64 {
	evs := h.GetEvents()
	if len(evs) == 0 || evs[len(evs)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
		return 0
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return evs[i].GetEventId()
		}
	}
	return 0
}

// failedTasks are the messages of a history's failed workflow tasks, resets' own aside.
func failedTasks(h *historypb.History) []string {
	var out []string
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil && !resetFailure(ev, "") {
			out = append(out, fmt.Sprintf("%s: %s", a.GetCause(), a.GetFailure().GetMessage()))
		}
	}
	return out
}

// closed tells whether a run's history ends with its close event.
func closed(h *historypb.History) bool {
	evs := h.GetEvents()
	if len(evs) == 0 {
		return false
	}
	switch evs[len(evs)-1].GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

// eventCountWhere counts the events of h that match.
func eventCountWhere(h *historypb.History, match eventMatch) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if match(ev, "") {
			n++
		}
	}
	return n
}
