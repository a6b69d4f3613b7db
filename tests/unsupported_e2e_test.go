package tests

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_Routing_UnsupportedTaskType (#29 §11): two createTask providers; a, listed first (Anti-Captcha's flavor),
// lacks reCAPTCHA v2 and answers ERROR_TASK_NOT_SUPPORTED (SIM_REFUSE), b (CapSolver's) solves it. Every task is
// solved by b, none fails with ProviderConfig, a creates nothing, and the worker counts a's refusals: fewer than the
// tasks once a is marked as lacking the type (Submit's candidates skip it).
func TestE2E_Routing_UnsupportedTaskType(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	const n = 40
	sc := newScenario(t, s, "routed-unsupported")
	r := startRouted(t, s, sc, map[string]string{"SIM_PROTOCOL": "createtask", "SIM_FLAVOR": "anticaptcha",
		"SIM_REFUSE": "RecaptchaV2TaskProxyless"})
	trs := sc.add(n, taskSpec{Kind: "a lacks the task type"})
	r.start(ctx, sc, trs)
	sc.awaitAll(ctx, time.Minute)
	failed := map[string]int{}
	for _, tr := range trs {
		if tr.Err != nil {
			failed[failureType(tr.Err)]++
		}
	}
	refusals := scrapeSum(ctx, t, r.metrics, activities.MetricProviderUnsupported)
	sc.note("%d tasks, a refuses reCAPTCHA v2: failed %v (%d with %s); a's refusals counted by the worker: %.0f",
		n, failed, failed[captchaflow.FailureProviderConfig], captchaflow.FailureProviderConfig, refusals)
	assert.Zero(t, failed[captchaflow.FailureProviderConfig], "tasks failed with ProviderConfig although b takes the task type")
	assert.Empty(t, failed, "failed tasks")
	f := r.verifyRouted(ctx, sc, nil)
	assert.Equal(t, n, f.ByProvider[providerB], "solved by b")
	assert.Empty(t, r.tasks(t, ctx, r.urlA, sc), "a created no task")
	assert.Positive(t, refusals, "the worker counts a's refusals")
	assert.Less(t, refusals, float64(n), "once marked, a is not asked for the type again")
	assert.Zero(t, f.ExtraPaid)
	var moved []string // the tasks a refused: two Submits, the second to b (the gate's marker in their histories)
	for _, tr := range trs {
		h, err := s.history(ctx, tr.ID)
		require.NoError(t, err)
		if activitiesScheduled(h, "Submit") == 2 {
			moved = append(moved, tr.ID)
		}
	}
	if assert.NotEmpty(t, moved, "a task a refused") {
		replayLive(t, s, moved...)
		recordNew(t, s, map[string]string{"type-refused-moved-on": moved[0]})
	}
	f.Notes = sc.notes // not f.record: a refused task's extra Submit is more than the callback path's baseline
	recordFigures(t, f.figures)
}

// TestE2E_LostAnswerCapMonster (#29 §1): CapMonster calls back with the getTaskResult body, which names no task.
// When the createTask answer is lost after the task was created (a gateway's 504), that authenticated callback is
// the lost submission's answer: one createTask each, nothing paid twice. Before, it was dropped, and each task paid
// again after lost_answer_wait_seconds.
func TestE2E_LostAnswerCapMonster(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "lost-capmonster")
	r := startRouted(t, s, sc, map[string]string{"SIM_PROTOCOL": "createtask", "SIM_FLAVOR": "capmonster",
		"SIM_FAULT_RULES": regexp.QuoteMeta(callbackPathPrefix+sc.prefix) + "=>" + sim.FaultSubmitLost})
	trs := sc.add(4, taskSpec{Kind: "CapMonster's createTask answer lost", Via: captchaflow.ViaCallback})
	r.start(ctx, sc, trs, providerA)
	sc.awaitAll(ctx, time.Minute)
	created := r.tasks(t, ctx, r.urlA, sc)
	for _, tr := range trs {
		require.NoError(t, tr.Err, tr.ID)
		if assert.Len(t, created[tr.ID], 1, "%s: one createTask, one payment", tr.ID) {
			assert.Equal(t, sim.CodeFor(created[tr.ID][0].ID), tr.Result.Code, tr.ID)
		}
		assert.Equal(t, 1, tr.Result.Submits, tr.ID)
	}
	sc.note("%d tasks at CapMonster with the createTask answer lost: %d createTask requests", len(trs), len(created))
	replayLive(t, s, trs[0].ID)
	recordNew(t, s, map[string]string{"lost-answer-unnamed-callback": trs[0].ID})
}
