package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_GatewayErrorAfterCreate (#15 §1, §2): a gateway in front of in.php forwards the submission — the provider
// creates the task and will charge for it — and then answers 502, 504 or a CDN's 520/524 instead of the task id
// (simulator fault submit_gateway_error). The Submit is "outcome unknown", not retried: the lost submission's
// authenticated callback answers the task. in.php requests per solved task: 1; extra paid tasks: 0. Only where the
// pingback is dropped as well does the workflow submit once more, after the callback timeout. Before #15 a 5xx was
// "known not sent" and retried at once: two paid tasks for one submission.
func TestE2E_GatewayErrorAfterCreate(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "gateway-5xx")
	var answered []*taskRun
	for _, status := range []string{"502", "504", "520", "524"} {
		answered = append(answered, sc.add(3, taskSpec{Kind: "in.php answered " + status + " after creating the task",
			Faults: "submit_gateway_error=" + status, SolveMS: 300, Via: captchaflow.ViaCallback})...)
	}
	dropped := sc.add(2, taskSpec{Kind: "in.php answered 502 after creating the task, pingback dropped",
		Faults: "submit_gateway_error=502,drop_pingback", Submits: 2, Via: captchaflow.ViaPoll})
	before := s.simStatsOrZero(ctx)
	sc.start(ctx)
	sc.await(ctx, 2*time.Minute)
	f := sc.verify(ctx)
	assert.Equal(t, len(sc.tasks), f.Delivered)

	provider := sc.simTasksByWorkflow(ctx)
	inPHP, extra := 0, 0
	for _, tr := range answered {
		pts := provider[tr.ID]
		require.Len(t, pts, 1, "%s (%s): one paid task, whose in.php answer was a gateway's 5xx", tr.ID, tr.Kind)
		extra += len(pts) - 1
		assert.Equal(t, pts[0].ID, tr.Result.ProviderTaskID, "%s: the result names the task its code came from", tr.ID)
		assert.Equal(t, 1, tr.Result.Submits, tr.ID)
		h, err := s.history(ctx, tr.ID)
		require.NoError(t, err)
		assert.Equal(t, 1, submitsOutcomeUnknown(h), "%s: the Submit failed with its outcome unknown", tr.ID)
		attempts := activityAttempts(h)["Submit"]
		assert.Equal(t, int32(1), attempts, "%s: one in.php request", tr.ID)
		inPHP += int(attempts)
	}
	for _, tr := range dropped {
		pts := provider[tr.ID]
		require.Len(t, pts, 2, "%s: no callback within lost_answer_wait_seconds: submitted once more", tr.ID)
		assert.GreaterOrEqual(t, pts[1].SubmittedAt.Sub(pts[0].SubmittedAt), lostAnswerWaitSeconds*time.Second,
			"%s: the second submission waited lost_answer_wait_seconds for the first one's callback", tr.ID)
	}
	after := s.simStatsOrZero(ctx)
	requests := (after.Submissions.Accepted + after.Submissions.Rejected) - (before.Submissions.Accepted + before.Submissions.Rejected)
	assert.EqualValues(t, len(answered)+2*len(dropped), requests, "in.php requests the provider received")
	assert.EqualValues(t, len(sc.tasks), after.Submissions.AnswersGatewayError-before.Submissions.AnswersGatewayError)
	perTask := float64(inPHP) / float64(len(answered))
	sc.note("%d tasks whose in.php answer was a gateway's 5xx after the task was created (502, 504, 520, 524): "+
		"%.2f in.php requests per solved task, %d extra paid tasks; %d with the pingback dropped as well: one more "+
		"submission each, after the %d s lost-answer wait", len(answered), perTask, extra, len(dropped), lostAnswerWaitSeconds)
	assert.Equal(t, 1.0, perTask, "in.php requests per solved task")
	assert.Zero(t, extra, "extra paid tasks")
	replayLive(t, s, answered[0].ID, dropped[0].ID)
}

// TestE2E_CreateTaskGatewayErrorAfterCreate (#20 §3): the createTask twin. A gateway in front of b (createTask,
// CapSolver's flavor) forwards createTask — b creates the task and charges for it — and answers 504. The Submit is
// "outcome unknown", by the in.php client's rule: the task waits for the submission's callback and pays once. Before
// #20 the createTask client took the 504 for an answer and retried at once: every task paid twice at b.
func TestE2E_CreateTaskGatewayErrorAfterCreate(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "createtask-504")
	r := startRouted(t, s, sc, nil)
	require.NoError(t, simRulesAt(ctx, r.urlB, []sim.FaultRule{{Pattern: callbackPathPrefix + sc.prefix, Faults: "submit_gateway_error=504"}}))
	// Three: three lost answers open b's circuit (CircuitSettings.Failures), and a fourth task would wait for it.
	trs := sc.add(3, taskSpec{Kind: "createTask answered 504 after creating the task", Via: captchaflow.ViaCallback})
	r.start(ctx, sc, trs, providerB)
	sc.await(ctx, 2*time.Minute)
	f := r.verifyRouted(ctx, sc, nil)
	atB := r.tasks(t, ctx, r.urlB, sc)
	twice := 0
	for _, tr := range trs {
		if len(atB[tr.ID]) > 1 {
			twice++
		}
		h, err := s.history(ctx, tr.ID)
		require.NoError(t, err)
		assert.Equal(t, 1, submitsOutcomeUnknown(h), "%s: the Submit failed with its outcome unknown", tr.ID)
		assert.Equal(t, int32(1), activityAttempts(h)["Submit"], "%s: one createTask request", tr.ID)
	}
	st, err := simStatsAt(ctx, r.urlB)
	require.NoError(t, err)
	sc.note("%d tasks whose createTask answer was a gateway's 504 after the task was created: %d paid twice at b, "+
		"%d extra paid tasks, %d of %d answered by b's callback", len(trs), twice, f.ExtraPaid, f.ViaCallback, len(trs))
	assert.Zero(t, twice, "tasks paid twice at b")
	assert.Equal(t, len(trs), f.ByProvider[providerB])
	assert.EqualValues(t, len(trs), st.Submissions.AnswersGatewayError, "every createTask was answered 504")
}
