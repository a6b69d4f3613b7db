package tests

// The provider balance (issue #10 §2) on the real stack: the worker's Schedule captchaflow-balance reads
// getbalance into captchaflow_provider_balance; with the simulator's balance at 0, in.php answers
// ERROR_ZERO_BALANCE and the tasks wait in phase awaiting_balance, saying why, none failing; with the balance
// restored they submit again and complete, each with one paid submission.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

const simDefaultBalance = 100 // SIM_BALANCE's default; the stack does not set it

func (s *stack) setSimBalance(ctx context.Context, b float64) error {
	return s.simDo(ctx, http.MethodPut, "/_sim/balance", fmt.Sprintf(`{"balance":%g}`, b), http.StatusOK)
}

// balanceGauge reads captchaflow_provider_balance and its checked timestamp from the worker's /metrics.
func (s *stack) balanceGauge(ctx context.Context) (balance, checked float64, found bool) {
	text, err := scrape(ctx, s.workerMetricsURL()+"/metrics")
	if err != nil {
		return 0, 0, false
	}
	balance, found = metricSum(text, activities.MetricProviderBalance, map[string]string{"activity_type": "FetchBalance"})
	checked, _ = metricSum(text, activities.MetricProviderBalanceChecked, nil)
	return balance, checked, found
}

// awaitBalanceGauge triggers the balance schedule (an operator's "check now") until the worker's gauge shows want,
// read after since.
func (s *stack) awaitBalanceGauge(t *testing.T, ctx context.Context, want float64, since time.Time) {
	t.Helper()
	h := s.c.ScheduleClient().GetHandle(ctx, captchaflow.BalanceScheduleID)
	eventually(t, fmt.Sprintf("captchaflow_provider_balance = %g", want), 90*time.Second, time.Second, func() string {
		b, checked, ok := s.balanceGauge(ctx)
		if ok && b == want && checked >= float64(since.Unix()) {
			return ""
		}
		// Skipped while a run is in flight (overlap policy skip): harmless, the next look triggers again.
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
			return "trigger: " + err.Error()
		}
		return fmt.Sprintf("gauge %g (found %t), checked at %.0f", b, ok, checked)
	})
}

func (s *stack) status(ctx context.Context, id string) (captchaflow.Status, error) {
	var st captchaflow.Status
	v, err := s.c.QueryWorkflow(ctx, id, "", captchaflow.StatusQuery)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// currentDetails is what the Web UI shows as the workflow's current details.
func (s *stack) currentDetails(ctx context.Context, id string) (string, error) {
	v, err := s.c.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	if err != nil {
		return "", err
	}
	var md sdk.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		return "", err
	}
	return md.GetCurrentDetails(), nil
}

