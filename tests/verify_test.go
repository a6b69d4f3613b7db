package tests

import (
	"context"
	"fmt"
	"strings"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// verify checks the invariants every scenario must keep, then records its figures:
//   - every task completed with the code the provider produced for its final submission;
//   - the downstream got exactly one accepted, signed delivery per task (webhook-id = workflow ID), with that code;
//   - the provider saw exactly the intended submissions per task (no duplicate submission);
//   - nothing is lost: every workflow the provider saw a submission for is one of ours and was delivered.
func (sc *scenario) verify(ctx context.Context) figures {
	t := sc.t
	t.Helper()
	sc.simTasks = sc.simTasksByWorkflow(ctx)
	f := figures{Scenario: sc.name, Tasks: len(sc.tasks), Temporal: "dev server"}
	if sc.s.external() {
		f.Temporal = "external " + sc.s.temporalAddr
	}
	extraPaid, answersLost := 0, 0 // provider submissions beyond the intended ones; Submits of unknown outcome
	for _, tr := range sc.tasks {
		res := tr.Result
		label := fmt.Sprintf("%s (%s)", tr.ID, tr.Kind)
		if !assert.NoError(t, tr.Err, label) {
			continue
		}
		assert.Equal(t, sim.CodeFor(res.ProviderTaskID), res.Code, "%s: wrong code", label)
		if tr.Via != "" {
			assert.Equal(t, tr.Via, res.Via, "%s: result path", label)
		}
		switch res.Via {
		case captchaflow.ViaCallback:
			f.ViaCallback++
		case captchaflow.ViaPoll:
			f.ViaPoll++
		}

		lost := map[string]int{}
		lostAnswers := 0 // Submits whose in.php outcome was unknown (a killed worker, a lost or stalled answer)
		if sc.allowCrashRepeats || strings.Contains(tr.Faults, "submit_") {
			h, err := sc.s.history(ctx, tr.ID)
			require.NoError(t, err)
			lost = lostAttempts(h)
			lostAnswers = submitsOutcomeUnknown(h)
			f.RepeatsAfterKill += lost["Submit"] + lost["Deliver"]
		}
		// Never pay twice for one submission (#10 §6): a Submit whose in.php answer was lost is not retried; the
		// lost submission's own callback answers the task. Only where the provider's pingback cannot arrive within
		// the callback timeout (dropped, hung, late) does the workflow submit once more per lost answer. (A Submit
		// attempt retried by the server after a timeout, lost[Submit], no longer happens: its policy does not retry
		// timeouts.)
		extraAllowed := lost["Submit"] + tr.paidAgainByReset
		if pingbackMayMissCallbackTimeout(tr) || pingbackFailed(sc.simTasks[tr.ID]) {
			extraAllowed += lostAnswers // the lost submission's pingback was dropped, or failed (an ingress outage)
		}
		// A lost answer counts as a submission whether or not the request reached the provider.
		assert.LessOrEqual(t, res.Submits, tr.submits()+lostAnswers+lost["Submit"], "%s: submissions the workflow made", label)
		assert.GreaterOrEqual(t, res.Submits, tr.submits()-lost["Submit"], "%s: submissions the workflow made", label)
		provider := sc.simTasks[tr.ID]
		f.Submissions += len(provider)
		extraPaid += max(0, len(provider)-tr.submits())
		answersLost += lostAnswers
		assert.GreaterOrEqual(t, len(provider), tr.submits(), "%s: provider submissions", label)
		assert.LessOrEqual(t, len(provider), tr.submits()+extraAllowed,
			"%s: %d extra paid submission(s) with %d in.php answer(s) lost: a lost answer must be settled by its "+
				"submission's own callback, never by paying again (allowed: %d, only where the pingback itself cannot "+
				"arrive within the callback timeout)", label, len(provider)-tr.submits(), lostAnswers, extraAllowed)
		if len(provider) > 0 && tr.paidAgainByReset == 0 {
			final := provider[len(provider)-1]
			assert.Equal(t, final.ID, res.ProviderTaskID, "%s: the result must come from the last submission", label)
			if lost["Submit"] == 0 && extraAllowed == 0 {
				for _, earlier := range provider[:len(provider)-1] {
					assert.Equal(t, sim.StatusUnsolvable, earlier.Status, "%s: a resubmission must follow an unsolvable answer", label)
				}
			}
		}
		for _, pt := range provider {
			for _, p := range pt.Pingbacks {
				f.PingbacksSent++
				if p.Outcome != sim.OutcomeSucceeded {
					f.PingbacksFailed++
				}
			}
		}

		d, ok := sc.s.down.Delivery(tr.ID)
		if !assert.True(t, ok, "%s: nothing delivered to notify_url", label) {
			continue
		}
		// webhook-id is <workflow ID>.<run ID>: the same on every retry of the delivery and in a reset run, new for
		// another run.
		assert.True(t, strings.HasPrefix(d.WebhookID, tr.ID+".") && len(d.WebhookID) == len(tr.ID)+1+36,
			"%s: webhook-id %q is not %s.<run ID>", label, d.WebhookID, tr.ID)
		assert.Equal(t, tr.ID, d.Payload.TaskID, "%s: task_id in the delivered body", label)
		assert.Equal(t, res.Code, d.Payload.Code, "%s: delivered code", label)
		assert.Equal(t, res.ProviderTaskID, d.Payload.ProviderTaskID, "%s: delivered provider task", label)
		assert.GreaterOrEqual(t, d.Count, 1)
		assert.LessOrEqual(t, d.Count, 1+lost["Deliver"]+tr.redelivered,
			"%s: accepted deliveries (at most %d repeated by a lost Deliver attempt, %d by a reset)", label,
			lost["Deliver"], tr.redelivered)
		f.Delivered++
	}
	for id := range sc.simTasks {
		assert.Contains(t, sc.byID, id, "the provider saw a submission for a workflow this scenario did not start")
	}
	assert.Zero(t, sc.s.down.Stats().Conflicts, "a webhook-id was delivered twice with different codes")
	f.WallSeconds = sc.ended.Sub(sc.started).Seconds()
	sc.note("extra paid submissions (provider tasks beyond the intended ones): %d; in.php answers lost (Submit outcome unknown): %d",
		extraPaid, answersLost)
	f.Notes = sc.notes
	recordFigures(t, f)
	return f
}

// note adds a line to the scenario's figures (what the chaos did).
func (sc *scenario) note(format string, args ...any) {
	sc.notes = append(sc.notes, fmt.Sprintf(format, args...))
	sc.t.Logf(format, args...)
}

// pingbackFailed tells whether a pingback of any of the provider's tasks failed to reach the ingress (it was down):
// a lost submission then had no way to answer, and one more paid submission is the documented cost.
func pingbackFailed(tasks []sim.Task) bool {
	for _, pt := range tasks {
		for _, p := range pt.Pingbacks {
			if p.Outcome != sim.OutcomeSucceeded {
				return true
			}
		}
	}
	return false
}
