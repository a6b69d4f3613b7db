package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/time/rate"

	"github.com/captchaflow/captchaflow/providers"
)

// A provider account's requests run on task queues of its own, one per budget, whose rate the server holds across
// every worker (Temporal's downstream rate limiting); SingleProvider names the one provider of CAPTCHAAI_*.
const (
	SubmitQueue        = "submit"
	ResultsQueue       = "results"
	SingleProvider     = "captchaai"
	MetricRateRefusals = "captchaflow_provider_rate_refusals_total" // MAX_USER_TURN, 429…: each pauses the account's queue
	PaceWorkflowType   = "PaceKeeper"                               // a queue's keeper, the one writer of our limits on it
	PaceRefusedSignal  = "refused"
	FailureLaneSpent   = "PaceLaneSpent"  // a lane's Submit found no room in it as it went: nothing sent
	FailureSuperseded  = "PaceSuperseded" // the queue's limit is not the keeper's: it is left in force, the keeper ends
	PausedFor          = pacePrefix + "paused for "
	PaceRamping        = pacePrefix + "ramping at "
	RampEvery          = 5 * time.Second  // a ramp's rate doubles this often
	MaxPause           = 10 * time.Minute // the longest documented bar (2captcha's ERROR: 1001)
	pacePrefix         = "captchaflow: "  // a limit whose reason does not start so is an operator's, left alone
	warnEvery          = time.Minute      // Keep reports a queue's failed reads at most this often
)

// ErrOperatorLimit: a keeper writes nothing over an operator's limit; theirs stays in force until they clear it.
var ErrOperatorLimit = errors.New("an operator's limit is in force (its reason does not start with " + pacePrefix + "): left alone")

// ProviderQueue is where provider's requests of kind (SubmitQueue, ResultsQueue) run for taskQueue's tasks.
func ProviderQueue(taskQueue, provider, kind string) string {
	return taskQueue + "@" + cmp.Or(provider, SingleProvider) + "/" + kind
}

// PaceKeeperID is queue's keeper: one per queue, whichever worker's refusal starts it.
func PaceKeeperID(queue string) string { return "captchaflow/pace/" + queue }

func QueueRates(r providers.Rates) map[string]float64 {
	return map[string]float64{SubmitQueue: r.Submits, ResultsQueue: r.Results}
}

// PaceOrder starts a queue's keeper and is a refusal's signal to it; RefusedAt is the ramp's rate the last refusal met.
type PaceOrder struct {
	Queue     string        `json:"queue"`
	Want      float64       `json:"want,omitempty"` // the configured rate, which the ramp ends at (0: not paced until refused)
	Wait      time.Duration `json:"wait"`           // the refusal's documented bar
	What      string        `json:"what"`
	RefusedAt float64       `json:"refused_at,omitempty"`
	Orphan    string        `json:"orphan,omitempty"` // the reason of a limit of captchaflow's that no keeper held: ramped back, not paused
}

// PaceWrite is a keeper's decision: queue's limit Rate (0: paused; < 0: none, the pollers' rate again) over Over, the
// limit the keeper wrote last; a pause only lowers, so it goes over any limit of captchaflow's.
type PaceWrite struct {
	Queue  string  `json:"queue"`
	Rate   float64 `json:"rate"`
	Reason string  `json:"reason,omitempty"`
	Over   string  `json:"over,omitempty"`
}

// Pacer tells a queue's keeper of rate refusals and keeps what the fleet's keepers and operators decided in memory
// for Queue and its lanes; the configured rates are the pollers' (the server's worker-set limit, less the lanes'
// share), so it writes none.
type Pacer struct {
	Service   workflowservice.WorkflowServiceClient
	Namespace string
	Identity  string
	TaskQueue string
	Rates     map[string]providers.Rates // by provider name (SingleProvider without PROVIDERS_FILE)
	refused   sync.Map                   // queue → the time.Time of this worker's latest refusal there
	limited   sync.Map                   // queue → whether a limit was in force as this worker last saw it
	lanes     sync.Map                   // submit queue → this worker's lane for Submits that skip it
	seen      map[string]int             // submit queue → Keep's reads in a row that listed this worker among its pollers
	mu        sync.Mutex                 // a read's notes against a refusal's
}

// LaneShare is the part of a configured submit rate of at least LaneMinRate that its workers' lanes take, split evenly
// among them; the server paces the rest on the queue, so lanes and queue together stay within the rate, a burst's
// first Submits aside (laneAhead, at least one a worker). Below LaneMinRate (2captcha's documented 13, whose window a
// burst's extra Submits could break) the queue keeps the whole rate and there are no lanes.
const (
	LaneShare   = 0.25
	LaneMinRate = 40
)

// PollerRate is the rate the workers polling a queue of kind configured at rate ask the server for.
func PollerRate(kind string, rate float64) float64 {
	if kind == SubmitQueue && rate >= LaneMinRate {
		return rate * (1 - LaneShare)
	}
	return rate
}