func TestE2E_ZeroBalancePausesSubmissions(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The worker created the schedule at start (overlap skip, once a minute) and its first run read the balance.
	desc, err := s.c.ScheduleClient().GetHandle(ctx, captchaflow.BalanceScheduleID).Describe(ctx)
	require.NoError(t, err, "the worker creates the balance schedule at start")
	require.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap)
	require.Equal(t, []client.ScheduleIntervalSpec{{Every: time.Minute}}, desc.Schedule.Spec.Intervals)
	sc := newScenario(t, s, "zero-balance")
	t.Cleanup(func() { _ = s.setSimBalance(context.Background(), simDefaultBalance) })
	before := time.Now()
	s.awaitBalanceGauge(t, ctx, simDefaultBalance, time.Time{})

	require.NoError(t, s.setSimBalance(ctx, 0))
	s.awaitBalanceGauge(t, ctx, 0, before)
	paused := sc.add(4, taskSpec{Kind: "zero-balance-paused", SolveMS: 200, Via: captchaflow.ViaCallback})
	sc.start(ctx)
	zeroSince := time.Now()

	// Every task waits, saying why, with nothing submitted; in.php is asked again about once a minute.
	ids := make([]string, len(paused))
	for i, tr := range paused {
		ids[i] = tr.ID
	}
	eventually(t, "every task in awaiting_balance", 30*time.Second, 250*time.Millisecond, func() string {
		for _, id := range ids {
			st, err := s.status(ctx, id)
			if err != nil {
				return err.Error()
			}
			if st.Phase != captchaflow.PhaseAwaitingBalance {
				return id + " is in " + string(st.Phase)
			}
		}
		return ""
	})
	for _, id := range ids {
		st, err := s.status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, captchaflow.WaitingZeroBalance, st.Waiting, id)
		assert.False(t, st.WaitingSince.IsZero(), id)
		assert.Zero(t, st.Submits, id)
		details, err := s.currentDetails(ctx, id)
		require.NoError(t, err)
		assert.Contains(t, details, "**phase:** awaiting_balance", id)
		assert.Contains(t, details, "**waiting:** provider balance is zero", id)
	}
	eventually(t, "CaptchaPhase = awaiting_balance in visibility", 20*time.Second, 500*time.Millisecond, func() string {
		resp, err := s.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf(
			"%s = '%s' AND ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH '%s'",
			captchaflow.PhaseKey.GetName(), captchaflow.PhaseAwaitingBalance, sc.prefix)})
		if err != nil {
			return err.Error()
		}
		if int(resp.GetCount()) != len(ids) {
			return fmt.Sprintf("%d of %d", resp.GetCount(), len(ids))
		}
		return ""
	})
	// A second refusal each (the paced minute, ±20 %): the pause holds and fails nothing.
	eventually(t, "a second ERROR_ZERO_BALANCE per task", 90*time.Second, time.Second, func() string {
		st, err := s.simStats(ctx)
		if err != nil {
			return err.Error()
		}
		if n := st.Submissions.RejectedByCode[sim.ErrorZeroBalance]; n < int64(2*len(ids)) {
			return fmt.Sprintf("%d refusals", n)
		}
		return ""
	})
	for _, id := range ids {
		st, err := s.state(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, st.Status, "%s: none fails for a zero balance", id)
	}
	tasks, err := s.simTasks(ctx, callbackPathPrefix+sc.prefix)
	require.NoError(t, err)
	assert.Empty(t, tasks, "nothing was created, nothing paid, while the balance was zero")

	// Money is back: the next submission of each task is accepted and it completes as usual.
	require.NoError(t, s.setSimBalance(ctx, simDefaultBalance))
	restoredAt := time.Now()
	sc.await(ctx, 2*time.Minute)
	f := sc.verify(ctx) // each: no error, 1 submission, the code delivered
	var resumed time.Duration
	for _, tr := range paused {
		assert.Equal(t, 1, tr.Result.Submits, tr.ID)
		resumed = max(resumed, tr.Result.SubmittedAt.Sub(restoredAt))
	}
	assert.Less(t, resumed, 75*time.Second, "a waiting task submits again within its paced minute")
	s.awaitBalanceGauge(t, ctx, simDefaultBalance, restoredAt)

	st, err := s.simStats(ctx)
	require.NoError(t, err)
	refusals := st.Submissions.RejectedByCode[sim.ErrorZeroBalance]
	h, err := s.history(ctx, paused[0].ID)
	require.NoError(t, err)
	sc.note("balance 0 for %s: %d tasks waited in awaiting_balance, %d ERROR_ZERO_BALANCE answers (%.1f per task), 0 failed, "+
		"0 paid while zero; balance restored: all completed with 1 submission, the last %s after the restore; %d history events for %s",
		restoredAt.Sub(zeroSince).Round(time.Second), len(paused), refusals, float64(refusals)/float64(len(paused)), resumed.Round(time.Second),
		len(h.GetEvents()), paused[0].ID)
	assert.Equal(t, len(paused), f.Delivered)

	// getbalance: the schedule's runs and this test's triggers only, never per task.
	elapsed := time.Since(before)
	assert.LessOrEqual(t, st.ResCalls["getbalance"], int64(math.Ceil(elapsed.Minutes()))+12,
		"getbalance is read by the schedule (and this test's triggers), not per task")

	ids = append(ids, balanceCheckRuns(t, ctx, s)...)
	replayLive(t, s, ids...)
	recordNew(t, s, map[string]string{"zero-balance-paused": paused[0].ID, "balance-checked": ids[len(ids)-1],
		"zero-balance-paused-routed": paused[0].ID})
}

// balanceCheckRuns are the workflow IDs of the schedule's recent CheckBalance runs that completed; their histories
// hold the balance and no secret.
func balanceCheckRuns(t *testing.T, ctx context.Context, s *stack) []string {
	t.Helper()
	desc, err := s.c.ScheduleClient().GetHandle(ctx, captchaflow.BalanceScheduleID).Describe(ctx)
	require.NoError(t, err)
	var ids []string
	for _, a := range desc.Info.RecentActions {
		if a.StartWorkflowResult == nil {
			continue
		}
		id := a.StartWorkflowResult.WorkflowID
		var res activities.BalanceResult
		if err := s.c.GetWorkflow(ctx, id, a.StartWorkflowResult.FirstExecutionRunID).Get(ctx, &res); err != nil {
			continue
		}
		h, err := s.history(ctx, id)
		require.NoError(t, err)
		js, err := protojson.Marshal(h)
		require.NoError(t, err)
		assert.Empty(t, secretsIn(historyText(js)), "%s holds a secret", id)
		ids = append(ids, id)
	}
	require.NotEmpty(t, ids, "no completed CheckBalance run")
	return ids
}
