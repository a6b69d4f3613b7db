package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// MetricSlotsOverPlan: slots granted by a semaphore run since replaced, or taken from one that does not answer.
const MetricSlotsOverPlan = "captchaflow_provider_slots_over_plan_total"

// semaphoreMaxEvents: the semaphore continues as new past it (Temporal suggests 4 K events, warns at 10 K).
var semaphoreMaxEvents = 4000

// semaphoreMaxCarried bounds the asks continue-as-new carries (275 bytes each at most: 1.6 MB, under the 2 MB payload
// limit past which the server terminates the run); holders are at most providers.MaxThreads.
const semaphoreMaxCarried = 6000

// StartThreadsWorker serves taskQueue's semaphores on their own task queue when acts has a plan (stop is never nil).
func StartThreadsWorker(c client.Client, taskQueue string, o worker.Options, acts *activities.Activities) (stop func(), err error) {
	if activities.PlannedThreads(acts) == 0 {
		return func() {}, nil
	}
	w := worker.New(c, activities.ThreadsTaskQueue(taskQueue), o)
	w.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType})
	w.RegisterActivity(acts.CheckSlotHolders)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the provider-threads worker: %w", err)
	}
	return w.Stop, nil
}

func same(a activities.SlotRequest) func(activities.SlotRequest) bool {
	return func(b activities.SlotRequest) bool { return a.WorkflowID == b.WorkflowID && a.Seq == b.Seq }
}

// semaphore is one provider's slots: the plan, the holders, and the asks waiting in order.
type semaphore struct {
	activities.SemaphoreState
	inFlight int // grants not yet known delivered, and a holder check running
	wake     workflow.Channel
}

// ProviderThreads grants at most Plan slots first come first served, and every SlotReaskInterval takes back ended holders'.
func ProviderThreads(ctx workflow.Context, st activities.SemaphoreState) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx) // cancelling it does nothing
	s, id := &semaphore{SemaphoreState: st, wake: workflow.NewBufferedChannel(ctx, 1)}, workflow.GetInfo(ctx).WorkflowExecution.ID
	if err := workflow.SetQueryHandler(ctx, activities.SlotsQuery, func() (activities.SemaphoreState, error) {
		return s.SemaphoreState, nil
	}); err != nil {
		return err
	}
	acquire := workflow.GetSignalChannel(ctx, activities.AcquireSlotSignal)
	release := workflow.GetSignalChannel(ctx, activities.ReleaseSlotSignal)
	var timer workflow.Future
	for {
		s.drain(ctx, acquire, release)
		for ; len(s.Holders) < s.Plan && len(s.Queue) > 0; s.Queue = s.Queue[1:] {
			s.Holders = append(s.Holders, s.Queue[0])
			s.send(ctx, s.Queue[0])
		}
		m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"semaphore": id})
		m.Gauge("captchaflow_provider_slots_in_use").Update(float64(len(s.Holders)))
		m.Gauge("captchaflow_provider_slots_plan").Update(float64(s.Plan))
		m.Gauge("captchaflow_provider_slots_queued").Update(float64(len(s.Queue)))
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**provider threads:** %d/%d in use · %d queued", len(s.Holders), s.Plan, len(s.Queue)))
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() >= semaphoreMaxEvents || info.GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return s.inFlight == 0 }); err != nil {
				return err
			}
			s.drain(ctx, acquire, release)
			s.Queue = s.Queue[:min(len(s.Queue), max(0, semaphoreMaxCarried-len(s.Holders)))] // the rest ask again (tickets name this run)
			return workflow.NewContinueAsNewError(ctx, activities.ThreadsWorkflowType, s.SemaphoreState)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(acquire, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(release, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(s.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		if timer == nil && len(s.Holders) > 0 {
			timer = workflow.NewTimer(ctx, activities.SlotReaskInterval)
		}
		if timer != nil {
			sel.AddFuture(timer, func(workflow.Future) { timer = nil; s.reclaim(ctx) })
		}
		sel.Select(ctx)
	}
}

// drain takes every ask and release; a granted slot it does not know was granted over the plan by another run.
func (s *semaphore) drain(ctx workflow.Context, acquire, release workflow.ReceiveChannel) {
	for {
		var r activities.SlotRequest
		switch {
		case acquire.ReceiveAsync(&r):
			s.onAcquire(ctx, r)
		case release.ReceiveAsync(&r):
			if !s.drop(r) && !r.Ungranted {
				workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
			}
		default:
			return
		}
	}
}

// onAcquire queues an ask (its plan is the plan); one held is granted again (a lost grant, a reset run), one queued keeps its place.
func (s *semaphore) onAcquire(ctx workflow.Context, r activities.SlotRequest) {
	s.Plan, r.Plan = cmp.Or(r.Plan, s.Plan), 0
	if i := slices.IndexFunc(s.Holders, same(r)); i >= 0 {
		s.Holders[i] = r
		s.send(ctx, r)
	} else if i := slices.IndexFunc(s.Queue, same(r)); i >= 0 {
		s.Queue[i] = r
	} else {
		s.Queue = append(s.Queue, r)
	}
}

// drop frees r's slot or takes it out of the queue, and tells whether it knew r.
func (s *semaphore) drop(r activities.SlotRequest) bool {
	n := len(s.Holders) + len(s.Queue)
	s.Holders, s.Queue = slices.DeleteFunc(s.Holders, same(r)), slices.DeleteFunc(s.Queue, same(r))
	return len(s.Holders)+len(s.Queue) < n
}

// send signals the grant; one that cannot be delivered (the run is gone) frees the slot.
func (s *semaphore) send(ctx workflow.Context, r activities.SlotRequest) {
	f := workflow.SignalExternalWorkflow(ctx, r.WorkflowID, r.RunID, activities.SlotGrantedSignal,
		activities.SlotRequest{Seq: r.Seq, RunID: r.RunID, Semaphore: workflow.GetInfo(ctx).WorkflowExecution.ID})
	s.background(ctx, func(ctx workflow.Context) {
		if f.Get(ctx, nil) != nil && slices.Contains(s.Holders, r) {
			s.drop(r)
		}
	})
}

// reclaim frees, in the background, the slots of holders whose task ended.
func (s *semaphore) reclaim(ctx workflow.Context) {
	s.background(ctx, func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
		var dead []activities.SlotRequest
		if err := workflow.ExecuteActivity(actx, acts.CheckSlotHolders, s.Holders).Get(ctx, &dead); err != nil {
			workflow.GetLogger(ctx).Warn("could not check the slot holders; trying again later", "Error", err)
		}
		for _, h := range dead {
			s.drop(h)
		}
		workflow.GetMetricsHandler(ctx).Counter("captchaflow_provider_slots_reclaimed_total").Inc(int64(len(dead)))
	})
}