// laneFresh is how long a read sizes a lane for: the worker counts of the reads after it may change its share.
// laneAhead is how far ahead of its rate a lane's bucket lets it run (at least one Submit): tasks scheduled together
// find room, and all lanes together run ahead by a tenth of a second of their share.
const (
	laneFresh = 10 * time.Second
	laneAhead = 100 * time.Millisecond
)

// lane is a worker's share of a submit queue's rate, as a read sized it at.
type lane struct {
	*rate.Limiter
	at time.Time
}

// Lane tells whether a Submit for queue may run on the task's own queue now (handed to the worker with the workflow
// task's reply instead of matched on queue): this worker's lane has room; the Submit takes it as it runs.
//
//workflowcheck:ignore
func (p *Pacer) Lane(queue string) bool {
	l, open := p.openLaneOf(queue)
	return open && l.Tokens() >= 1
}

// takeLane takes room in this worker's lane of queue for a request about to go.
func (p *Pacer) takeLane(queue string) bool {
	l, open := p.openLaneOf(queue)
	return open && l.Allow()
}

func (p *Pacer) openLaneOf(queue string) (lane, bool) {
	if p == nil {
		return lane{}, false
	}
	l, open := p.lanes.Load(queue)
	if !open || time.Since(l.(lane).at) > laneFresh {
		return lane{}, false
	}
	return l.(lane), true
}

// openLane sizes this worker's lane of a configured submit queue (shut: none) from the workers the queue lists: open
// once this worker has seen itself there three reads in a row (the others, reading as often, count it by then), while
// no worker there asks the server for more than the lanes leave it (an older release, whose worker would send a lane's
// Submit it took from the task's own queue unpaced) and not within laneFresh of this worker's last refusal (its
// keeper may not have written the pause yet).
func (p *Pacer) openLane(queue string, want float64, shut bool, q *workflowservice.DescribeTaskQueueResponse) {
	workers, greedy := map[string]bool{}, false
	for _, poller := range q.GetPollers() {
		workers[poller.GetIdentity()] = true
		greedy = greedy || poller.GetRatePerSecond() > PollerRate(SubmitQueue, want)+0.01 // an older release's
	}
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[queue] = map[bool]int{true: p.seen[queue] + 1}[workers[p.Identity]]
	last, refused := p.refused.Load(queue)
	if shut || greedy || want < LaneMinRate || p.seen[queue] < 3 || refused && time.Since(last.(time.Time)) < laneFresh {
		p.lanes.Delete(queue)
		return
	}
	share := want * LaneShare / float64(len(workers))
	bucket := max(1, int(share*laneAhead.Seconds()))
	l, ok := p.lanes.Load(queue)
	if !ok {
		p.lanes.Store(queue, lane{rate.NewLimiter(rate.Limit(share), bucket), time.Now()})
		return
	}
	l.(lane).SetLimit(rate.Limit(share)) // kept: its room is what was taken, not refilled by a read
	l.(lane).SetBurst(bucket)
	p.lanes.Store(queue, lane{l.(lane).Limiter, time.Now()})
}

// Queue is where provider's requests of kind should run now: its paced queue while the account is paced (a configured
// rate, or a pause or ramp in force as this worker last saw it), else "" (always, for a nil Pacer).
func (p *Pacer) Queue(provider, kind string) string {
	if p == nil {
		return ""
	}
	queue := ProviderQueue(p.TaskQueue, provider, kind)
	if limited, _ := p.limited.Load(queue); limited == true || QueueRates(p.Rates[cmp.Or(provider, SingleProvider)])[kind] > 0 {
		return queue
	}
	return ""
}

// Refused tells the keeper of provider's kind queue (starting it) of a refusal barring wait; it alone writes the pause.
func (p *Pacer) Refused(ctx context.Context, provider, kind, what string, wait time.Duration) error {
	queue := ProviderQueue(p.TaskQueue, provider, kind)
	p.mu.Lock()
	last, ok := p.refused.Swap(queue, time.Now())
	p.limited.Store(queue, true) // this worker's next requests go to the paced queue at once
	p.lanes.Delete(queue)
	p.mu.Unlock()
	if ok && time.Since(last.(time.Time)) < time.Second {
		return nil // this worker told the keeper just now: the refusals of one burst make one signal
	}
	return p.tell(ctx, PaceOrder{Queue: queue, What: what, Want: QueueRates(p.Rates[cmp.Or(provider, SingleProvider)])[kind],
		Wait: min(max(wait, RampEvery), MaxPause)})
}

