package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
)

// temporalServerForTest returns temporal-server, skipping the test when it has not been built, except in CI,
// where a missing server is a broken pipeline and must fail.
func temporalServerForTest(t *testing.T) string {
	t.Helper()
	server, err := TemporalServerPath()
	require.NoError(t, err)
	if _, err := os.Stat(server); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("temporal-server missing at %s in CI (tools/build.sh should have built it): %v", server, err)
		}
		t.Skipf("temporal-server not built at %s; run `make tools` (or set TEMPORAL_SERVER) to run this test", server)
	}
	return server
}

// TestTemporalServerStartsRegistersSearchAttributesAndSurvivesRestart starts the real server on SQLite through
// the launcher, the way the stack and the e2e tests do.
func TestTemporalServerStartsRegistersSearchAttributesAndSurvivesRestart(t *testing.T) {
	server := temporalServerForTest(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	temporal, err := StartTemporal(ctx, TemporalOptions{
		ServerPath: server,
		DBFile:     filepath.Join(dir, "data", "temporal.db"),
		LogPath:    filepath.Join(dir, "temporal.log"),
		Headless:   true,
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
	for _, key := range captchaflow.SearchAttributeKeys {
		assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[key.GetName()], "search attribute %s", key.GetName())
	}

	eps, err := c.OperatorService().ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: captchaflow.NexusEndpoint})
	require.NoError(t, err)
	require.Len(t, eps.GetEndpoints(), 1, "the captchaflow endpoint")
	target := eps.GetEndpoints()[0].GetSpec().GetTarget().GetWorker()
	assert.Equal(t, []string{DefaultNamespace, captchaflow.DefaultTaskQueue}, []string{target.GetNamespace(), target.GetTaskQueue()})
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: CallerNamespace})
	require.NoError(t, err, "the caller namespace")

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

func TestStartTemporalExplainsAMissingServer(t *testing.T) {
	dir := t.TempDir()
	_, err := StartTemporal(context.Background(), TemporalOptions{
		ServerPath: filepath.Join(dir, "no-temporal-server"), DBFile: filepath.Join(dir, "t.db"), LogPath: filepath.Join(dir, "t.log"),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "make tools")
}

// cliDevServerDatabase has the Temporal CLI's dev server (what make run ran before) write a SQLite file with one
// running workflow in it, and returns the file and the workflow's ID.
func cliDevServerDatabase(t *testing.T, dir string) (string, string) {
	t.Helper()
	cli, err := TemporalCLIPath()
	require.NoError(t, err)
	if _, err := os.Stat(cli); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Temporal CLI missing at %s in CI (tools/build.sh --cluster builds it): %v", cli, err)
		}
		t.Skipf("Temporal CLI not built at %s (make cli): it writes the old database", cli)
	}
	port, err := FreePort()
	require.NoError(t, err)
	dbFile := filepath.Join(dir, "temporal.db")
	old, err := StartProcess(ProcessSpec{Name: "cli-dev-server", Path: cli, Env: MergeEnv(), LogPath: filepath.Join(dir, "cli.log"),
		Args: []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--db-filename", dbFile}})
	require.NoError(t, err)
	defer old.Kill()
	check, closeCheck, err := TemporalReady(loopback(port), DefaultNamespace)
	require.NoError(t, err)
	defer closeCheck()
	require.NoError(t, WaitReady(context.Background(), "the CLI's dev server", time.Minute, check, old))
	c, err := client.Dial(client.Options{HostPort: loopback(port), Logger: QuietSDKLogger()})
	require.NoError(t, err)
	defer c.Close()
	const id = "started-on-the-cli-dev-server"
	_, err = c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: "devstack-test-no-worker"}, captchaflow.WorkflowType)
	require.NoError(t, err)
	require.NoError(t, old.Stop())
	return dbFile, id
}

// TestStartTemporalUpgradesTheCLIDevServersDatabase: a .data/ from the CLI's dev server (schema 0.10, no version
// table) is upgraded in place by temporal-sql-tool, says so, and keeps its workflows; a second start finds it
// current and says nothing.
func TestStartTemporalUpgradesTheCLIDevServersDatabase(t *testing.T) {
	server := temporalServerForTest(t)
	dir := t.TempDir()
	dbFile, id := cliDevServerDatabase(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var said []string
	opts := TemporalOptions{ServerPath: server, DBFile: dbFile, LogPath: filepath.Join(dir, "temporal.log"), Headless: true,
		Logf: func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }}
	temporal, err := StartTemporal(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	require.Len(t, said, 1)
	assert.Contains(t, said[0], "upgraded "+dbFile+" from the Temporal CLI dev server's schema 0.10 to "+SQLiteSchemaVersion)

	c, err := temporal.Dial(ctx)
	require.NoError(t, err)
	defer c.Close()
	desc, err := c.DescribeWorkflow(ctx, id, "")
	require.NoError(t, err, "the CLI dev server's workflow must survive the upgrade")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())

	require.NoError(t, temporal.Stop())
	said = nil
	again, err := StartTemporal(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = again.Stop() })
	assert.Empty(t, said, "an upgraded database is current")
}

// TestStartTemporalReplacesADatabaseItCannotUpgrade: a file that is no Temporal database is moved aside with a
// message naming where, and the server starts on a new one.
func TestStartTemporalReplacesADatabaseItCannotUpgrade(t *testing.T) {
	server := temporalServerForTest(t)
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "temporal.db")
	require.NoError(t, os.WriteFile(dbFile, []byte("not a database"), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var said []string
	temporal, err := StartTemporal(ctx, TemporalOptions{ServerPath: server, DBFile: dbFile, LogPath: filepath.Join(dir, "temporal.log"),
		Headless: true, Logf: func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	require.Len(t, said, 1)
	assert.Contains(t, said[0], "could not upgrade "+dbFile)
	aside, err := filepath.Glob(dbFile + ".replaced-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	assert.Contains(t, said[0], "moved it to "+aside[0])
	kept, err := os.ReadFile(aside[0])
	require.NoError(t, err)
	assert.Equal(t, "not a database", string(kept), "the old file is kept as it was")
}
