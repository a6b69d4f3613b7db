package workflows

import (
	"errors"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// changeFleetPacing: the workflow picks each submission's provider and runs Submit and Poll on the provider's paced
// queues (activities.ProviderQueue), so the account's budgets hold across the fleet; a task without the marker
// submits on its own queue, Submit choosing, as 1.0 did (or on the queue its admission ticket names).
const changeFleetPacing = "provider-queues"

// queueWait bounds a request's wait on a provider's queue; then a Submit moves on (the provider goes last) and a
// Poll asks on the task's own queue. Well past a burst's wait at the account's rate, it only meets a queue no worker
// polls.
const queueWait = 5 * time.Minute

// pacing is the task's choice, made at its first submission and recorded.
type pacing struct{ decided, on bool }

// paced tells whether this task runs its provider requests on the paced queues.
func (s *solver) paced(ctx workflow.Context) bool {
	if !s.pace.decided {
		s.pace.decided = true
		s.pace.on = workflow.GetVersion(ctx, changeFleetPacing, workflow.DefaultVersion, 1) == 1
	}
	return s.pace.on
}

// pin is where the submission goes: the slot's provider, else the one this worker's routing ranks first (as Submit
// would), why, and its submit queue ("": the task's own queue, unpaced).
func (s *solver) pin(ctx workflow.Context) (t activities.SlotTicket, err error) {
	if !s.paced(ctx) || s.admission.on {
		return s.admission.ticket, nil
	}
	ask := s.slotAsk(ctx, len(s.table.subs)+1)
	ask.RouteOnly = true
	err = workflow.ExecuteLocalActivity(localOptions(ctx, s.remaining(ctx)), activities.AcquireSlotName, ask).Get(ctx, &t)
	return t, err
}

// onQueue runs an activity on queue within queueWait (nothing: on the task's own), the caller's tasks queued fairly
// against other callers', at priority (0: the queue's default, first come first served).
func (s *solver) onQueue(ctx workflow.Context, queue string, priority int) workflow.Context {
	if queue == "" {
		return ctx
	}
	ctx = workflow.WithScheduleToStartTimeout(workflow.WithTaskQueue(ctx, queue), min(queueWait, max(s.remaining(ctx), time.Second)))
	return workflow.WithPriority(ctx, temporal.Priority{FairnessKey: s.in.Caller, PriorityKey: priority})
}

// pollPriority is a poll's priority key on its results queue: the nearer its task's deadline, the sooner it is served
// (1: within a minute, … 5: an hour or more away).
func pollPriority(left time.Duration) int {
	if i := slices.IndexFunc([]time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour},
		func(d time.Duration) bool { return left < d }); i >= 0 {
		return i + 1
	}
	return 5
}

// resultsQueue is where sub's polls run: its provider's paced results queue, unless that queue was not served.
func (s *solver) resultsQueue(ctx workflow.Context, sub *submission) string {
	if !s.pace.on || sub.unpaced {
		return ""
	}
	return activities.ProviderQueue(workflow.GetInfo(ctx).TaskQueueName, sub.Provider, activities.ResultsQueue)
}

// unserved moves on from a provider whose queue no worker took the Submit from: nothing was sent, nothing counts.
func (s *solver) unserved(ctx workflow.Context, sub *submission) outcome {
	s.logger.Warn("no worker took the submission from its provider's queue: routing it again", "Provider", sub.pin, "Within", queueWait)
	count(ctx, MetricQueueUnserved, "provider", sub.pin)
	s.route.last(sub.pin)
	return outcome{kind: outBalance}
}

// last makes provider the one its next submissions try last: the latest avoided goes behind the others.
func (r *route) last(provider string) {
	r.avoid = append(slices.DeleteFunc(r.avoid, func(p string) bool { return p == provider }), provider)
}

// notStarted tells whether err is an activity no worker started within its schedule-to-start timeout.
func notStarted(err error) bool {
	t, ok := errors.AsType[*temporal.TimeoutError](err)
	return ok && t.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}
