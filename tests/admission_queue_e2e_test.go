package tests

// Ten thousand tasks queued on one task queue (issue #16): the semaphore takes them in batched asks, answers its
// query with a bounded view, and carries them across a continue-as-new (here forced by a cancel) within the payload
// limits. The requesters are names only: four fake holders keep every slot taken, so nothing is granted.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/workflows"
)

func TestE2E_SemaphoreCarriesTenThousandQueued(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queue := "captcha-queue10k-" + s.runID
	semID := activities.ThreadsWorkflowID(queue)
	w := worker.New(s.c, queue, worker.Options{})
	workflows.Register(w, &activities.Activities{ProviderThreads: 4}, workflows.Settings{ProviderThreads: 4})
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		_ = s.c.TerminateWorkflow(context.Background(), semID, "", "test over")
		w.Stop()
	})
	_, err := activities.EnsureThreadsPlan(ctx, s.c, queue, activities.PlanChange{Threads: 4})
	require.NoError(t, err)

	ask := func(reqs []activities.SlotRequest) {
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: semID, UpdateName: activities.AcquireSlotsUpdate,
			Args: []any{reqs}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var tickets []activities.SlotTicket
		require.NoError(t, h.Get(ctx, &tickets))
	}
	var holders []activities.SlotRequest
	for i := range 4 {
		holders = append(holders, activities.SlotRequest{WorkflowID: fmt.Sprintf("holder-%d", i), RunID: uuid.NewString(), Seq: 1, Held: true})
	}
	ask(holders)
	began := time.Now()
	for b := range 50 {
		reqs := make([]activities.SlotRequest, 200)
		for i := range reqs {
			reqs[i] = activities.SlotRequest{WorkflowID: fmt.Sprintf("order-%08d-captcha", b*200+i), RunID: uuid.NewString(),
				Seq: 1, RequestedAt: time.Now()}
		}
		ask(reqs)
	}
	t.Logf("10 000 asks in 50 updates: %s", time.Since(began).Round(time.Millisecond))
	view := func() activities.SlotsView {
		q, err := s.c.QueryWorkflow(ctx, semID, "", activities.SlotsQuery)
		require.NoError(t, err)
		var v activities.SlotsView
		require.NoError(t, q.Get(&v))
		return v
	}
	before := view()
	assert.Equal(t, 4, before.InUse)
	assert.Equal(t, 10_000, before.Queued)
	assert.Len(t, before.QueueHead, activities.SlotsViewQueueHead)

	desc, err := s.c.DescribeWorkflow(ctx, semID, "")
	require.NoError(t, err)
	first := desc.WorkflowExecution.RunID
	require.NoError(t, s.c.CancelWorkflow(ctx, semID, ""))
	require.Eventually(t, func() bool {
		d, err := s.c.DescribeWorkflow(ctx, semID, "")
		return err == nil && d.WorkflowExecution.RunID != first
	}, 30*time.Second, 100*time.Millisecond, "continued as new")
	after := view()
	assert.Equal(t, before.Epoch, after.Epoch, "the same instance: nobody re-registers")
	assert.Equal(t, 10_000, after.Queued)
	ids := func(v activities.SlotsView) (out []string) {
		for _, r := range v.QueueHead {
			out = append(out, r.WorkflowID+"/"+r.RunID)
		}
		return out
	}
	assert.Equal(t, ids(before), ids(after), "in the same order (request times kept to the millisecond)")

	carried := continuedAsNewInputBytes(ctx, t, s, semID, first)
	t.Logf("carried to the next run: %d bytes (%.1f %% of the 2 MB payload limit)", carried, 100*float64(carried)/(2<<20))
	assert.Less(t, carried, 512<<10, "below Temporal's 512 KB payload warning")
}

// continuedAsNewInputBytes is the size of the input run runID of id carried to the run after it.
func continuedAsNewInputBytes(ctx context.Context, t *testing.T, s *stack, id, runID string) int {
	iter := s.c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return proto.Size(a.GetInput())
		}
	}
	t.Fatal("no continued-as-new event")
	return 0
}
