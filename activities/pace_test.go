package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/captchaflow/captchaflow/providers"
)

// fakeServer is the server's side of the queue configs, one limit per queue: Describe answers it (or readErr), then
// lets another writer act (afterRead), Update sets it, SignalWithStart records a keeper's signal.
type fakeServer struct {
	workflowservice.WorkflowServiceClient
	mu        sync.Mutex
	limits    map[string]*taskqueuepb.RateLimitConfig
	writes    []*workflowservice.UpdateTaskQueueConfigRequest
	signals   []*workflowservice.SignalWithStartWorkflowExecutionRequest
	readErr   error
	afterRead func(queue string)
	keepers   map[string]bool     // the workflow IDs of the keepers running
	pollers   map[string][]string // queue → the identities of the workers polling it
	asks      map[string]float64  // identity → the rate its pollers ask the server for
}

func newFakeServer() *fakeServer {
	return &fakeServer{limits: map[string]*taskqueuepb.RateLimitConfig{}, keepers: map[string]bool{}}
}

func (f *fakeServer) DescribeWorkflowExecution(_ context.Context, r *workflowservice.DescribeWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.keepers[r.GetExecution().GetWorkflowId()] {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
}

func (f *fakeServer) DescribeTaskQueue(_ context.Context, r *workflowservice.DescribeTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	f.mu.Lock()
	limit := f.limits[r.GetTaskQueue().GetName()]
	resp := &workflowservice.DescribeTaskQueueResponse{Config: &taskqueuepb.TaskQueueConfig{QueueRateLimit: limit}}
	for _, id := range f.pollers[r.GetTaskQueue().GetName()] {
		resp.Pollers = append(resp.Pollers, &taskqueuepb.PollerInfo{Identity: id, RatePerSecond: f.asks[id]})
	}
	f.mu.Unlock()
	if f.afterRead != nil {
		f.afterRead(r.GetTaskQueue().GetName())
	}
	return resp, nil
}

func (f *fakeServer) UpdateTaskQueueConfig(_ context.Context, r *workflowservice.UpdateTaskQueueConfigRequest, _ ...grpc.CallOption) (*workflowservice.UpdateTaskQueueConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, r)
	f.limits[r.TaskQueue] = limitAt(r.GetUpdateQueueRateLimit().GetRateLimit(), r.GetUpdateQueueRateLimit().GetReason(), time.Now())
	return &workflowservice.UpdateTaskQueueConfigResponse{}, nil
}

func (f *fakeServer) SignalWithStartWorkflowExecution(_ context.Context, r *workflowservice.SignalWithStartWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.SignalWithStartWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, r)
	return &workflowservice.SignalWithStartWorkflowExecutionResponse{}, nil
}

// limitAt is a queue's limit as the server holds it (nil rate: none), stamped at the server's time at.
func limitAt(rate *taskqueuepb.RateLimit, reason string, at time.Time) *taskqueuepb.RateLimitConfig {
	if rate == nil {
		return nil
	}
	return &taskqueuepb.RateLimitConfig{RateLimit: rate, Metadata: &taskqueuepb.ConfigMetadata{Reason: reason, UpdateTime: timestamppb.New(at)}}
}

// keepOnce runs p's Keep for one pass.
func keepOnce(p *Pacer) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Keep(ctx, time.Hour, func(string, error) {})
}

var queueA = ProviderQueue("q", "a", SubmitQueue)

// An operator's limit stays when the read of a refusal fails (the frontend busy as the fleet is refused): nothing is
// written on a failed read.
func TestRefusalNeverWritesOnAFailedRead(t *testing.T) {
	f := newFakeServer()
	f.limits[queueA] = limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 5}, "incident 42", time.Now())
	f.readErr = errors.New("frontend busy")
	p := &Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {Submits: 14, Results: 14}}}
	_ = p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", 10*time.Second)
	if len(f.writes) != 0 || f.limits[queueA].GetMetadata().GetReason() != "incident 42" {
		t.Fatalf("wrote %v over an unread limit; now %v", f.writes, f.limits[queueA])
	}
}

