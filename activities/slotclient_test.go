package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// semaphoreDescription is what DescribeWorkflow answers for a semaphore run.
func semaphoreDescription(status enumspb.WorkflowExecutionStatus, runID, epoch string, reset bool) *client.WorkflowExecutionDescription {
	d := &client.WorkflowExecutionDescription{RawResponse: semaphoreResponse(status, runID, epoch, reset)}
	d.Status = status
	return d
}

func semaphoreResponse(status enumspb.WorkflowExecutionStatus, runID, epoch string, reset bool) *workflowservice.DescribeWorkflowExecutionResponse {
	p, _ := converter.GetDefaultDataConverter().ToPayload(epoch)
	resp := &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status,
			Execution: &commonpb.WorkflowExecution{WorkflowId: ThreadsWorkflowID("q"), RunId: runID},
			Memo:      &commonpb.Memo{Fields: map[string]*commonpb.Payload{MemoEpoch: p}}},
		WorkflowExtendedInfo: &workflowpb.WorkflowExecutionExtendedInfo{},
	}
	if reset {
		resp.WorkflowExtendedInfo.LastResetTime = timestamppb.Now()
	}
	return resp
}

func TestTicketCurrentOnlyWhileItsInstanceRuns(t *testing.T) {
	running := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	for _, tc := range []struct {
		name string
		desc *client.WorkflowExecutionDescription
		want bool
	}{
		{"same instance (maybe continued as new)", semaphoreDescription(running, "run-2", "run-1", false), true},
		{"replaced: another epoch", semaphoreDescription(running, "run-3", "run-3", false), false},
		{"terminated, none running", semaphoreDescription(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "run-1", "run-1", false), false},
		{"reset, not yet taken up its epoch", semaphoreDescription(running, "run-4", "run-1", true), false},
		{"reset, epoch taken up", semaphoreDescription(running, "run-4", "run-4", true), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &mocks.Client{}
			c.On("DescribeWorkflow", mock.Anything, ThreadsWorkflowID("q"), "").Return(tc.desc, nil).Once()
			sc := (&Activities{}).slotClient(c)
			epoch := "run-1"
			if tc.desc.RawResponse.WorkflowExtendedInfo.LastResetTime != nil && tc.want {
				epoch = "run-4"
			}
			got, err := sc.ticketCurrent(context.Background(), ThreadsWorkflowID("q"), epoch)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			got, _ = sc.ticketCurrent(context.Background(), ThreadsWorkflowID("q"), epoch)
			assert.Equal(t, tc.want, got, "answered from the view without describing again")
			c.AssertExpectations(t)
		})
	}
}

// updateHandle answers a batch of n requests with one ticket each.
func updateHandle(n int, granted func(i int) bool) *mocks.WorkflowUpdateHandle {
	h := &mocks.WorkflowUpdateHandle{}
	h.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, out any) error {
		tickets := make([]SlotTicket, n)
		for i := range tickets {
			tickets[i] = SlotTicket{Semaphore: ThreadsWorkflowID("q"), Epoch: "e", Granted: granted(i)}
		}
		*out.(*[]SlotTicket) = tickets
		return nil
	})
	return h
}

func TestAcquiresOfTheMomentTravelInOneUpdate(t *testing.T) {
	c := &mocks.Client{}
	release := make(chan struct{})
	var calls, requests atomic.Int32
	c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(func(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		if calls.Add(1) == 1 {
			<-release // the first update is in flight while the others arrive
		}
		reqs := o.Args[0].([]SlotRequest)
		requests.Add(int32(len(reqs)))
		assert.Equal(t, AcquireSlotsUpdate, o.UpdateName)
		return updateHandle(len(reqs), func(int) bool { return true }), nil
	})
	sc := (&Activities{ProviderThreads: 4}).slotClient(c)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			ticket, err := sc.acquire(context.Background(), "q", SlotRequest{WorkflowID: fmt.Sprint(i), RunID: "r", Seq: 1})
			assert.NoError(t, err)
			assert.True(t, ticket.Granted)
		})
	}
	require.Eventually(t, func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		b := sc.batchers["q"]
		if b == nil {
			return false
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == 49
	}, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(2), calls.Load(), "one update in flight, then one for everything that queued behind it")
	assert.Equal(t, int32(50), requests.Load())
}

