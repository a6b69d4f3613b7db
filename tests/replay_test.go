package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/workflows"
)

// testdataDir holds histories recorded from a real server by TestRecordHistories (RECORD_HISTORIES=1).
const testdataDir = "testdata"

// minRecordedHistories keeps the replay test from passing on an empty directory.
const minRecordedHistories = 6

func newReplayer() worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	registerReplayed(r)
	return r
}

// registerReplayed registers captchaflow's workflows and a caller team's SolveViaNexus, whose recordings replay too.
func registerReplayed(r worker.WorkflowRegistry) {
	workflows.RegisterWorkflow(r)
	r.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
}

// newTracedReplayer replays as a worker with tracing on runs: the SDK's OpenTelemetry interceptor, which must only
// read and write headers, never change a command.
func newTracedReplayer(t *testing.T) worker.WorkflowReplayer {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: sdktrace.NewTracerProvider().Tracer("replay")})
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{i}})
	require.NoError(t, err)
	registerReplayed(r)
	return r
}

// replay replays h under the workflow ID it was recorded with (the replayer's default is a made-up one), so
// behaviour that depends on the ID, such as refusing an ID the ingress could not route, replays as it ran. A
// runID other than "" replays it as a reset run does: under a new run ID, with the history it was reset from.
func replay(r worker.WorkflowReplayer, h *historypb.History, runID string) error {
	execution := workflow.Execution{ID: h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId(),
		RunID: runID}
	return r.ReplayWorkflowHistoryWithOptions(devstack.QuietSDKLogger(), h,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: execution})
}

func recordedHistoryFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), minRecordedHistories,
		"expected recorded histories in tests/%s; record them with `make record-histories`", testdataDir)
	return files
}

// TestReplayRecordedHistories replays every recorded history against the current workflow code. It needs no
// server: a change to SolveCaptcha that would break workflows already running in production (a new or reordered
// command, a changed timer) fails here with a non-determinism error naming the event. Each is replayed a second
// time under a new run ID, as an operator's reset replays it: the callbacks it took are the reset run's too.
func TestReplayRecordedHistories(t *testing.T) {
	replayer, traced := newReplayer(), newTracedReplayer(t)
	for _, file := range recordedHistoryFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			require.NoError(t, replay(replayer, h, ""))
			require.NoError(t, replay(replayer, h, "00000000-0000-4000-8000-00000000reset"), "replayed as a reset run")
			require.NoError(t, replay(traced, h, ""), "replayed with tracing on")
		})
	}
}

// historyWorkflowIDs finds the workflow IDs a history names (the root execution, the delivery body's task_id).
var historyWorkflowIDs = regexp.MustCompile(`"(?:workflowId|task_id)":\s*"([A-Za-z0-9._:-]+)"`)

func workflowIDsIn(text string) []string {
	var ids []string
	for _, m := range historyWorkflowIDs.FindAllStringSubmatch(text, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// secretsIn names every secret (or callback token derived from one) that text contains.
func secretsIn(text string) []string {
	var found []string
	for name, secret := range map[string]string{
		"the provider API key": providerKey,
		"the callback secret":  callbackSecret,
		"the notify secret":    notifySecret,
	} {
		if strings.Contains(text, secret) {
			found = append(found, name)
		}
	}
	for _, id := range workflowIDsIn(text) {
		if strings.Contains(text, callbackauth.Token(callbackSecret, id)) {
			found = append(found, "the callback token of "+id)
		}
	}
	return found
}

// historyText is everything a recorded history says: the JSON itself and, decoded, every base64 string in it
// (protojson writes payloads — inputs, results, signals, failures' details — as base64, where a plain search
// would never find a secret), recursively for JSON found inside.
func historyText(raw []byte) string {
	var b strings.Builder
	b.Write(raw)
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e, depth)
			}
		case []any:
			for _, e := range x {
				walk(e, depth)
			}
		case string:
			dec, err := base64.StdEncoding.DecodeString(x)
			if err != nil || len(dec) == 0 {
				return
			}
			b.WriteString("\n")
			b.Write(dec)
			var inner any
			if depth < 4 && json.Unmarshal(dec, &inner) == nil {
				walk(inner, depth+1)
			}
		}
	}
	var doc any
	if json.Unmarshal(raw, &doc) == nil {
		walk(doc, 0)
	}
	return b.String()
}

// TestRecordedHistoriesHoldNoSecrets: the histories were recorded with fixed, distinctive secrets; none of them,
// and no callback token made from them, may appear in workflow history (which Temporal stores, replicates and
// shows in the Web UI) — not even inside a payload.
func TestRecordedHistoriesHoldNoSecrets(t *testing.T) {
	// The scanner itself must be able to fail, also on a secret hidden in a base64 payload.
	payload, _ := json.Marshal(map[string]string{"task_id": "e2e-sample-abc-001", "pingback": "http://x/callback/e2e-sample-abc-001?t=" +
		callbackauth.Token(callbackSecret, "e2e-sample-abc-001"), "key": providerKey})
	sample, _ := json.Marshal(map[string]any{"events": []any{map[string]any{"data": base64.StdEncoding.EncodeToString(payload)}}})
	require.ElementsMatch(t, []string{"the provider API key", "the callback token of e2e-sample-abc-001"},
		secretsIn(historyText(sample)))

	// Files may also be production histories saved with `temporal workflow show --output json`; the proof that
	// payloads were decoded and tokens checked is therefore over all files, not each.
	decoded, tokensChecked := 0, 0
	for _, file := range recordedHistoryFiles(t) {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		text := historyText(b)
		if strings.Contains(text, `"pageurl"`) { // the input's params, only visible once decoded
			decoded++
		}
		tokensChecked += len(workflowIDsIn(text))
		assert.Empty(t, secretsIn(text), "%s leaks secrets", file)
		assert.NotContains(t, text, "?t=", "%s: a tokened callback URL", file)
	}
	assert.Positive(t, decoded, "no payload was decoded: the scan saw only base64")
	assert.Positive(t, tokensChecked, "no workflow ID found: no callback token was looked for")
}

// replayLive fetches the given workflows' histories from the server and replays them, so each scenario also
// proves the code replays what it has just produced (including crash and restart histories), also as a reset run.
func replayLive(t *testing.T, s *stack, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	replayer := newReplayer()
	for _, id := range ids {
		h, err := s.history(ctx, id)
		require.NoError(t, err, id)
		require.NoError(t, replay(replayer, h, ""), "replaying %s", id)
		require.NoError(t, replay(replayer, h, "00000000-0000-4000-8000-00000000reset"), "replaying %s as a reset run", id)
	}
}

// histories fetches several histories.
func histories(t *testing.T, s *stack, ids []string) map[string]*historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]*historypb.History{}
	for _, id := range ids {
		h, err := s.history(ctx, id)
		require.NoError(t, err, id)
		out[id] = h
	}
	return out
}