// Another worker's pause, stamped on the server's clock, is not ended by a worker whose clock runs 30 s fast: no
// worker's clock decides a pause, and no worker's Keep writes over another's decision.
func TestAFastClockDoesNotEndAnotherWorkersPause(t *testing.T) {
	f := newFakeServer()
	f.limits[queueA] = limitAt(&taskqueuepb.RateLimit{}, pacePrefix+"paused for 10s after MAX_USER_TURN", time.Now().Add(-30*time.Second))
	f.keepers[PaceKeeperID(queueA)] = true
	keepOnce(&Pacer{Service: f, TaskQueue: "q", Identity: "b", Rates: map[string]providers.Rates{"a": {Submits: 14, Results: 14}}})
	if len(f.writes) != 0 {
		t.Fatalf("a fast worker ended the pause: %v", f.writes)
	}
}

// Two pacers and an operator interleaving: between one pacer's read and its write, another pacer pauses the queue,
// or an operator sets a limit; neither decision is undone.
func TestKeepNeverUndoesANewerDecision(t *testing.T) {
	for name, newer := range map[string]*taskqueuepb.RateLimitConfig{
		"another pacer's pause": limitAt(&taskqueuepb.RateLimit{}, pacePrefix+"paused for 10s after MAX_USER_TURN", time.Now()),
		"an operator's limit":   limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 2}, "incident 42", time.Now()),
	} {
		f := newFakeServer()
		f.keepers[PaceKeeperID(queueA)] = true
		f.limits[queueA] = limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 7}, pacePrefix+"ramping", time.Now().Add(-time.Minute))
		f.afterRead = func(queue string) {
			if queue == queueA {
				f.limits[queueA] = newer
			}
		}
		keepOnce(&Pacer{Service: f, TaskQueue: "q", Identity: "b", Rates: map[string]providers.Rates{"a": {Submits: 14, Results: 14}}})
		if len(f.writes) != 0 {
			t.Errorf("%s undone: %v", name, f.writes)
		}
	}
}

// A burst of refusals on one worker signals the keeper once; the order names the queue, its configured rate, the bar
// (at least RampEvery) and the cause, and starts the queue's keeper on the task queue.
func TestRefusalsOfABurstSignalTheKeeperOnce(t *testing.T) {
	f := newFakeServer()
	p := &Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {Submits: 14, Results: 14}}}
	for range 20 {
		if err := p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.signals) != 1 || len(f.writes) != 0 {
		t.Fatalf("%d signals, %d writes", len(f.signals), len(f.writes))
	}
	s := f.signals[0]
	var order PaceOrder
	if err := converter.GetDefaultDataConverter().FromPayloads(s.SignalInput, &order); err != nil {
		t.Fatal(err)
	}
	want := PaceOrder{Queue: queueA, Want: 14, Wait: RampEvery, What: "MAX_USER_TURN"}
	if order != want || s.WorkflowId != PaceKeeperID(queueA) || s.SignalName != PaceRefusedSignal ||
		s.WorkflowType.GetName() != PaceWorkflowType || s.TaskQueue.GetName() != "q" {
		t.Fatalf("signalled %v: %+v", s, order)
	}
}

