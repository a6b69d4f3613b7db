package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
	"github.com/captchaflow/captchaflow/workflows"
)

// TestE2E_ErrorCodePingbacks (issue #9): the provider calls the tokened route back with
// code=ERROR_CAPTCHA_UNSOLVABLE for a submission it gave up on (simulator fault unsolvable_pingback). The
// workflow must take that for "resubmit" — at once, without waiting for its callback timeout or asking res.php —
// and complete with the next submission's real code; no result and no delivery is ever an ERROR_ word, and each is
// delivered exactly once.
func TestE2E_ErrorCodePingbacks(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "error-pingback")
	// A long callback timeout: a resubmission well before it can only have come from the ERROR_ pingback.
	const cbTimeout = 30
	once := sc.add(6, taskSpec{Kind: "unsolvable pingback once", Faults: "unsolvable_pingback", Submits: 2,
		CallbackTimeout: cbTimeout, Via: captchaflow.ViaCallback})
	twice := sc.add(2, taskSpec{Kind: "unsolvable pingback twice", Faults: "unsolvable_pingback=2", Submits: 3,
		CallbackTimeout: cbTimeout, Via: captchaflow.ViaCallback})

	resubmits := []metricWant{{url: s.workerMetricsURL() + "/metrics", name: workflows.MetricResubmits, atLeast: 6 + 2*2}}
	before, err := metricsSnapshot(ctx, resubmits)
	require.NoError(t, err)

	sc.start(ctx)
	sc.await(ctx, time.Minute)

	// Resubmission latency: from the ERROR_CAPTCHA_UNSOLVABLE pingback's answer to the next in.php submission.
	var gaps []float64
	errorPingbacks := 0
	hs := histories(t, s, sc.ids())
	provider := sc.simTasksByWorkflow(ctx)
	for _, tr := range append(append([]*taskRun{}, once...), twice...) {
		pts := provider[tr.ID]
		require.Len(t, pts, tr.submits(), "%s: provider submissions", tr.ID)
		for i, pt := range pts[:len(pts)-1] {
			assert.Equal(t, sim.StatusUnsolvable, pt.Status, tr.ID)
			if assert.Len(t, pt.Pingbacks, 1, "%s: the unsolvable submission %s calls back once", tr.ID, pt.ID) {
				p := pt.Pingbacks[0]
				assert.Equal(t, sim.OutcomeSucceeded, p.Outcome, "%s: ERROR_ pingback %s (%s)", tr.ID, pt.ID, p.Error)
				assert.Equal(t, 200, p.HTTPStatus, tr.ID)
				errorPingbacks++
				gap := pts[i+1].SubmittedAt.Sub(p.At.Add(time.Duration(p.DurationMS) * time.Millisecond))
				gaps = append(gaps, float64(gap.Milliseconds()))
				assert.Less(t, gap, 10*time.Second, "%s: resubmitted %s after the ERROR_ pingback (callback timeout %d s)", tr.ID, gap, cbTimeout)
			}
			assert.Zero(t, pt.ResGetCount, "%s: an authenticated ERROR_CAPTCHA_UNSOLVABLE needs no res.php confirmation", tr.ID)
		}
		final := pts[len(pts)-1]
		assert.Equal(t, sim.StatusSolved, final.Status, tr.ID)
		assert.Equal(t, final.Code, tr.Result.Code, "%s: the last submission's real code", tr.ID)
		assert.False(t, callback.IsStatusWord(tr.Result.Code), "%s: result %q is a provider status word", tr.ID, tr.Result.Code)
		assert.False(t, strings.HasPrefix(tr.Result.Code, "ERROR"), "%s: result %q", tr.ID, tr.Result.Code)
		if d, ok := s.down.Delivery(tr.ID); ok {
			assert.False(t, callback.IsStatusWord(d.Payload.Code), "%s: delivered %q", tr.ID, d.Payload.Code)
		}

		var errSignals int
		for _, cb := range signals(t, hs[tr.ID]) {
			if cb.Code == sim.ErrorCaptchaUnsolvable {
				errSignals++
				assert.True(t, cb.Authenticated, "%s: the ERROR_ pingback came on the tokened route", tr.ID)
			}
		}
		assert.Equal(t, tr.submits()-1, errSignals, "%s: ERROR_CAPTCHA_UNSOLVABLE callbacks signalled", tr.ID)
		assert.Zero(t, activitiesScheduled(hs[tr.ID], "Poll"), "%s: no res.php request at all", tr.ID)
	}
	eventually(t, "resubmits counted", 10*time.Second, 200*time.Millisecond, func() string {
		after, err := metricsSnapshot(ctx, resubmits)
		if err != nil {
			return err.Error()
		}
		key := resubmits[0].url + " " + resubmits[0].String()
		if got := after[key] - before[key]; got < resubmits[0].atLeast {
			return fmt.Sprintf("%s moved by %g, want %g", key, got, resubmits[0].atLeast)
		}
		return ""
	})
	sc.note("%d ERROR_CAPTCHA_UNSOLVABLE pingbacks answered 200 and signalled authenticated; each resubmitted without res.php "+
		"(ERROR_ pingback answered → next in.php: p50 %.0f ms, max %.0f ms; callback timeout %d s)",
		errorPingbacks, percentile(gaps, 50), percentile(gaps, 100), cbTimeout)
	delivered := 0
	for _, d := range s.down.Deliveries() {
		if strings.HasPrefix(d.Payload.TaskID, sc.prefix) && d.Count == 1 && !callback.IsStatusWord(d.Payload.Code) {
			delivered++
		}
	}
	sc.note("every result is the final submission's real code, none an ERROR_ word; %d of %d delivered exactly once", delivered, len(sc.tasks))
	// Every task: the right submissions, the last one's code, delivered once (verify records the figures).
	f := sc.verify(ctx)
	assert.Equal(t, len(sc.tasks), f.Delivered)
	assert.Equal(t, len(sc.tasks), delivered)
	replayLive(t, s, once[0].ID, twice[0].ID)
}

