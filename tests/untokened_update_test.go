package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
)

// The untokened update's contract (captchaflow.UntokenedHint), exercised on the real ingress and a real Temporal
// with a probe workflow that stands in for SolveCaptcha until its own handler lands: it upserts the search
// attributes the ingress looks up, and, when it has the handler, validates as the contract says.

const (
	probeWorkflowType = "UntokenedHintProbe"
	probeDoneSignal   = "probe-done"
)

// probeInput sets one probe up: the submission it waits for, its phase, hints already taken, and whether it has the
// update's handler (false: a workflow on a worker that predates it).
type probeInput struct {
	ProviderTaskID string            `json:"provider_task_id"`
	Phase          captchaflow.Phase `json:"phase"`
	HintsTaken     int               `json:"hints_taken"`
	HandleUpdate   bool              `json:"handle_update"`
}

// probeResult is what reached the probe.
type probeResult struct {
	Hints   []captchaflow.UntokenedHint `json:"hints"`
	Signals []captchaflow.Callback      `json:"signals"`
}

// untokenedProbe waits for probe-done, taking untokened updates (when it has the handler) and callback signals.
func untokenedProbe(ctx workflow.Context, in probeInput) (probeResult, error) {
	var res probeResult
	err := workflow.UpsertTypedSearchAttributes(ctx, captchaflow.TaskIDKey.ValueSet(in.ProviderTaskID),
		captchaflow.PhaseKey.ValueSet(string(in.Phase)))
	if err != nil {
		return res, err
	}
	taken := in.HintsTaken
	if in.HandleUpdate {
		err = workflow.SetUpdateHandlerWithOptions(ctx, captchaflow.UntokenedUpdate,
			func(_ workflow.Context, h captchaflow.UntokenedHint) error {
				taken++
				res.Hints = append(res.Hints, h)
				return nil
			},
			workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, h captchaflow.UntokenedHint) error {
				switch {
				case h.ProviderTaskID != in.ProviderTaskID:
					return errors.New("not the current submission")
				case in.Phase != captchaflow.PhaseAwaitingCallback && in.Phase != captchaflow.PhasePolling:
					return errors.New("not waiting for a callback")
				case taken >= captchaflow.UntokenedHintsPerSubmission:
					return errors.New("untokened hints of this submission are spent")
				}
				return nil
			}})
		if err != nil {
			return res, err
		}
	}
	signals := workflow.GetSignalChannel(ctx, captchaflow.CallbackSignal)
	done := workflow.GetSignalChannel(ctx, probeDoneSignal)
	for finished := false; !finished; {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			var cb captchaflow.Callback
			c.Receive(ctx, &cb)
			res.Signals = append(res.Signals, cb)
		})
		sel.AddReceive(done, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			finished = true
		})
		sel.Select(ctx)
	}
	return res, workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// startProbeWorker runs the probe workflow on a task queue of its own in this process, until the test ends.
func startProbeWorker(t *testing.T, s *stack) string {
	t.Helper()
	queue := "untokened-probe-" + s.runID
	w := worker.New(s.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(untokenedProbe, workflow.RegisterOptions{Name: probeWorkflowType})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return queue
}

// probe is one started probe workflow.
type probe struct {
	id string
	in probeInput
}

// startProbes starts one probe per input and waits until visibility shows each one's search attributes.
func startProbes(ctx context.Context, t *testing.T, s *stack, queue string, ins ...probeInput) []probe {
	t.Helper()
	var out []probe
	for i, in := range ins {
		id := fmt.Sprintf("untokened-probe-%s-%d", s.runID, i)
		_, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, probeWorkflowType, in)
		require.NoError(t, err)
		out = append(out, probe{id: id, in: in})
	}
	for _, p := range out {
		query := fmt.Sprintf("WorkflowId = '%s' AND CaptchaPhase = '%s'", p.id, p.in.Phase)
		eventually(t, p.id+" visible", 30*time.Second, 100*time.Millisecond, func() string {
			resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
			if err != nil {
				return err.Error()
			}
			if len(resp.GetExecutions()) == 0 {
				return "not yet"
			}
			return ""
		})
	}
	return out
}

// finishProbe ends p and returns what reached it, and its history.
func finishProbe(ctx context.Context, t *testing.T, s *stack, p probe) (probeResult, *historypb.History) {
	t.Helper()
	require.NoError(t, s.c.SignalWorkflow(ctx, p.id, "", probeDoneSignal, nil))
	var res probeResult
	require.NoError(t, s.c.GetWorkflow(ctx, p.id, "").Get(ctx, &res))
	h, err := s.history(ctx, p.id)
	require.NoError(t, err)
	return res, h
}

