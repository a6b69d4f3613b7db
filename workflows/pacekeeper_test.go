package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/captchaflow/captchaflow/activities"
)

const keptQueue = "q@a/submit"

// keptServer is one queue's config on a server whose clock is skew off the keeper's (a timestamp only: nothing may
// read it as the time); reads fail while failing holds, and every write is stamped with the keeper's time since start.
type keptServer struct {
	workflowservice.WorkflowServiceClient
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	skew    time.Duration
	mu      sync.Mutex
	limit   *taskqueuepb.RateLimitConfig
	failing bool
	writes  []string // "at rate reason"; rate -1: cleared
	reads   int
	pollers []*taskqueuepb.PollerInfo
}

func (f *keptServer) DescribeTaskQueue(context.Context, *workflowservice.DescribeTaskQueueRequest, ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads++; f.failing {
		return nil, errors.New("frontend busy")
	}
	return &workflowservice.DescribeTaskQueueResponse{Config: &taskqueuepb.TaskQueueConfig{QueueRateLimit: f.limit}, Pollers: f.pollers}, nil
}

func (f *keptServer) UpdateTaskQueueConfig(_ context.Context, r *workflowservice.UpdateTaskQueueConfigRequest, _ ...grpc.CallOption) (*workflowservice.UpdateTaskQueueConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, rate := r.GetUpdateQueueRateLimit(), float32(-1)
	f.setLocked(u.GetRateLimit(), u.GetReason())
	if u.GetRateLimit() != nil {
		rate = u.GetRateLimit().GetRequestsPerSecond()
	}
	f.writes = append(f.writes, fmt.Sprintf("%v %v %s", f.env.Now().Sub(f.start), rate, u.GetReason()))
	return &workflowservice.UpdateTaskQueueConfigResponse{}, nil
}

// setLocked is a write of the limit, stamped on the server's (skewed) clock.
func (f *keptServer) setLocked(rate *taskqueuepb.RateLimit, reason string) {
	f.limit = nil
	if rate != nil {
		f.limit = &taskqueuepb.RateLimitConfig{RateLimit: rate, Metadata: &taskqueuepb.ConfigMetadata{Reason: reason,
			UpdateTime: timestamppb.New(f.env.Now().Add(f.skew))}}
	}
}

// runKeeper runs a queue's keeper from order, with at's callbacks at their times since the start (the operator, a
// refusal signalled by any worker, a frontend failing), and returns the writes; the keeper must end by itself.
func runKeeper(t *testing.T, order activities.PaceOrder, skew time.Duration, at map[time.Duration]func(*keptServer)) []string {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	f := &keptServer{env: env, start: env.Now(), skew: skew}
	env.RegisterWorkflowWithOptions(PaceKeeper, workflow.RegisterOptions{Name: activities.PaceWorkflowType})
	env.RegisterActivity(&activities.Activities{Pace: &activities.Pacer{Service: f}})
	for d, fn := range at {
		env.RegisterDelayedCallback(func() { fn(f) }, d)
	}
	env.ExecuteWorkflow(PaceKeeper, order)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the keeper did not end by itself: %v; writes %q", env.GetWorkflowError(), f.writes)
	}
	return f.writes
}

func refusal(wait time.Duration, what string) func(*keptServer) {
	return func(f *keptServer) {
		f.env.SignalWorkflow(activities.PaceRefusedSignal, activities.PaceOrder{Queue: keptQueue, Wait: wait, What: what})
	}
}

func equal(t *testing.T, name string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
}

// operator sets a limit of their own (nil: clears the queue's limit, whoever's it was).
func operator(rate *taskqueuepb.RateLimit) func(*keptServer) {
	return func(f *keptServer) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.setLocked(rate, "incident 42")
	}
}

// failing makes the queue's reads fail (or succeed again).
func failing(on bool) func(*keptServer) {
	return func(f *keptServer) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.failing = on
	}
}

