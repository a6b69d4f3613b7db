package tests

// The refund loop of issue #10 §4 on the real stack: captchaflow.SendReport sends the caller's verdict on a solved task
// to the provider exactly once, durably, and refuses a different one.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
	"github.com/captchaflow/captchaflow/workflows"
)

// TestE2E_ReportVerdict: a task is solved (and delivered: its workflow has completed); reporting it bad reaches the
// provider while the worker is SIGKILLed with the report request in flight (the provider recorded it, its answer is
// lost), and the restarted worker finishes the report; reporting bad again is a no-op, reporting good is refused
// with VerdictConflict; the provider recorded exactly one reportbad. A task that does not exist is TaskNotSolved.
func TestE2E_ReportVerdict(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "report")
	tr := sc.add(1, taskSpec{Kind: "reported bad", SolveMS: 200})[0]
	solved, err := captchaflow.Solve(ctx, s.c, tr.ID, s.input(tr.taskSpec))
	require.NoError(t, err)

	// The provider records the next report at once but holds its answer back: the worker dies waiting for it.
	require.NoError(t, s.simDo(ctx, http.MethodPut, "/_sim/report_stall", `{"requests":1,"stall_ms":20000}`, http.StatusOK))
	reported := make(chan error, 1)
	started := time.Now()
	go func() {
		_, err := captchaflow.SendReport(ctx, s.c, tr.ID, captchaflow.VerdictBad)
		reported <- err
	}()
	providerTask := func() sim.Task {
		tasks, err := s.simTasks(ctx, "/callback/"+tr.ID)
		require.NoError(t, err)
		require.Len(t, tasks, 1, "one provider task for the solved task")
		return tasks[0]
	}
	require.Eventually(t, func() bool { return len(providerTask().Reports) > 0 }, 30*time.Second, 50*time.Millisecond,
		"the report request never reached the provider")
	s.worker.Kill()
	require.NoError(t, s.restartWorker(ctx))
	select {
	case err := <-reported:
		require.NoError(t, err, "the report survives the worker's death")
	case <-ctx.Done():
		t.Fatal("the report did not finish after the worker restarted")
	}
	took := time.Since(started)

	// The same verdict again: the report that stands, nothing sent.
	again, err := captchaflow.SendReport(ctx, s.c, tr.ID, captchaflow.VerdictBad)
	require.NoError(t, err)
	assert.Equal(t, captchaflow.VerdictBad, again.Verdict)
	assert.Equal(t, solved.ProviderTaskID, again.ProviderTaskID, "the task's final provider task is reported")
	assert.True(t, again.AlreadyRecorded, "the retry after the kill met the provider's duplicate answer")
	assert.True(t, again.SubmittedAt.Equal(solved.SubmittedAt))

	// The other verdict: refused, naming the one that stands.
	_, err = captchaflow.SendReport(ctx, s.c, tr.ID, captchaflow.VerdictGood)
	require.Error(t, err)
	assert.Equal(t, captchaflow.FailureVerdictConflict, captchaflow.FailureType(err), "%v", err)
	assert.Contains(t, err.Error(), "already reported bad")

	pt := providerTask()
	assert.EqualValues(t, 1, pt.ReportsBad, "exactly one reportbad recorded")
	assert.Zero(t, pt.ReportsGood, "no reportgood ever sent")
	require.Len(t, pt.Reports, 2, "the lost attempt and its retry, nothing more: %+v", pt.Reports)
	assert.Equal(t, []string{sim.ReportRecorded, sim.ErrorDuplicateReport}, []string{pt.Reports[0].Answer, pt.Reports[1].Answer})
	st, err := s.simStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, sim.ReportStats{Bad: 1, Duplicate: 1}, st.Reports)

	// A task that never was: refused, and the refusal does not stand in the way of a later report.
	never := sc.prefix + "never"
	_, err = captchaflow.SendReport(ctx, s.c, never, captchaflow.VerdictGood)
	assert.Equal(t, captchaflow.FailureTaskNotSolved, captchaflow.FailureType(err), "%v", err)

	// The report's history holds neither the code nor a secret, and replays.
	reportID, err := captchaflow.ReportWorkflowID(tr.ID)
	require.NoError(t, err)
	h, err := s.history(ctx, reportID)
	require.NoError(t, err)
	raw, err := protojson.Marshal(h)
	require.NoError(t, err)
	text := historyText(raw)
	assert.NotContains(t, text, solved.Code, "the token stays out of the report's history")
	assert.Empty(t, secretsIn(text))
	replayLive(t, s, reportID, never+"/report")
	recordNew(t, s, map[string]string{"report-verdict-worker-killed": reportID, "report-task-not-solved": never + "/report"})

	// Counted by the restarted worker (the metrics scope flushes every second).
	for _, want := range []map[string]string{
		{"verdict": "bad", "result": "already_recorded"},
		{"verdict": "good", "result": "not_solved"},
	} {
		assert.Eventually(t, func() bool {
			metrics, err := scrape(ctx, s.workerMetricsURL()+"/metrics")
			n, _ := metricSum(metrics, workflows.MetricReports, want)
			return err == nil && n >= 1
		}, 10*time.Second, 200*time.Millisecond, "%s%v", workflows.MetricReports, want)
	}
	sc.note("reported bad with the worker SIGKILLed mid-request: done in %s; provider recorded %d reportbad, %d duplicate, %d reportgood",
		took.Round(time.Millisecond), st.Reports.Bad, st.Reports.Duplicate, st.Reports.Good)
}