// Queue: a configured account is always paced; an unconfigured one only while a limit is in force as this worker
// last saw it (its own refusal at once, another's at Keep's next read); a failed read changes nothing.
func TestQueueFollowsWhatTheWorkerSaw(t *testing.T) {
	f := newFakeServer()
	p := &Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {}, "b": {Submits: 3}}}
	queueB := ProviderQueue("q", "b", SubmitQueue)
	if (*Pacer)(nil).Queue("a", SubmitQueue) != "" || p.Queue("a", SubmitQueue) != "" || p.Queue("b", SubmitQueue) != queueB {
		t.Fatal("a nil pacer paces, or the unconfigured account is paced, or the configured one is not")
	}
	f.limits[queueA] = limitAt(&taskqueuepb.RateLimit{}, PausedFor+"10s after MAX_USER_TURN", time.Now())
	f.keepers[PaceKeeperID(queueA)] = true
	if keepOnce(p); p.Queue("a", SubmitQueue) != queueA || p.Queue("a", ResultsQueue) != "" {
		t.Fatal("another worker's pause not learned, or learned on the wrong queue")
	}
	f.readErr, f.limits[queueA] = errors.New("frontend busy"), nil
	if keepOnce(p); p.Queue("a", SubmitQueue) != queueA {
		t.Fatal("a failed read unpaced the queue")
	}
	f.readErr = nil
	if keepOnce(p); p.Queue("a", SubmitQueue) != "" || len(f.writes) != 0 {
		t.Fatalf("a cleared queue still paced, or Keep wrote %v", f.writes)
	}
	_ = p.Refused(context.Background(), "a", ResultsQueue, "ERROR_TOO_MUCH_REQUESTS", time.Second)
	if p.Queue("a", ResultsQueue) == "" {
		t.Fatal("this worker's own refusal not paced at once")
	}
}

// A limit of captchaflow's that no keeper holds (its keeper terminated, or one an earlier release wrote) is handed to
// a keeper to ramp back, naming it; one a keeper holds, an operator's, or one cleared between two reads is not.
func TestKeepHandsAnOrphanedLimitToAKeeper(t *testing.T) {
	orphan := pacePrefix + "configured"
	for name, c := range map[string]struct {
		reason   string
		kept     bool
		cleared  bool
		orphaned bool
	}{
		"an earlier release's": {reason: orphan, orphaned: true},
		"held by its keeper":   {reason: orphan, kept: true},
		"an operator's":        {reason: "incident 42"},
		"cleared meanwhile":    {reason: orphan, cleared: true},
	} {
		f := newFakeServer()
		f.limits[queueA], f.keepers[PaceKeeperID(queueA)] = limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 13}, c.reason, time.Now()), c.kept
		reads := 0
		f.afterRead = func(queue string) {
			if reads++; queue == queueA && c.cleared {
				f.limits[queueA] = nil
			}
		}
		keepOnce(&Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {Submits: 13}}})
		var orders []PaceOrder
		for _, s := range f.signals {
			var order PaceOrder
			if err := converter.GetDefaultDataConverter().FromPayloads(s.SignalInput, &order); err != nil {
				t.Fatal(err)
			}
			orders = append(orders, order)
		}
		want := []PaceOrder(nil)
		if c.orphaned {
			want = []PaceOrder{{Queue: queueA, Want: 13, What: "a limit no keeper held", Orphan: orphan}}
		}
		if fmt.Sprint(orders) != fmt.Sprint(want) || len(f.writes) != 0 {
			t.Errorf("%s: told %+v, wrote %v", name, orders, f.writes)
		}
	}
}