// tell starts queue's keeper with order, or signals it the order when it runs.
func (p *Pacer) tell(ctx context.Context, order PaceOrder) error {
	payload, err := converter.GetDefaultDataConverter().ToPayloads(order)
	if err == nil {
		_, err = p.Service.SignalWithStartWorkflowExecution(ctx, &workflowservice.SignalWithStartWorkflowExecutionRequest{
			Namespace: p.Namespace, WorkflowId: PaceKeeperID(order.Queue), WorkflowType: &commonpb.WorkflowType{Name: PaceWorkflowType},
			TaskQueue: &taskqueuepb.TaskQueue{Name: p.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, Input: payload,
			SignalName: PaceRefusedSignal, SignalInput: payload, Identity: p.Identity})
	}
	return err
}

// Keep reads every account queue each interval until ctx ends, never writing; warn hears a queue's failures once a minute.
func (p *Pacer) Keep(ctx context.Context, every time.Duration, warn func(queue string, err error)) {
	warned := map[string]time.Time{}
	for tick := time.NewTicker(every); ; {
		for name, r := range p.Rates {
			for kind, rate := range QueueRates(r) {
				queue := ProviderQueue(p.TaskQueue, name, kind)
				if err := p.look(ctx, queue, rate); err != nil && ctx.Err() == nil && time.Since(warned[queue]) > warnEvery {
					warned[queue] = time.Now()
					warn(queue, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			tick.Stop()
			return
		case <-tick.C:
		}
	}
}

// look notes whether queue has a limit in force (a keeper's or an operator's), for Queue, sizes the worker's lane, and
// hands a limit of captchaflow's that no keeper holds (its keeper terminated, or one an earlier release wrote) to a
// keeper to ramp back.
func (p *Pacer) look(ctx context.Context, queue string, want float64) error {
	asked := time.Now()
	q, err := p.describe(ctx, queue)
	limit := q.GetConfig().GetQueueRateLimit()
	if err != nil {
		p.lanes.Delete(queue) // the queue's limit and workers unknown: the server paces every Submit
		return err
	}
	p.mu.Lock() // a refusal since the read began outranks its answer
	if last, ok := p.refused.Load(queue); limit.GetRateLimit() != nil || !ok || last.(time.Time).Before(asked) {
		p.limited.Store(queue, limit.GetRateLimit() != nil)
	}
	limited, _ := p.limited.Load(queue)
	p.openLane(queue, want, limited == true || !strings.HasSuffix(queue, "/"+SubmitQueue), q)
	p.mu.Unlock()
	reason := limit.GetMetadata().GetReason()
	if limit.GetRateLimit() == nil || !strings.HasPrefix(reason, pacePrefix) {
		return nil
	}
	keeper, err := p.Service.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: p.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: PaceKeeperID(queue)}})
	if _, missing := errors.AsType[*serviceerror.NotFound](err); err != nil && !missing ||
		keeper.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return err // a failed read, or a keeper that runs holds the limit
	}
	again, err := p.describe(ctx, queue) // read again: a keeper may have cleared it and ended since
	if now := again.GetConfig().GetQueueRateLimit(); err != nil || now.GetRateLimit() == nil || now.GetMetadata().GetReason() != reason {
		return err
	}
	return p.tell(ctx, PaceOrder{Queue: queue, Want: want, What: "a limit no keeper held", Orphan: reason})
}

// PaceQueue carries out a keeper's decision after reading the queue: never on a failed read (the error retries), never
// over an operator's limit, and a raise (a ramp's step, the clear) only over the limit the keeper wrote last.
func (a *Activities) PaceQueue(ctx context.Context, w PaceWrite) error {
	q, err := a.Pace.describe(ctx, w.Queue)
	limit := q.GetConfig().GetQueueRateLimit()
	if err != nil {
		return err
	}
	set, reason := limit.GetRateLimit() != nil, limit.GetMetadata().GetReason()
	switch {
	case set && !strings.HasPrefix(reason, pacePrefix):
		return temporal.NewNonRetryableApplicationError(ErrOperatorLimit.Error(), FailureSuperseded, ErrOperatorLimit)
	case set && reason == w.Reason, !set && w.Rate < 0:
		return nil // written already (the answer was lost), or nothing to clear
	case w.Rate != 0 && (!set || reason != w.Over):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s holds %q, not the keeper's %q: not raised", w.Queue,
			reason, w.Over), FailureSuperseded, nil)
	}
	return a.Pace.set(ctx, w)
}

// describe reads queue's limit and pollers.
func (p *Pacer) describe(ctx context.Context, queue string) (*workflowservice.DescribeTaskQueueResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := p.Service.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: p.Namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		ReportConfig: true})
	return resp, err
}

// set gives the queue w's limit; a limit without a rate clears it (the server's worker-set rate applies again).
func (p *Pacer) set(ctx context.Context, w PaceWrite) error {
	update := &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{Reason: w.Reason}
	if w.Rate >= 0 {
		update.RateLimit = &taskqueuepb.RateLimit{RequestsPerSecond: float32(w.Rate)}
	}
	_, err := p.Service.UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{Namespace: p.Namespace,
		Identity: p.Identity, TaskQueue: w.Queue, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY, UpdateQueueRateLimit: update})
	if err != nil {
		return fmt.Errorf("setting %s's rate to %g: %w", w.Queue, w.Rate, err)
	}
	return nil
}