// untokenedOutcomes scrapes the ingress's untokened callback counts by outcome.
func (s *stack) untokenedOutcomes(ctx context.Context, t *testing.T) map[string]float64 {
	t.Helper()
	text, err := scrape(ctx, s.ingressMetricsURL()+"/metrics")
	require.NoError(t, err)
	out := map[string]float64{}
	for _, o := range []string{"signalled", "late_or_unknown", "suppressed", "untokened_rejected", "unavailable", "duplicate"} {
		out[o], _ = metricSum(text, "captchaflow_ingress_callbacks_total", map[string]string{"route": "untokened", "outcome": o})
	}
	return out
}

// TestE2E_UntokenedUpdate (#15 §3a, b): on the real ingress and Temporal, untokened callbacks for a probe with the
// update's handler arrive as updates without their code; once its validator rejects one (its hints spent), the
// rejection leaves no history event and the ingress stops asking for that provider task. A probe without the
// handler rejects the update and gets nothing (no signal fallback: no release ran without the handler). A probe
// that is delivering is never looked up.
func TestE2E_UntokenedUpdate(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	queue := startProbeWorker(t, s)
	base := time.Now().UnixNano() % 1_000_000_000
	pid := func(i int64) string { return fmt.Sprint(9_100_000_000 + base*10 + i) }
	probes := startProbes(ctx, t, s, queue,
		probeInput{ProviderTaskID: pid(1), Phase: captchaflow.PhaseAwaitingCallback, HintsTaken: captchaflow.UntokenedHintsPerSubmission - 1, HandleUpdate: true},
		probeInput{ProviderTaskID: pid(2), Phase: captchaflow.PhasePolling},
		probeInput{ProviderTaskID: pid(3), Phase: captchaflow.PhaseDelivering, HandleUpdate: true})
	current, older, delivering := probes[0], probes[1], probes[2]
	before := s.untokenedOutcomes(ctx, t)

	sender := clientFrom("127.0.0.41", 4)
	send := func(p probe, code string) {
		q := url.Values{"id": {p.in.ProviderTaskID}, "code": {code}}
		status, _, err := getStatus(ctx, sender, s.ingressURL()+"/callback?"+q.Encode())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "every untokened callback is answered alike")
	}
	const forged = 12
	for i := range forged {
		send(current, fmt.Sprintf("FORGED-%02d-%s", i, strings.Repeat("x", 4<<10)))
	}
	send(older, "REAL-CODE-FOR-AN-OLDER-WORKER")
	send(delivering, "FORGED-DELIVERING")
	eventually(t, "the untokened callbacks processed", 30*time.Second, 100*time.Millisecond, func() string {
		now := s.untokenedOutcomes(ctx, t)
		total := 0.0
		for o, v := range now {
			total += v - before[o]
		}
		if total < forged+2 {
			return fmt.Sprintf("%.0f of %d", total, forged+2)
		}
		return ""
	})
	after := s.untokenedOutcomes(ctx, t)
	delta := map[string]float64{}
	for o, v := range after {
		delta[o] = v - before[o]
	}

	res, h := finishProbe(ctx, t, s, current)
	assert.Equal(t, []captchaflow.UntokenedHint{{ProviderTaskID: current.in.ProviderTaskID}}, res.Hints,
		"one hint left of the submission's budget, then the validator rejects")
	assert.Empty(t, res.Signals)
	assert.Equal(t, 1, eventCount(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), "rejections leave no event")
	assert.Equal(t, 1, eventCount(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED))
	assert.Equal(t, 1, eventCount(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), "only probe-done was signalled")
	assert.NotContains(t, historyDump(h), "FORGED", "no untokened code reaches history")

	oldRes, _ := finishProbe(ctx, t, s, older)
	assert.Empty(t, oldRes.Signals, "a workflow without the handler gets no signal, and no code")
	delRes, dh := finishProbe(ctx, t, s, delivering)
	assert.Empty(t, delRes.Hints, "a delivering task is never looked up")
	assert.Zero(t, eventCount(dh, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED))

	t.Logf("%d forged untokened callbacks (4 KiB codes) for a task with one hint left + 1 for an older worker + 1 for a "+
		"delivering task: ingress outcomes %v; the task's history: %d events, %d update accepted, no code",
		forged, delta, len(h.GetEvents()), eventCount(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED))
	assert.GreaterOrEqual(t, delta["untokened_rejected"], 2.0, "the spent hints and the update without a handler")
	assert.Equal(t, 1.0, delta["signalled"], "the accepted update")
	assert.Equal(t, 1.0, delta["late_or_unknown"], "the delivering task")
}

// historyDump renders h's events (payloads included) for searching.
func historyDump(h *historypb.History) string {
	var b strings.Builder
	for _, ev := range h.GetEvents() {
		b.WriteString(ev.String())
	}
	return b.String()
}
