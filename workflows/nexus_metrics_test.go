package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// A task a solve operation started (its memo says so) counts its end in MetricNexusSolvesFinished, by the
// failure's type when it fails; one started directly counts there nothing.
func TestNexusStartedTaskCountsItsEnd(t *testing.T) {
	for _, c := range []struct {
		name    string
		memo    bool
		invalid bool
		want    map[string]int64
	}{
		{"solved through nexus", true, false, map[string]int64{"completed": 1}},
		{"failed through nexus", true, true, map[string]int64{captchaflow.FailureInvalidInput: 1}},
		{"started directly", false, false, map[string]int64{"completed": 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			metrics := newCapturingMetrics()
			ts.SetMetricsHandler(metrics)
			env := ts.NewTestWorkflowEnvironment()
			Register(env, &activities.Activities{}, Settings{})
			if c.memo {
				require.NoError(t, env.SetMemoOnStart(map[string]any{captchaflow.NexusMemo: captchaflow.OperationSolve}))
			}
			env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Return(activities.SubmitResult{ProviderTaskID: "111"}, nil).Maybe()
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111", Code: "CODE", Authenticated: true, RunID: testRunID, Submission: 1})
			}, time.Second)
			in := recaptcha()
			if c.invalid {
				in.Method = ""
			}
			env.ExecuteWorkflow(SolveCaptcha, in)
			require.True(t, env.IsWorkflowCompleted())
			for outcome, n := range c.want {
				assert.Equal(t, n, metrics.count(captchaflow.MetricNexusSolvesFinished, outcome), outcome)
			}
		})
	}
}