// A refusal's pause holds for its bar on the server's clock whatever the stamps' skew (no worker's clock is read),
// then the queue ramps from a quarter of its configured rate, doubling every 5 s, and its limit is cleared at the
// rate (the pollers' configured rate holds it again). A second worker's refusal of the burst changes nothing.
func TestKeeperPausesAndRampsOnTheServersClock(t *testing.T) {
	for _, skew := range []time.Duration{30 * time.Second, -5 * time.Minute} {
		got := runKeeper(t, activities.PaceOrder{Queue: keptQueue, Want: 13, Wait: 10 * time.Second, What: "MAX_USER_TURN"}, skew,
			map[time.Duration]func(*keptServer){time.Second: refusal(10*time.Second, "MAX_USER_TURN")})
		equal(t, fmt.Sprint("skew ", skew), got, []string{"0s 0 captchaflow: paused for 10s after MAX_USER_TURN",
			"11s 3.25 captchaflow: ramping at 3.25/s", "16s 6.5 captchaflow: ramping at 6.5/s", "21s -1 "})
	}
}

// An account with no configured rate is not paced until it refuses: then paused, ramped from 1 a second and cleared
// once quiet for 30 s past twice the rate a refusal met; a refusal during the ramp pauses it again, and one during a
// pause with a longer bar extends the pause.
func TestKeeperUnpacesAQuietAccount(t *testing.T) {
	got := runKeeper(t, activities.PaceOrder{Queue: keptQueue, Wait: 10 * time.Second, What: "429"}, 0, map[time.Duration]func(*keptServer){
		22 * time.Second: refusal(10*time.Second, "HTTP 429"), 25 * time.Second: refusal(30*time.Second, "HTTP 429")})
	equal(t, "unpaced", got, []string{"0s 0 captchaflow: paused for 10s after 429", "10s 1 captchaflow: ramping at 1/s",
		"15s 2 captchaflow: ramping at 2/s", "20s 4 captchaflow: ramping at 4/s", "22s 0 captchaflow: paused for 10s after HTTP 429",
		"55s 1 captchaflow: ramping at 1/s", "1m0s 2 captchaflow: ramping at 2/s", "1m5s 4 captchaflow: ramping at 4/s",
		"1m10s 8 captchaflow: ramping at 8/s", "1m15s 16 captchaflow: ramping at 16/s", "1m20s 32 captchaflow: ramping at 32/s", "1m25s -1 "})
}

// An operator's limit set during a pause or a ramp stays theirs: the keeper raises nothing over it and ends; one
// cleared during a ramp leaves the queue cleared (the keeper raises only its own limit); a pause is never written
// over an operator's limit.
func TestKeeperLeavesAnOperatorsLimit(t *testing.T) {
	order := activities.PaceOrder{Queue: keptQueue, Want: 8, Wait: 10 * time.Second, What: "MAX_USER_TURN"}
	pause, ramp := "0s 0 captchaflow: paused for 10s after MAX_USER_TURN", "10s 2 captchaflow: ramping at 2/s"
	for name, c := range map[string]struct {
		at   time.Duration
		rate *taskqueuepb.RateLimit
		want []string
	}{
		"set during the pause":   {5 * time.Second, &taskqueuepb.RateLimit{RequestsPerSecond: 5}, []string{pause}},
		"set during the ramp":    {12 * time.Second, &taskqueuepb.RateLimit{RequestsPerSecond: 5}, []string{pause, ramp}},
		"cleared during a ramp":  {12 * time.Second, nil, []string{pause, ramp}},
		"set before the refusal": {-1, &taskqueuepb.RateLimit{RequestsPerSecond: 5}, nil},
	} {
		at := map[time.Duration]func(*keptServer){c.at: operator(c.rate)}
		if c.at < 0 {
			at = map[time.Duration]func(*keptServer){0: operator(c.rate)}
		}
		equal(t, name, runKeeper(t, order, 0, at), c.want)
	}
}

// A failed read is never acted on: the write waits until a read succeeds.
func TestKeeperNeverWritesOnAFailedRead(t *testing.T) {
	got := runKeeper(t, activities.PaceOrder{Queue: keptQueue, Want: 8, Wait: 10 * time.Second, What: "MAX_USER_TURN"}, 0,
		map[time.Duration]func(*keptServer){9 * time.Second: failing(true), 30 * time.Second: failing(false)})
	equal(t, "reads failing 9s-30s", got, []string{"0s 0 captchaflow: paused for 10s after MAX_USER_TURN",
		"35s 2 captchaflow: ramping at 2/s", "40s 4 captchaflow: ramping at 4/s", "45s -1 "})
}

