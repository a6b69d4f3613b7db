package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/activities"
)

func TestSlotQueueKeepsOrderThroughRemovalsAndRequeues(t *testing.T) {
	q := newSlotQueue(nil)
	for i := range 200 {
		assert.True(t, q.push(request(fmt.Sprint(i))))
	}
	assert.False(t, q.push(request("5")), "a retried ask keeps its place")
	for i := range 150 {
		if i%2 == 0 {
			q.remove(requestKey(request(fmt.Sprint(i))))
		}
	}
	q.push(request("0")) // removed, then asked again: to the back of the line
	assert.Equal(t, 200-75+1, q.len())
	first, ok := q.pop()
	require.True(t, ok)
	assert.Equal(t, "1", first.WorkflowID)
	ids := queuedIDs(q.list(-1))
	assert.Equal(t, "3", ids[0])
	assert.Equal(t, "0", ids[len(ids)-1])
	assert.Len(t, ids, 125)
	for range 125 {
		_, ok := q.pop()
		require.True(t, ok)
	}
	_, ok = q.pop()
	assert.False(t, ok)
	assert.Zero(t, q.len())
}

func TestPackedQueueRoundTrips(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	reqs := []activities.SlotRequest{
		{WorkflowID: "task-1", RunID: uuid.NewString(), Seq: 1, RequestedAt: t0},
		{WorkflowID: "task-2", RunID: "not-a-uuid", Seq: 3, Threads: 4, RequestedAt: t0.Add(-time.Second)},
		{WorkflowID: "task-3", RunID: uuid.NewString(), Seq: 2},
	}
	packed, err := packQueue(reqs)
	require.NoError(t, err)
	got, err := unpackQueue(packed)
	require.NoError(t, err)
	assert.Equal(t, reqs, got)

	_, err = unpackQueue(packed[:len(packed)/2])
	assert.Error(t, err, "a damaged queue is refused, not read as something else")
}

// 10 000 tasks queued on one task queue: the queue the semaphore carries to its next run, against Temporal's 2 MB
// payload limit (and its 512 KB warning).
func TestTenThousandQueuedFitFarBelowThePayloadLimit(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var reqs []activities.SlotRequest
	bytes := 0
	for i := range 10_000 {
		r := activities.SlotRequest{WorkflowID: fmt.Sprintf("order-%08d-captcha", 7_000_000+i*13), RunID: uuid.NewString(),
			Seq: 1 + i%2, RequestedAt: t0.Add(time.Duration(i) * 7 * time.Millisecond)}
		reqs = append(reqs, r)
		bytes += packedSize(r)
	}
	packed, err := packQueue(reqs)
	require.NoError(t, err)
	t.Logf("10 000 queued requests (24-character task IDs, UUID run IDs): packed %d bytes (%.1f per request), "+
		"%.1f %% of the 2 MB payload limit; counted against maxQueueBytes: %d", len(packed),
		float64(len(packed))/10_000, 100*float64(len(packed))/(2<<20), bytes)
	assert.Less(t, len(packed), 512<<10, "below Temporal's 512 KB payload warning")
	assert.Less(t, bytes, maxQueueBytes, "10 000 such requests are accepted")
	got, err := unpackQueue(packed)
	require.NoError(t, err)
	assert.Equal(t, reqs, got)
}