// background runs f as a goroutine counted in inFlight, and wakes the main loop when it ends.
func (s *semaphore) background(ctx workflow.Context, f func(workflow.Context)) {
	s.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		f(ctx)
		s.inFlight--
		s.wake.SendAsync(nil)
	})
}

// admission is the task's side: it holds a slot from before each submission until that submission settles.
type admission struct {
	decided, on, granted bool
	seq                  int                   // the submission whose slot is asked or held
	ticket               activities.SlotTicket // Semaphore "" once the slot is given back
	kept                 []keptSlot            // slots of submissions still open when their attempt ended (a lost answer)
	releasing            []workflow.Future     // releases not yet known delivered: the solve waits for them to end
}

type keptSlot struct {
	rel activities.SlotRequest
	sub *submission
}

// admit holds a slot for the next submission, returning its release or the outcome that ends the attempt first.
func (s *solver) admit(ctx workflow.Context) (release func(), o outcome, ok bool) {
	a, none := &s.admission, func() {}
	if !a.decided && s.remaining(ctx) > 0 { // recorded once: asked only with a plan or when replaying
		a.decided = true
		a.on = (s.settings.ProviderThreads > 0 || workflow.IsReplaying(ctx)) && changed(ctx, changeProviderThreads)
	}
	if s.remaining(ctx) <= 0 || !a.on {
		return none, outcome{}, true
	}
	a.seq++
	a.granted, a.ticket = false, activities.SlotTicket{}
	seq, made := a.seq, len(s.table.subs)
	release = func() {
		rel := activities.SlotRequest{Semaphore: a.ticket.Semaphore, Seq: seq, Ungranted: !a.granted}
		a.granted, a.ticket.Semaphore = false, ""
		if len(s.table.subs) > made && s.table.subs[made].open() {
			a.kept = append(a.kept, keptSlot{rel, s.table.subs[made]})
		} else {
			s.releaseTo(ctx, rel)
		}
	}
	if err := s.acquireSlot(ctx); err != nil {
		release()
		return none, failed(err), false
	}
	if o, ok := s.takeLostAnswer(ctx); ok {
		release()
		return none, o, false
	}
	return release, outcome{}, true
}