// PaceQueue reads before it writes: nothing on a failed read, nothing over an operator's limit, a pause over any
// limit of captchaflow's, a raise only over the keeper's own last limit, nothing again for a write already made.
func TestPaceQueueWritesOnlyWhatItMay(t *testing.T) {
	pause := PaceWrite{Queue: queueA, Rate: 0, Reason: PausedFor + "10s after MAX_USER_TURN"}
	raise := PaceWrite{Queue: queueA, Rate: 4, Reason: PaceRamping + "4/s", Over: pause.Reason}
	clear := PaceWrite{Queue: queueA, Rate: -1, Over: raise.Reason}
	operator := limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 5}, "incident 42", time.Now())
	for _, c := range []struct {
		name    string
		held    *taskqueuepb.RateLimitConfig
		readErr error
		w       PaceWrite
		wrote   bool
		failure string // "retry": a retryable error
	}{
		{"a failed read", nil, errors.New("frontend busy"), pause, false, "retry"},
		{"a pause over an operator's limit", operator, nil, pause, false, FailureSuperseded},
		{"a raise over an operator's limit", operator, nil, raise, false, FailureSuperseded},
		{"a pause over nothing", nil, nil, pause, true, ""},
		{"a pause over captchaflow's ramp", limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 8}, PaceRamping+"8/s", time.Now()), nil, pause, true, ""},
		{"a raise over its own pause", limitAt(&taskqueuepb.RateLimit{}, pause.Reason, time.Now()), nil, raise, true, ""},
		{"a raise over another pause", limitAt(&taskqueuepb.RateLimit{}, PausedFor+"1m0s after ERROR: 1001", time.Now()), nil, raise, false, FailureSuperseded},
		{"a raise over a cleared limit", nil, nil, raise, false, FailureSuperseded},
		{"a raise already made", limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 4}, raise.Reason, time.Now()), nil, raise, false, ""},
		{"the clear over its own ramp", limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 4}, raise.Reason, time.Now()), nil, clear, true, ""},
		{"a clear already made (its answer lost)", nil, nil, clear, false, ""},
	} {
		f := newFakeServer()
		f.limits[queueA], f.readErr = c.held, c.readErr
		err := (&Activities{Pace: &Pacer{Service: f}}).PaceQueue(context.Background(), c.w)
		var app *temporal.ApplicationError
		got := map[bool]string{true: "retry"}[err != nil]
		if errors.As(err, &app) && app.NonRetryable() {
			got = app.Type()
		}
		if got != c.failure || (len(f.writes) == 1) != c.wrote {
			t.Errorf("%s: err %v, wrote %v", c.name, err, f.writes)
		}
		if c.wrote && (f.limits[queueA].GetRateLimit() == nil) != (c.w.Rate < 0) {
			t.Errorf("%s: now %v", c.name, f.limits[queueA])
		}
	}
}

// A refusal that comes while a read of the queue is in flight is not undone by that read's answer (no limit yet: the
// keeper has not paused it): this worker's next requests stay on the paced queue.
func TestARefusalDuringAReadStaysPaced(t *testing.T) {
	f := newFakeServer()
	p := &Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {}}}
	f.afterRead = func(queue string) {
		if queue == queueA {
			_ = p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", time.Second)
		}
	}
	if keepOnce(p); p.Queue("a", SubmitQueue) != queueA {
		t.Fatal("the read that began before the refusal unpaced the queue")
	}
}

// laneRate is the rate of p's lane of queue (0: none open).
func laneRate(p *Pacer, queue string) float64 {
	if l, open := p.openLaneOf(queue); open {
		return float64(l.Limit())
	}
	return 0
}