// An orphaned limit of captchaflow's (its keeper gone, or an earlier release's) is ramped back over from the start,
// not paused again; another worker's report of the same orphan changes nothing, and a refusal meanwhile pauses.
func TestKeeperRampsAnOrphanBack(t *testing.T) {
	orphan := "captchaflow: configured"
	held := func(f *keptServer) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.setLocked(&taskqueuepb.RateLimit{RequestsPerSecond: 13}, orphan)
	}
	again := func(f *keptServer) {
		f.env.SignalWorkflow(activities.PaceRefusedSignal, activities.PaceOrder{Queue: keptQueue, Want: 8, What: "a limit no keeper held", Orphan: orphan})
	}
	order := activities.PaceOrder{Queue: keptQueue, Want: 8, What: "a limit no keeper held", Orphan: orphan}
	equal(t, "orphan", runKeeper(t, order, 0, map[time.Duration]func(*keptServer){0: held, time.Second: again}),
		[]string{"0s 2 captchaflow: ramping at 2/s", "5s 4 captchaflow: ramping at 4/s", "10s -1 "})
	equal(t, "orphan, then refused", runKeeper(t, order, 0, map[time.Duration]func(*keptServer){0: held, 7 * time.Second: refusal(10*time.Second, "MAX_USER_TURN")}),
		[]string{"0s 2 captchaflow: ramping at 2/s", "5s 4 captchaflow: ramping at 4/s", "7s 0 captchaflow: paused for 10s after MAX_USER_TURN",
			"17s 2 captchaflow: ramping at 2/s", "22s 4 captchaflow: ramping at 4/s", "27s -1 "})
}

// Every refusal waiting when the keeper looks is taken: an orphan's report ahead of a refusal does not hide it when
// the keeper clears (the queue is paused for it, not left unpaced), and a continue-as-new carries the longest bar.
func TestKeeperTakesEveryRefusalWaiting(t *testing.T) {
	orphan := "captchaflow: configured"
	order := activities.PaceOrder{Queue: keptQueue, Want: 8, What: "a limit no keeper held", Orphan: orphan}
	both := func(f *keptServer) { // signalled while the clear's reads fail
		f.env.SignalWorkflow(activities.PaceRefusedSignal, order)
		refusal(10*time.Second, "MAX_USER_TURN")(f)
	}
	held := func(f *keptServer) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.setLocked(&taskqueuepb.RateLimit{RequestsPerSecond: 13}, orphan)
	}
	got := runKeeper(t, order, 0, map[time.Duration]func(*keptServer){0: held, 9 * time.Second: failing(true),
		12 * time.Second: both, 20 * time.Second: failing(false)})
	if len(got) < 4 || got[3] != "25s 0 captchaflow: paused for 10s after MAX_USER_TURN" {
		t.Errorf("the refusal behind an orphan's report was lost: %q", got)
	}

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	f := &keptServer{env: env, start: env.Now()}
	env.RegisterWorkflowWithOptions(PaceKeeper, workflow.RegisterOptions{Name: activities.PaceWorkflowType})
	env.RegisterActivity(&activities.Activities{Pace: &activities.Pacer{Service: f}})
	env.RegisterDelayedCallback(func() { failing(true)(f) }, 14*time.Second)
	env.RegisterDelayedCallback(func() { // signalled while the ramp's second step waits for a read
		env.SetContinueAsNewSuggested(true)
		refusal(10*time.Second, "MAX_USER_TURN")(f)
		refusal(time.Minute, "ERROR: 1001")(f)
	}, 16*time.Second)
	env.RegisterDelayedCallback(func() { failing(false)(f) }, 18*time.Second)
	env.ExecuteWorkflow(PaceKeeper, activities.PaceOrder{Queue: keptQueue, Want: 8, Wait: 10 * time.Second, What: "MAX_USER_TURN"})
	var next activities.PaceOrder
	if can, ok := errors.AsType[*workflow.ContinueAsNewError](env.GetWorkflowError()); !ok {
		t.Fatalf("no continue-as-new: %v", env.GetWorkflowError())
	} else if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil || next.Wait != time.Minute {
		t.Errorf("the continue-as-new carries %+v (%v), not the minute's bar", next, err)
	}
}
