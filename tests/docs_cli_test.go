package tests

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/internal/docscheck"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// docsExampleTaskID is the task ID the documents' CLI examples use; the test gives it a per-run suffix, so a
// server that keeps earlier runs' workflows cannot refuse the start.
const docsExampleTaskID = "order-42-login"

// docsCLIExamples are the marked CLI blocks that run here, in order: the README's start, then the contract's report.
// docsCodecEndpoint is make run's codec server in the examples; here the e2e worker's.
const docsCodecEndpoint = "http://127.0.0.1:8234"

var docsCLIExamples = []struct{ file, marker string }{
	{"../README.md", "cli-start"},
	{"../docs/contract.md", "cli-report"},
}

// TestDocsCLIExamples runs the documents' Temporal CLI examples as written (only the task ID made unique) with the
// pinned CLI against the e2e stack: the task is solved with the provider's code, the CLI prints it, and the
// verdict reaches the provider once.
func TestDocsCLIExamples(t *testing.T) {
	s := requireStack(t)
	cli, err := devstack.TemporalCLIPath()
	require.NoError(t, err)
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("the Temporal CLI is not at %s: %v", cli, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	taskID := docsExampleTaskID + "-" + s.runID
	var script strings.Builder
	for _, ex := range docsCLIExamples {
		text, err := os.ReadFile(ex.file)
		require.NoError(t, err)
		block, err := docscheck.CodeBlock(string(text), ex.marker)
		require.NoError(t, err, ex.file)
		require.Contains(t, block, docsExampleTaskID, "%s's example no longer uses the task ID this test renames", ex.file)
		block = strings.ReplaceAll(block, docsExampleTaskID, taskID)
		script.WriteString(strings.ReplaceAll(block, docsCodecEndpoint, s.codecURL()))
	}
	// `temporal` in the examples is the pinned CLI, pointed at the stack by its environment variables.
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c",
		`temporal() { "$DOCS_TEMPORAL_CLI" "$@"; }`+"\n"+script.String())
	cmd.Env = append(os.Environ(), "DOCS_TEMPORAL_CLI="+cli,
		"TEMPORAL_ADDRESS="+s.temporalAddr, "TEMPORAL_NAMESPACE="+s.namespace)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the documented CLI commands failed:\n%s\n%s", out, s.logTails(20))

	var res captchaflow.Result
	require.NoError(t, s.c.GetWorkflow(ctx, taskID, "").Get(ctx, &res))
	assert.Equal(t, sim.CodeFor(res.ProviderTaskID), res.Code, "the task's code is the provider's")
	assert.Contains(t, string(out), res.Code, "`temporal workflow result` printed the code")
	assert.Contains(t, string(out), `"phase"`, "`temporal workflow query --name status` printed the status")

	reportID, err := captchaflow.ReportWorkflowID(taskID)
	require.NoError(t, err)
	var verdict captchaflow.ReportResult
	require.NoError(t, s.c.GetWorkflow(ctx, reportID, "").Get(ctx, &verdict))
	assert.Equal(t, captchaflow.VerdictBad, verdict.Verdict)
	tasks, err := s.simTasks(ctx, "/callback/"+taskID)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "one provider task for the CLI-started task")
	assert.EqualValues(t, 1, tasks[0].ReportsBad, "the CLI's reportbad reached the provider once")
}