// acquireSlot waits in PhaseQueued for the grant, asking again every SlotReaskInterval; a stuck semaphore is passed by.
func (s *solver) acquireSlot(ctx workflow.Context) error {
	a := &s.admission
	phase := captchaflow.PhaseQueued
	if s.status.Waiting != "" {
		phase = captchaflow.PhaseAwaitingBalance // a zero-balance pause goes on while the task queues
	}
	s.setPhaseSearchable(ctx, phase)
	queuedAt := workflow.Now(ctx)
	for !a.granted && !s.table.settled() {
		s.releaseKept(ctx, false)
		ask := s.slotAsk(ctx, a.seq)
		if t := a.ticket; t.Semaphore != "" {
			ask.Ticket = &t
		}
		f := workflow.ExecuteLocalActivity(localOptions(ctx, s.remaining(ctx)), activities.AcquireSlotName, ask)
		s.waitFor(ctx, f)
		err := f.Get(ctx, &a.ticket)
		d := min(s.remaining(ctx), activities.SlotReaskInterval)
		switch {
		case err != nil && (temporal.IsCanceledError(err) || d <= 0):
			return cmp.Or(ctx.Err(), deadlineExceeded(s.in.DeadlineSeconds))
		case err != nil || a.ticket.Stuck:
			s.logger.Warn("the provider-threads semaphore does not answer: submitting without a slot", "Error", err)
			workflow.GetMetricsHandler(ctx).Counter(MetricSlotsOverPlan).Inc(1)
			return nil
		case a.ticket.Semaphore == "":
			return nil // the provider has no plan
		case d <= 0:
			return deadlineExceeded(s.in.DeadlineSeconds)
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, d)
		err = s.await(ctx, func() bool { return a.granted || s.table.settled() || timer.IsReady() })
		if cancelTimer(); err != nil {
			return err // the task was cancelled
		}
	}
	workflow.GetMetricsHandler(ctx).Timer("captchaflow_slot_queue_wait_seconds").Record(workflow.Now(ctx).Sub(queuedAt))
	return nil
}

// slotAsk is this run's ask number seq, carrying what chooses the provider as Submit would.
func (s *solver) slotAsk(ctx workflow.Context, seq int) activities.SlotAsk {
	info := workflow.GetInfo(ctx).WorkflowExecution
	return activities.SlotAsk{SlotRequest: activities.SlotRequest{WorkflowID: info.ID, RunID: info.RunID, Seq: seq},
		Method: s.in.Method, Params: s.in.Params, Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid}
}

// localOptions bound a slot's local activity by the time left and a minute (Temporal unreachable from the worker).
func localOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
		ScheduleToCloseTimeout: min(max(remaining, time.Second), time.Minute),
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second}})
}

// releaseKept gives back the kept slots whose submissions settled, or all of them and waits for every release.
func (s *solver) releaseKept(ctx workflow.Context, all bool) {
	a := &s.admission
	a.kept = slices.DeleteFunc(a.kept, func(k keptSlot) bool {
		if all || !k.sub.open() {
			s.releaseTo(ctx, k.rel)
		}
		return all || !k.sub.open()
	})
	for dctx, _ := workflow.NewDisconnectedContext(ctx); all && len(a.releasing) > 0; a.releasing = a.releasing[1:] {
		if err := a.releasing[0].Get(dctx, nil); err != nil {
			s.logger.Warn("could not release the provider slot; the semaphore takes it back once the task delivers", "Error", err)
		}
	}
}

// releaseTo gives rel's slot back, from a disconnected context so that a cancelled task still releases.
func (s *solver) releaseTo(ctx workflow.Context, rel activities.SlotRequest) {
	if rel.Semaphore == "" {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	info := workflow.GetInfo(ctx).WorkflowExecution
	rel.WorkflowID, rel.RunID = info.ID, info.RunID
	s.admission.releasing = append(s.admission.releasing, workflow.ExecuteLocalActivity(localOptions(dctx, time.Minute),
		activities.ReleaseSlotName, rel))
}
