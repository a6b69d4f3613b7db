package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

// TestE2E_RecordNexusCallerHistories: a caller team's workflow (SolveViaNexus) on each path through the endpoint —
// solved asynchronously, answered at once for a solved task, failed with captchaflow's type, cancelled — replays on
// today's code, also as a reset run. With RECORD_HISTORIES=1 (make record-histories) they are written to testdata/
// for TestReplayRecordedHistories: a change to the caller's side that breaks running callers fails there.
func TestE2E_RecordNexusCallerHistories(t *testing.T) {
	s := requireStack(t)
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "recnexus")
	trs := sc.add(3, taskSpec{Kind: "recorded nexus caller"})
	solved, invalid, cancelled := trs[0], trs[1], trs[2]
	for _, id := range []string{solved.ID + "-caller", solved.ID + "-caller-late"} { // the second after the task completed
		run, err := callThroughNexus(ctx, shop, id, solved.ID, s.input(solved.taskSpec))
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil), id)
	}
	bad := s.input(invalid.taskSpec)
	bad.Params["key"] = "not-allowed"
	run, err := callThroughNexus(ctx, shop, invalid.ID+"-caller", invalid.ID, bad)
	require.NoError(t, err)
	require.Equal(t, captchaflow.FailureInvalidInput, captchaflow.FailureType(run.Get(ctx, nil)))
	slow := s.input(cancelled.taskSpec)
	slow.CallbackTimeoutSeconds, slow.Params["sim_solve_ms"] = 60, "60000"
	cancelThroughNexus(ctx, t, s, shop, cancelled.ID, slow, captchaflow.PhaseAwaitingCallback)

	recordings := map[string]string{"nexus-caller-solved": solved.ID + "-caller",
		"nexus-caller-task-already-solved": solved.ID + "-caller-late",
		"nexus-caller-invalid-input":       invalid.ID + "-caller", "nexus-caller-cancelled": cancelled.ID + "-caller"}
	ends := map[string]string{"nexus-caller-solved": "NexusOperationCompleted", "nexus-caller-task-already-solved": "NexusOperationCompleted",
		"nexus-caller-invalid-input": "NexusOperationFailed", "nexus-caller-cancelled": "NexusOperationCanceled"}
	fetch := func(ctx context.Context, id string) (*historypb.History, error) {
		h := clientHistory(ctx, t, shop, id, "")
		return h, s.decoded(ctx, h)
	}
	for name, id := range recordings {
		events := nexusEvents(ctx, t, shop, id)
		if assert.NotEmpty(t, events, name) {
			assert.Equal(t, ends[name], events[len(events)-1], "%s: %v", name, events)
		}
	}
	replayCallers(t, s, shop, mapsValues(recordings)...)
	recordNewFrom(t, s, fetch, recordings)
}

// replayCallers replays caller workflows' histories from shop's namespace, also as reset runs.
func replayCallers(t *testing.T, s *stack, shop client.Client, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	replayer := newReplayer()
	for _, id := range ids {
		h := clientHistory(ctx, t, shop, id, "")
		require.NoError(t, s.decoded(ctx, h), id) // the suite runs encrypted
		require.NoError(t, replay(replayer, h, ""), "replaying %s", id)
		require.NoError(t, replay(replayer, h, "00000000-0000-4000-8000-00000000reset"), "replaying %s as a reset run", id)
	}
}

func mapsValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
