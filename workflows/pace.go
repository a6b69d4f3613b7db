package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// queueWait bounds a request's wait on a provider's queue, then a Submit moves on (the provider last) and a Poll asks on
// the task's own queue; well past a burst's wait at the account's rate, it only meets a queue no worker polls.
const queueWait = 5 * time.Minute

// pins tells whether this task pins each submission's provider; a replay reads any marker recorded, whatever it paces.
func (s *solver) pins(ctx workflow.Context) bool {
	if !s.pinDecided {
		s.pinDecided = true
		s.pinning = (workflow.IsReplaying(ctx) || s.severalPaced()) && changed(ctx, changeFleetPacing)
	}
	return s.pinning
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

// onQueue runs an activity on queue ("": the task's own) within queueWait, callers served fairly, at priority (0: FIFO).
func (s *solver) onQueue(ctx workflow.Context, queue string, priority int) workflow.Context {
	if queue == "" {
		return ctx
	}
	ctx = workflow.WithScheduleToStartTimeout(workflow.WithTaskQueue(ctx, queue), min(queueWait, max(s.remaining(ctx), time.Second)))
	return workflow.WithPriority(ctx, temporal.Priority{FairnessKey: s.in.Caller, PriorityKey: priority})
}

// lane is the paced submit queue whose worker's lane has room for the Submit, which then runs on the task's own queue
// (""); after a lane's Submit found none, the task's Submits queue. A replay's Submit never runs: its queue is moot.
func (s *solver) lane(ctx workflow.Context, queue string) (string, string) {
	if queue != "" && !s.laneSpent && !workflow.IsReplaying(ctx) && s.settings.Pacing.Lane(queue) {
		return "", queue
	}
	return queue, ""
}

// pollPriority is a poll's priority key on its results queue: 1 within a minute of its task's deadline, … 5 an hour away.
func pollPriority(left time.Duration) int {
	if i := slices.IndexFunc([]time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour},
		func(d time.Duration) bool { return left < d }); i >= 0 {
		return i + 1
	}
	return 5
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

// keeper is a queue's PaceKeeper: its order (the latest refusal), its signals, and the limit it wrote last.
type keeper struct {
	activities.PaceOrder
	refused workflow.ReceiveChannel
	last    string
}

// quietRate ends an unconfigured queue's ramp: from 1 a second, doubling every RampEvery, it is 30 s without a refusal.
const quietRate = 64

// PaceKeeper is the one writer of captchaflow's limits on a provider queue (samples-go `mutex`: a limit is one small
// workflow), started by a rate refusal: it pauses the queue for the bar and ramps it back on workflow timers (the
// server's clock), then clears its limit. A refusal meanwhile pauses it again; a limit it did not write ends it.
func PaceKeeper(ctx workflow.Context, order activities.PaceOrder) error {
	k := &keeper{PaceOrder: order, refused: workflow.GetSignalChannel(ctx, activities.PaceRefusedSignal), last: order.Orphan}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second}})
	for !workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		cleared, err := false, error(nil)
		if k.Wait > 0 { // an orphan's limit is ramped back at once
			err = k.pause(ctx)
		}
		if err == nil {
			cleared, err = k.ramp(ctx)
		}
		if captchaflow.FailureType(err) == activities.FailureSuperseded {
			workflow.GetLogger(ctx).Warn("the queue's limit is not the pace keeper's: left in force", "Queue", k.Queue, "Error", err)
			return nil
		}
		if err != nil || cleared && !k.take() { // a refusal after the clear pauses again
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, PaceKeeper, k.PaceOrder)
}

// pause holds the queue at 0 until the latest refusal's bar has passed on the server's clock.
func (k *keeper) pause(ctx workflow.Context) error {
	if err := k.write(ctx, 0, fmt.Sprintf("%s%s after %s", activities.PausedFor, k.Wait, k.What)); err != nil {
		return err
	}
	for end := workflow.Now(ctx).Add(k.Wait); workflow.Now(ctx).Before(end); {
		if k.await(ctx, end.Sub(workflow.Now(ctx))) && workflow.Now(ctx).Add(k.Wait).After(end) {
			end = workflow.Now(ctx).Add(k.Wait)
		}
	}
	return nil
}

// ramp doubles the queue's rate every RampEvery from a quarter of its configured rate (1/s without one) to that rate, or
// past twice the rate a refusal last met and quietRate, then clears its limit (true); a refusal ends it (false).
func (k *keeper) ramp(ctx workflow.Context) (bool, error) {
	for rate := cmp.Or(k.Want/4, 1); rate < cmp.Or(k.Want, max(2*k.RefusedAt, quietRate)); rate *= 2 {
		if err := k.write(ctx, rate, fmt.Sprintf("%s%g/s", activities.PaceRamping, rate)); err != nil {
			return false, err
		}
		if k.await(ctx, activities.RampEvery) {
			k.RefusedAt = rate
			return false, nil
		}
	}
	return true, k.write(ctx, -1, "")
}

// await waits d on the server's clock; a refusal meanwhile ends it early (true), its bar the keeper's (by take).
func (k *keeper) await(ctx workflow.Context, d time.Duration) bool {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	fired, refused := false, false
	s := workflow.NewSelector(ctx).AddFuture(workflow.NewTimer(tctx, d), func(workflow.Future) { fired = true }).
		AddReceive(k.refused, func(workflow.ReceiveChannel, bool) { refused = k.take() })
	for !fired && !refused {
		s.Select(ctx)
	}
	return refused
}

// take makes the longest bar signalled the keeper's order (false: none, or only reports of the orphan it holds); it
// drains the channel, as a signal left in it would be lost when the keeper ends or continues as new.
func (k *keeper) take() (took bool) {
	for r := (activities.PaceOrder{}); k.refused.ReceiveAsync(&r); r = (activities.PaceOrder{}) {
		if r.Orphan == "" && (!took || r.Wait > k.Wait) {
			k.Wait, k.What, k.Orphan, took = r.Wait, r.What, "", true
		}
	}
	return took
}

// write has PaceQueue set the queue's rate (0: paused; < 0: its limit cleared) over the limit the keeper wrote last.
func (k *keeper) write(ctx workflow.Context, rate float64, reason string) error {
	w := activities.PaceWrite{Queue: k.Queue, Rate: rate, Reason: reason, Over: k.last}
	k.last = reason
	return workflow.ExecuteActivity(ctx, acts.PaceQueue, w).Get(ctx, nil)
}
