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

// changeFleetPacing: the task picks each submission's provider itself (the slot ask's local activity), so that Submit
// runs on that provider's paced queue. Recorded only where a worker has several providers and paces one: with one,
// its queue is known without asking, and a task queue is a routing choice that replay does not compare.
const changeFleetPacing = "provider-queues"

// queueWait bounds a request's wait on a provider's queue; then a Submit moves on (the provider goes last) and a
// Poll asks on the task's own queue. Well past a burst's wait at the account's rate, it only meets a queue no worker
// polls.
const queueWait = 5 * time.Minute

// pacing is the task's choice of pinning, made at its first submission.
type pacing struct{ decided, pins bool }

// pins tells whether this task pins each submission's provider; a replay reads the marker wherever one was recorded,
// whatever this worker paces.
func (s *solver) pins(ctx workflow.Context) bool {
	if !s.pace.decided {
		s.pace.decided = true
		if workflow.IsReplaying(ctx) || s.severalPaced() {
			s.pace.pins = workflow.GetVersion(ctx, changeFleetPacing, workflow.DefaultVersion, 1) == 1
		}
	}
	return s.pace.pins
}

// severalPaced: the worker has several providers and paces one now, so Submit cannot choose on one queue.
func (s *solver) severalPaced() bool {
	names := s.settings.Providers
	return len(names) > 1 && slices.ContainsFunc(names, func(p string) bool { return s.queueOf(p, activities.SubmitQueue) != "" })
}

// queueOf is where a request of kind to provider ("": the one Submit chooses) runs: its account's paced queue while
// the worker paces it, else the task's own (""); with several providers to choose from, the task's own.
func (s *solver) queueOf(provider, kind string) string {
	if names := s.settings.Providers; provider == "" && len(names) == 1 {
		provider = names[0]
	} else if provider == "" && len(names) > 1 {
		return ""
	}
	return s.settings.Pacing.Queue(provider, kind)
}

// pin is where the submission goes (the slot's ticket, else, pinning, the one this worker's routing ranks first, as
// Submit would, and why) and its submit queue; not pinning, Submit chooses, on the queue queueOf says.
func (s *solver) pin(ctx workflow.Context) (t activities.SlotTicket, err error) {
	pins := s.pins(ctx) // asked first: a pinning replay's marker is read even when the slot names the provider
	if s.admission.on {
		return s.admission.ticket, nil
	} else if !pins {
		return activities.SlotTicket{Queue: s.queueOf("", activities.SubmitQueue)}, nil
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
func (s *solver) resultsQueue(sub *submission) string {
	if sub.unpaced {
		return ""
	}
	return s.queueOf(sub.Provider, activities.ResultsQueue)
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
