package devstack

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
)

// temporalCLIForTest returns the CLI, skipping the test when it has not been built, except in CI, where a
// missing CLI is a broken pipeline and must fail.
func temporalCLIForTest(t *testing.T) string {
	t.Helper()
	cli, err := TemporalCLIPath()
	require.NoError(t, err)
	if _, err := os.Stat(cli); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Temporal CLI missing at %s in CI (tools/build.sh should have built it): %v", cli, err)
		}
		t.Skipf("Temporal CLI not built at %s; run `make tools` (or set TEMPORAL_CLI) to run this test", cli)
	}
	return cli
}

// TestTemporalDevServerStartsRegistersSearchAttributesAndSurvivesRestart starts the real dev server through the
// launcher, the way the stack and the e2e tests do.
func TestTemporalDevServerStartsRegistersSearchAttributesAndSurvivesRestart(t *testing.T) {
	cli := temporalCLIForTest(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	temporal, err := StartTemporal(ctx, TemporalOptions{
		CLIPath:  cli,
		DBFile:   filepath.Join(dir, "data", "temporal.db"),
		LogPath:  filepath.Join(dir, "temporal.log"),
		Headless: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	assert.Empty(t, temporal.UIURL(), "headless")
	assert.FileExists(t, temporal.DBFile())

	c, err := temporal.Dial(ctx)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)

	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: DefaultNamespace})
	require.NoError(t, err)
	for _, name := range []string{captchaflow.TaskIDKey.GetName(), captchaflow.PhaseKey.GetName()} {
		assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[name], "search attribute %s", name)
	}

	// A started workflow (no worker needed) must still be there after a restart on the same SQLite file.
	const id = "devstack-restart-probe"
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "devstack-test-no-worker"}, captchaflow.WorkflowType)
	require.NoError(t, err)
	oldPID := temporal.Process().PID()

	require.NoError(t, temporal.Restart(ctx))
	assert.NotEqual(t, oldPID, temporal.Process().PID())
	desc, err := c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err, "the workflow must survive the restart")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())

	require.NoError(t, temporal.Stop())
	assert.False(t, temporal.Process().Running())
}

func TestStartTemporalExplainsAMissingCLI(t *testing.T) {
	dir := t.TempDir()
	_, err := StartTemporal(context.Background(), TemporalOptions{
		CLIPath: filepath.Join(dir, "no-temporal"), DBFile: filepath.Join(dir, "t.db"), LogPath: filepath.Join(dir, "t.log"),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make tools")
}