func TestNoSemaphoreIsStartedWithoutAPlan(t *testing.T) {
	c := &mocks.Client{}
	c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewNotFound("workflow not found"))
	sc := (&Activities{}).slotClient(c)
	_, err := sc.acquire(context.Background(), "q", SlotRequest{WorkflowID: "t", RunID: "r", Seq: 1})
	assert.ErrorIs(t, err, ErrNoSemaphore, "a worker without PROVIDER_THREADS never starts a semaphore with 0 threads")
	c.AssertNotCalled(t, "UpdateWithStartWorkflow", mock.Anything, mock.Anything)
}

func TestAReplacementStartsFencedOnlyAfterAnUnhandedOverInstance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		previous map[string]enumspb.WorkflowExecutionStatus // by workflow ID; absent: not found
		fence    bool
	}{
		{"first ever", nil, false},
		{"terminated", map[string]enumspb.WorkflowExecutionStatus{ThreadsWorkflowID("q"): enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}, true},
		{"the first release's semaphore ran", map[string]enumspb.WorkflowExecutionStatus{LegacyThreadsWorkflowID("q"): enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, true},
		{"completed", map[string]enumspb.WorkflowExecutionStatus{ThreadsWorkflowID("q"): enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &mocks.Client{}
			c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewNotFound("workflow not found"))
			for _, id := range []string{ThreadsWorkflowID("q"), LegacyThreadsWorkflowID("q")} {
				if status, ok := tc.previous[id]; ok {
					c.On("DescribeWorkflow", mock.Anything, id, "").Return(semaphoreDescription(status, "old", "old", false), nil)
				} else {
					c.On("DescribeWorkflow", mock.Anything, id, "").Return(nil, serviceerror.NewNotFound("none"))
				}
			}
			var started SemaphoreState
			c.On("NewWithStartWorkflowOperation", mock.Anything, ThreadsWorkflowType, mock.Anything, mock.Anything).
				Run(func(args mock.Arguments) { started = args.Get(2).(SemaphoreState) }).Return(nil)
			c.On("UpdateWithStartWorkflow", mock.Anything, mock.Anything).Return(updateHandle(1, func(int) bool { return false }), nil)
			sc := (&Activities{ProviderThreads: 40}).slotClient(c)
			_, err := sc.acquire(context.Background(), "q", SlotRequest{WorkflowID: "t", RunID: "r", Seq: 1})
			require.NoError(t, err)
			assert.Equal(t, SemaphoreState{Threads: 40, Fence: tc.fence}, started, "the worker's plan, never 0")
		})
	}
}

// Finding 7 of issue 20: a reset run replays the tickets of the run it was reset from. Its re-asks and re-assertions
// must reach the semaphore (which knows only the original run's request, and reclaims it once that run is gone);
// the run the ticket was issued to is still answered from the view.
func TestTicketOfAnotherRunIsNotTrusted(t *testing.T) {
	id := ThreadsWorkflowID("default-test-taskqueue")
	ticket := SlotTicket{Semaphore: id, Epoch: "e1", Granted: true, RunID: "original-run"}
	for _, tc := range []struct {
		run     string
		updates int
	}{{"original-run", 0}, {"reset-run", 1}} {
		t.Run(tc.run, func(t *testing.T) {
			c := &mocks.Client{}
			c.On("DescribeWorkflow", mock.Anything, id, "").Return(semaphoreDescription(
				enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "e1", "e1", false), nil)
			var asked []SlotRequest
			c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(func(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
				asked = append(asked, o.Args[0].([]SlotRequest)...)
				return updateHandle(1, func(int) bool { return true }), nil
			})
			a := &Activities{ProviderThreads: 2}
			a.slotClient(c)
			var ts testsuite.WorkflowTestSuite
			env := ts.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			_, err := env.ExecuteActivity(a.AcquireSlot, SlotRequest{WorkflowID: "task", RunID: tc.run, Seq: 1,
				Held: true, Ticket: &ticket})
			require.NoError(t, err)
			require.Len(t, asked, tc.updates, "requests sent to the semaphore for run %s", tc.run)
			for _, req := range asked {
				assert.Equal(t, tc.run, req.RunID)
				assert.True(t, req.Held, "the reset run re-asserts the slot as its own")
			}
		})
	}
}
