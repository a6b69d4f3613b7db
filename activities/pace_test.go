package activities

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/captchaflow/captchaflow/providers"
)

// A pause holds to its end, then the queue ramps from a quarter of its rate, doubling every rampEvery; an operator's
// limit stays; anything else is set to the configured rate.
func TestNextRate(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	paused := pausedFor + "10s after MAX_USER_TURN"
	for _, c := range []struct {
		name    string
		cur     *float64
		reason  string
		updated time.Duration // before now
		rate    float64
		why     string
	}{
		{"unset: configured", nil, "", 0, 14, paceConfigured},
		{"configured: kept", new(14.0), paceConfigured, 0, 0, ""},
		{"configured elsewhere: brought to this worker's", new(20.0), paceConfigured, 0, 14, paceConfigured},
		{"paused: kept until its end", new(0.0), paused, 7 * time.Second, 0, ""},
		{"paused past its end: a quarter", new(0.0), paused, 11 * time.Second, 3.5, paceRamping},
		{"an unparsable pause ramps", new(0.0), pausedFor + "soon", 0, 3.5, paceRamping},
		{"a pause past the longest bar ends at it", new(0.0), pausedFor + "24h", maxPause + time.Second, 3.5, paceRamping},
		{"ramping, too soon", new(3.5), paceRamping, time.Second, 0, ""},
		{"ramping: doubles", new(3.5), paceRamping, rampEvery, 7, paceRamping},
		{"ramping: reaches the rate", new(7.0), paceRamping, rampEvery, 14, paceConfigured},
		{"an operator's limit is theirs", new(2.0), "incident 42", 0, 0, ""},
		{"an operator's unset limit: configured", nil, "incident 42", 0, 14, paceConfigured},
	} {
		rate, why := nextRate(now, c.cur, c.reason, now.Add(-c.updated), 14)
		if rate != c.rate || why != c.why {
			t.Errorf("%s: got (%v, %q), want (%v, %q)", c.name, rate, why, c.rate, c.why)
		}
	}
}

// fakeQueues is the server's side of the queue configs: Describe answers the operator's limit, Update records.
type fakeQueues struct {
	workflowservice.WorkflowServiceClient
	mu       sync.Mutex
	set      map[string]*workflowservice.UpdateTaskQueueConfigRequest
	updates  int
	operator *taskqueuepb.RateLimitConfig
}

func (f *fakeQueues) DescribeTaskQueue(context.Context, *workflowservice.DescribeTaskQueueRequest, ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{Config: &taskqueuepb.TaskQueueConfig{QueueRateLimit: f.operator}}, nil
}

func (f *fakeQueues) UpdateTaskQueueConfig(_ context.Context, r *workflowservice.UpdateTaskQueueConfigRequest, _ ...grpc.CallOption) (*workflowservice.UpdateTaskQueueConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set[r.TaskQueue], f.updates = r, f.updates+1
	return &workflowservice.UpdateTaskQueueConfigResponse{}, nil
}

// A burst of refusals on one worker pauses the queue once; the pause names its end and cause.
func TestRefusalsOfABurstPauseOnce(t *testing.T) {
	f := &fakeQueues{set: map[string]*workflowservice.UpdateTaskQueueConfigRequest{}}
	p := &Pacer{Service: f, TaskQueue: "q", Rates: map[string]providers.Rates{"a": {Submits: 14, Results: 14}}}
	for range 20 {
		p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", 10*time.Second)
	}
	got := f.set[ProviderQueue("q", "a", SubmitQueue)]
	if f.updates != 1 || got.GetUpdateQueueRateLimit().GetRateLimit().GetRequestsPerSecond() != 0 ||
		got.GetUpdateQueueRateLimit().GetReason() != pausedFor+"10s after MAX_USER_TURN" || !strings.HasSuffix(got.GetUpdateQueueRateLimit().GetReason(), "after MAX_USER_TURN") {
		t.Fatalf("%d updates, last %v", f.updates, got)
	}
}

// An operator's limit stays in force: a refusal does not pause over it, and says so.
func TestRefusalLeavesAnOperatorsLimit(t *testing.T) {
	f := &fakeQueues{set: map[string]*workflowservice.UpdateTaskQueueConfigRequest{}, operator: &taskqueuepb.RateLimitConfig{
		RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: 5}, Metadata: &taskqueuepb.ConfigMetadata{Reason: "incident 42"}}}
	p := &Pacer{Service: f, TaskQueue: "q"}
	if err := p.Refused(context.Background(), "a", SubmitQueue, "MAX_USER_TURN", 10*time.Second); !errors.Is(err, ErrOperatorLimit) || f.updates != 0 {
		t.Fatalf("err %v, %d updates", err, f.updates)
	}
}
