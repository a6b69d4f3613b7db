package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow/providers"
)

// A provider account's requests run on task queues of its own, one per budget, whose rate the server holds across
// every worker (Temporal's downstream rate limiting); SingleProvider names the one provider of CAPTCHAAI_*.
const (
	SubmitQueue    = "submit"
	ResultsQueue   = "results"
	SingleProvider = "captchaai"
	// MetricRateRefusals counts the provider's rate refusals (MAX_USER_TURN, 429…): each pauses the account's queue.
	MetricRateRefusals = "captchaflow_provider_rate_refusals_total"
	pacePrefix         = "captchaflow: " // a limit whose reason does not start so is an operator's, left alone
	pausedFor          = pacePrefix + "paused for "
	paceRamping        = pacePrefix + "ramping"
	paceConfigured     = pacePrefix + "configured"
	rampEvery          = 5 * time.Second  // a paused queue comes back at a quarter of its rate, doubling this often
	maxPause           = 10 * time.Minute // the longest documented bar (2captcha's ERROR: 1001)
	warnEvery          = time.Minute      // Keep reports a queue's failures at most this often
)

// ErrOperatorLimit: a rate refusal does not pause a queue whose limit an operator set; theirs stays in force.
var ErrOperatorLimit = errors.New("an operator's limit is in force (its reason does not start with " + pacePrefix + "): not paused")

// ProviderQueue is where provider's requests of kind (SubmitQueue, ResultsQueue) run for taskQueue's tasks.
func ProviderQueue(taskQueue, provider, kind string) string {
	return taskQueue + "@" + cmp.Or(provider, SingleProvider) + "/" + kind
}

// QueueRates are an account's rates by queue kind.
func QueueRates(r providers.Rates) map[string]float64 {
	return map[string]float64{SubmitQueue: r.Submits, ResultsQueue: r.Results}
}

// Queue is where provider's requests of kind (SubmitQueue, ResultsQueue) should run now: its paced queue while the
// account is paced (a configured rate), else "". A nil Pacer paces nothing.
func (p *Pacer) Queue(provider, kind string) string {
	if p == nil || QueueRates(p.Rates[cmp.Or(provider, SingleProvider)])[kind] <= 0 {
		return ""
	}
	return ProviderQueue(p.TaskQueue, provider, kind)
}

// Pacer keeps each account's queues at their configured rates, pauses one fleet-wide when the provider refuses for
// rate, and brings a paused queue back: every worker runs Keep, so none that dies can leave a queue stalled.
type Pacer struct {
	Service   workflowservice.WorkflowServiceClient
	Namespace string
	Identity  string
	TaskQueue string
	Rates     map[string]providers.Rates // by provider name (SingleProvider without PROVIDERS_FILE)
	paused    sync.Map                   // queue → the time.Time this worker last paused it
}

// Refused pauses provider's queue of kind for wait (its documented bar) after a rate refusal what, unless an
// operator's limit is in force. The pause is a duration the server's update time anchors: no worker's clock ends it.
func (p *Pacer) Refused(ctx context.Context, provider, kind, what string, wait time.Duration) error {
	queue := ProviderQueue(p.TaskQueue, provider, kind)
	if last, ok := p.paused.Load(queue); ok && time.Since(last.(time.Time)) < time.Second {
		return nil // this worker paused it just now: the refusals of one burst make one pause
	}
	p.paused.Store(queue, time.Now())
	limit, err := p.describe(ctx, queue)
	if err == nil && limit.GetRateLimit() != nil && !strings.HasPrefix(limit.GetMetadata().GetReason(), pacePrefix) {
		return ErrOperatorLimit
	}
	return p.set(ctx, queue, 0, fmt.Sprintf("%s%s after %s", pausedFor, min(max(wait, rampEvery), maxPause), what))
}

// Keep holds every account queue's rate every interval until ctx ends; warn hears a queue's failures at most once a
// minute.
func (p *Pacer) Keep(ctx context.Context, every time.Duration, warn func(queue string, err error)) {
	warned := map[string]time.Time{}
	for tick := time.NewTicker(every); ; {
		for name, r := range p.Rates {
			for kind, rate := range QueueRates(r) {
				queue := ProviderQueue(p.TaskQueue, name, kind)
				if rate <= 0 { // not paced: no configured limit to hold
					continue
				}
				if err := p.hold(ctx, queue, rate); err != nil && ctx.Err() == nil && time.Since(warned[queue]) > warnEvery {
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

// hold sets queue's limit to what nextRate says, when that differs from the limit it has.
func (p *Pacer) hold(ctx context.Context, queue string, want float64) error {
	limit, err := p.describe(ctx, queue)
	if err != nil {
		return err
	}
	var cur *float64
	if l := limit.GetRateLimit(); l != nil {
		cur = new(float64(l.GetRequestsPerSecond()))
	}
	meta := limit.GetMetadata()
	rate, reason := nextRate(time.Now(), cur, meta.GetReason(), meta.GetUpdateTime().AsTime(), want)
	if reason == "" {
		return nil
	}
	return p.set(ctx, queue, rate, reason)
}

// describe is queue's rate limit as the server holds it.
func (p *Pacer) describe(ctx context.Context, queue string) (*taskqueuepb.RateLimitConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := p.Service.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: p.Namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		ReportConfig: true})
	return resp.GetConfig().GetQueueRateLimit(), err
}

// nextRate is the limit a queue should have now ("" reason: leave it): a pause holds until its end, then the queue
// ramps from a quarter of want, doubling every rampEvery; an operator's limit is theirs; otherwise want.
func nextRate(now time.Time, cur *float64, reason string, updated time.Time, want float64) (float64, string) {
	if rest, ok := strings.CutPrefix(reason, pausedFor); ok {
		d, err := time.ParseDuration(strings.Fields(rest + " ")[0])
		if err == nil && now.Before(updated.Add(min(d, maxPause))) {
			return 0, ""
		}
		return want / 4, paceRamping
	}
	switch {
	case cur != nil && !strings.HasPrefix(reason, pacePrefix):
		return 0, ""
	case reason == paceRamping && cur != nil && *cur < want:
		if now.Sub(updated) < rampEvery {
			return 0, ""
		}
		if next := *cur * 2; next < want {
			return next, paceRamping
		}
	case cur != nil && float32(*cur) == float32(want) && reason == paceConfigured:
		return 0, ""
	}
	return want, paceConfigured
}

// set gives queue the limit rate (0: paused), saying why.
func (p *Pacer) set(ctx context.Context, queue string, rate float64, reason string) error {
	_, err := p.Service.UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{Namespace: p.Namespace,
		Identity: p.Identity, TaskQueue: queue, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: float32(rate)}, Reason: reason}})
	if err != nil {
		return fmt.Errorf("setting %s's rate to %g: %w", queue, rate, err)
	}
	return nil
}