// TestE2E_SubmitErrorClasses (issue #9): in.php refuses the first submission with one error of each class the
// simulator's submit_error offers. A transient one is retried by the Submit activity (one extra in.php request,
// the task completes); a resubmit one counts against max_submits and the next in.php request waits ~5 s (it
// completes with max_submits 2, fails Unsolvable with max_submits 1); a config one fails ProviderConfig and an
// unknown one ProviderUnknown, at once and with nothing delivered.
func TestE2E_SubmitErrorClasses(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "submit-errors")
	type want struct {
		maxSubmits int
		failure    string // "" for success
		code       string // the in.php refusal
	}
	wants := map[*taskRun]want{}
	addClass := func(n int, kind, faults string, w want) []*taskRun {
		trs := sc.add(n, taskSpec{Kind: kind, Faults: faults})
		for _, tr := range trs {
			wants[tr] = w
		}
		return trs
	}
	transient := addClass(3, "transient (busy)", "submit_error=transient", want{maxSubmits: 2, code: sim.ErrorNoSlotAvailable})
	resubmitOK := addClass(2, "resubmit, max_submits 2", "submit_error=resubmit", want{maxSubmits: 2, code: sim.ErrorCaptchaUnsolvable})
	resubmitFail := addClass(2, "resubmit, max_submits 1", "submit_error=resubmit", want{maxSubmits: 1, failure: captchaflow.FailureUnsolvable, code: sim.ErrorCaptchaUnsolvable})
	config := addClass(2, "config (wrong key)", "submit_error=config", want{maxSubmits: 2, failure: captchaflow.FailureProviderConfig, code: sim.ErrorWrongUserKey})
	configCode := addClass(1, "config (ERROR_PAGEURL by code)", "submit_error=ERROR_PAGEURL", want{maxSubmits: 2, failure: captchaflow.FailureProviderConfig, code: sim.ErrorPageURL})
	unknown := addClass(2, "unknown", "submit_error=unknown", want{maxSubmits: 2, failure: captchaflow.FailureProviderUnknown, code: sim.ErrorSimulatedUnknown})

	require.NoError(t, s.simRules(ctx, sc.rules()))
	sc.startEach(ctx, sc.tasks, func(tr *taskRun) captchaflow.Input {
		in := s.input(tr.taskSpec)
		in.MaxSubmits = wants[tr].maxSubmits
		in.DeadlineSeconds = 60 // short: nothing here should need more than the 5 s backoff and a solve
		return in
	})
	sc.awaitOutcomes(ctx, 90*time.Second)

	provider := sc.simTasksByWorkflow(ctx)
	hs := histories(t, s, sc.ids())
	f := figures{Scenario: sc.name, Tasks: len(sc.tasks), Temporal: "dev server"}
	if s.external() {
		f.Temporal = "external " + s.temporalAddr
	}
	wantRejected := map[string]int64{}
	for _, tr := range sc.tasks {
		w := wants[tr]
		wantRejected[w.code]++
		label := fmt.Sprintf("%s (%s)", tr.ID, tr.Kind)
		pts := provider[tr.ID]
		f.Submissions += len(pts)
		d, delivered := s.down.Delivery(tr.ID)
		if w.failure != "" {
			if assert.Error(t, tr.Err, label) {
				assert.Equal(t, w.failure, failureType(tr.Err), "%s: failure type (%v)", label, tr.Err)
			}
			assert.Empty(t, pts, "%s: in.php accepted nothing", label)
			assert.False(t, delivered, "%s: nothing may be delivered", label)
			assert.Equal(t, int32(1), activityAttempts(hs[tr.ID])["Submit"], "%s: one in.php request, not retried", label)
			continue
		}
		if !assert.NoError(t, tr.Err, label) {
			continue
		}
		if assert.Len(t, pts, 1, "%s: accepted submissions", label) {
			assert.Equal(t, pts[0].ID, tr.Result.ProviderTaskID, label)
			assert.Equal(t, sim.CodeFor(pts[0].ID), tr.Result.Code, "%s: real code", label)
		}
		assert.False(t, callback.IsStatusWord(tr.Result.Code), label)
		if assert.True(t, delivered, "%s: delivered", label) {
			assert.Equal(t, 1, d.Count, "%s: delivered exactly once", label)
			assert.Equal(t, tr.Result.Code, d.Payload.Code, label)
			f.Delivered++
		}
		switch tr.Result.Via {
		case captchaflow.ViaCallback:
			f.ViaCallback++
		case captchaflow.ViaPoll:
			f.ViaPoll++
		}
	}
	for _, tr := range transient {
		assert.Equal(t, 1, tr.Result.Submits, "%s: a busy in.php is not a submission", tr.ID)
		assert.Equal(t, int32(2), activityAttempts(hs[tr.ID])["Submit"], "%s: Submit retried once", tr.ID)
		assert.NotContains(t, timerDurations(hs[tr.ID]), 5*time.Second, "%s: no resubmit backoff", tr.ID)
	}
	var backoffs []float64
	for _, tr := range resubmitOK {
		assert.Equal(t, 2, tr.Result.Submits, "%s: the refused in.php request counts", tr.ID)
		assert.Equal(t, 2, activitiesScheduled(hs[tr.ID], "Submit"), "%s: two Submit activities", tr.ID)
		assert.Contains(t, timerDurations(hs[tr.ID]), 5*time.Second, "%s: 5 s backoff before the next in.php request", tr.ID)
		if pts := provider[tr.ID]; len(pts) == 1 {
			// The refused request is the workflow's first act; the accepted one follows the backoff.
			wait := pts[0].SubmittedAt.Sub(workflowStartedAt(hs[tr.ID]))
			backoffs = append(backoffs, wait.Seconds())
			assert.GreaterOrEqual(t, wait, 5*time.Second, "%s: accepted submission after the backoff", tr.ID)
			assert.Less(t, wait, 15*time.Second, "%s: accepted submission soon after the backoff", tr.ID)
		}
	}
	for _, tr := range resubmitFail {
		assert.Contains(t, tr.Err.Error(), "1 submission", tr.ID)
		assert.Empty(t, timerDurations(hs[tr.ID]), "%s: no backoff when no submission is left", tr.ID)
	}
	for _, tr := range append(append(append([]*taskRun{}, config...), configCode...), unknown...) {
		assert.Contains(t, tr.Err.Error(), wants[tr].code, "%s: the provider's code is in the message", tr.ID)
	}

	st, err := s.simStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantRejected, st.Submissions.RejectedByCode, "in.php refusals by code")
	assert.Equal(t, int64(len(transient)+len(resubmitOK)), st.Submissions.Accepted, "in.php submissions accepted")
	assert.Zero(t, s.down.Stats().Conflicts)

	f.WallSeconds = sc.ended.Sub(sc.started).Seconds()
	sc.note("in.php refusals by code %v, accepted %d (each refused task: exactly one refusal)", st.Submissions.RejectedByCode, st.Submissions.Accepted)
	sc.note("transient: %d completed, 1 extra in.php request each (Submit attempt 2), submits=1", len(transient))
	sc.note("resubmit with max_submits 2: %d completed with submits=2; refused → accepted in.php request after %.1f–%.1f s (backoff 5 s)",
		len(resubmitOK), percentile(backoffs, 0.1), percentile(backoffs, 100))
	sc.note("resubmit with max_submits 1: %d failed Unsolvable; config: %d failed ProviderConfig; unknown: %d failed ProviderUnknown; nothing delivered for any",
		len(resubmitFail), len(config)+len(configCode), len(unknown))
	f.Notes = sc.notes
	recordFigures(t, f)
	replayLive(t, s, transient[0].ID, resubmitOK[0].ID, resubmitFail[0].ID, config[0].ID, unknown[0].ID)
}