// A worker's lane of a configured submit queue opens on the third read listing it among the queue's pollers (the
// other workers, reading as often, count it by then), takes LaneShare of the rate split among the workers listed, has
// room for one Submit at a time at that rate (which a Submit takes as it goes), and is shut by a read that does not
// list the worker, a limit, a failed read, or no read for laneFresh.
func TestLaneOpensOnceTheWorkerIsListedAndTakesItsShare(t *testing.T) {
	f := newFakeServer()
	f.pollers = map[string][]string{queueA: {"w1", "w2", "w1"}, ProviderQueue("q", "a", ResultsQueue): {"w1"}}
	p := &Pacer{Service: f, TaskQueue: "q", Identity: "w1", Rates: map[string]providers.Rates{"a": {Submits: 40, Results: 40}}}
	for read := 1; read <= 3; read++ {
		if keepOnce(p); read < 3 && p.Lane(queueA) {
			t.Fatalf("the lane opened on read %d", read)
		}
	}
	if got := laneRate(p, queueA); got != 40*LaneShare/2 {
		t.Fatalf("the lane's rate is %g, want a quarter of 40 split between two workers", got)
	}
	if !p.Lane(queueA) || !p.takeLane(queueA) || p.Lane(queueA) || p.takeLane(queueA) {
		t.Fatal("an open lane has room for one Submit, which takes it; then none until its interval")
	}
	if keepOnce(p); p.Lane(queueA) || laneRate(p, ProviderQueue("q", "a", ResultsQueue)) != 0 {
		t.Fatal("a read refilled the lane, or gave a results queue one")
	}
	shut := map[string]func(){
		"a read not listing the worker": func() { f.pollers[queueA] = []string{"w2"} },
		"an older release's worker asking for the whole rate": func() {
			f.pollers[queueA], f.asks = []string{"w1", "old"}, map[string]float64{"w1": 30, "old": 40}
		},
		"a refusal's pause not yet written": func() {
			_ = p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", time.Second)
		},
		"a limit in force": func() {
			f.limits[queueA] = limitAt(&taskqueuepb.RateLimit{RequestsPerSecond: 5}, "incident 42", time.Now())
		},
		"a failed read": func() { f.readErr = errors.New("frontend busy") },
		"no read for laneFresh": func() {
			l, _ := p.lanes.Load(queueA)
			p.lanes.Store(queueA, lane{l.(lane).Limiter, time.Now().Add(-laneFresh - time.Second)})
		},
	}
	for name, change := range shut {
		f.pollers[queueA], f.limits[queueA], f.readErr, f.asks = []string{"w1"}, nil, nil, nil
		p.refused.Delete(queueA)
		p.limited.Delete(queueA)
		for range 3 {
			keepOnce(p)
		}
		if laneRate(p, queueA) != 40*LaneShare {
			t.Fatalf("before %s: the lane's rate is %g, want the whole share of the only worker", name, laneRate(p, queueA))
		}
		if change(); name != "no read for laneFresh" {
			keepOnce(p)
		}
		if laneRate(p, queueA) != 0 || p.takeLane(queueA) {
			t.Errorf("%s left the lane open", name)
		}
	}
}

// A refusal shuts the worker's lane at once: its next Submits go to the queue the keeper pauses.
func TestARefusalShutsTheLane(t *testing.T) {
	f := newFakeServer()
	f.pollers = map[string][]string{queueA: {"w1"}}
	p := &Pacer{Service: f, TaskQueue: "q", Identity: "w1", Rates: map[string]providers.Rates{"a": {Submits: 100}}}
	for range 3 {
		keepOnce(p)
	}
	if !p.Lane(queueA) {
		t.Fatal("the lane did not open")
	}
	_ = p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", time.Second)
	if p.Lane(queueA) || p.takeLane(queueA) || p.Queue("a", SubmitQueue) != queueA {
		t.Fatal("a refusal left the lane open")
	}
}

// A lane's bucket holds a tenth of a second of its share (at least one Submit): tasks scheduled together at a high
// rate find room; below LaneMinRate (2captcha's 13 a second) there is no lane, and the queue keeps the whole rate.
func TestALanesBucketIsATenthOfASecondOfItsShare(t *testing.T) {
	if PollerRate(SubmitQueue, 13) != 13 || PollerRate(SubmitQueue, 1000) != 750 || PollerRate(ResultsQueue, 1000) != 1000 {
		t.Fatal("the pollers ask for three quarters of a submit rate of at least LaneMinRate, and the whole of any other")
	}
	for rate, want := range map[float64]int{1000: 25, 40: 1, 13: 0} {
		f := newFakeServer()
		f.pollers = map[string][]string{queueA: {"w1"}}
		p := &Pacer{Service: f, TaskQueue: "q", Identity: "w1", Rates: map[string]providers.Rates{"a": {Submits: rate}}}
		for range 3 {
			keepOnce(p)
		}
		took := 0
		for p.takeLane(queueA) && took < 100 {
			took++
		}
		if took != want {
			t.Errorf("at %g a second the lane had room for %d at once, want %d", rate, took, want)
		}
	}
}
