package devstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWaitReadyPassesOnceTheEndpointAnswers200(t *testing.T) {
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(server.Close)

	require.NoError(t, WaitReady(context.Background(), "test server", 5*time.Second, HTTPOK(server.URL), nil))
	assert.EqualValues(t, 3, calls.Load())
}

func TestWaitReadyTimesOutNamingTheComponentAndItsLog(t *testing.T) {
	p := shell(t, `echo "listening failed: port in use"; exec sleep 60`, time.Second)
	waitForLog(t, p, "port in use")
	port, err := FreePort()
	require.NoError(t, err)

	start := time.Now()
	err = WaitReady(context.Background(), "ingress", 500*time.Millisecond, HTTPOK("http://"+loopback(port)+"/readyz"), p)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 3*time.Second, "the wait must be bounded by its timeout")
	msg := err.Error()
	assert.Contains(t, msg, "ingress did not become ready within 500ms")
	assert.Contains(t, msg, "connection refused", "the last probe error says why")
	assert.Contains(t, msg, "listening failed: port in use", "the log's last lines say what went wrong")
}

func TestWaitReadyFailsFastWhenTheProcessExits(t *testing.T) {
	p := shell(t, `echo "fatal: CALLBACK_SECRET is required"; exit 1`, time.Second)
	port, err := FreePort()
	require.NoError(t, err)

	start := time.Now()
	err = WaitReady(context.Background(), "worker", time.Minute, HTTPOK("http://"+loopback(port)+"/healthz"), p)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "an exited process must not be waited for until the timeout")
	assert.Contains(t, err.Error(), "worker exited before it became ready (exit status 1)")
	assert.Contains(t, err.Error(), "CALLBACK_SECRET is required")
}

func TestWaitReadyStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond) // the cancellation under test, not a readiness stand-in
		cancel()
	}()
	err := WaitReady(ctx, "simulator", time.Minute, func(context.Context) error { return assert.AnError }, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "simulator did not become ready before it was cancelled")
}

func TestTemporalReadyFailsAgainstNothing(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	check, closeCheck, err := TemporalReady(loopback(port), DefaultNamespace)
	require.NoError(t, err)
	t.Cleanup(closeCheck)
	err = WaitReady(context.Background(), "temporal", 300*time.Millisecond, check, nil)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "temporal did not become ready within 300ms"), err.Error())
}

func TestMergeEnvDropsInheritedTemporalSettingsAndLayersInOrder(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "cloud-key")
	t.Setenv("DEVSTACK_TEST_KEEP", "kept")
	env := MergeEnv(map[string]string{"A": "1", "B": "1"}, map[string]string{"B": "2", "TEMPORAL_ADDRESS": "127.0.0.1:1"})
	assert.Contains(t, env, "DEVSTACK_TEST_KEEP=kept")
	assert.Contains(t, env, "A=1")
	assert.Contains(t, env, "B=2")
	assert.Contains(t, env, "TEMPORAL_ADDRESS=127.0.0.1:1", "a layer may set TEMPORAL_*")
	assert.NotContains(t, env, "B=1")
	assert.NotContains(t, env, "TEMPORAL_API_KEY=cloud-key")
}

func TestServerConfigIsLoopbackSQLiteWithTheCallersDynamicConfig(t *testing.T) {
	dir := t.TempDir()
	opts := TemporalOptions{DBFile: filepath.Join(dir, "temporal.db"), LogPath: filepath.Join(dir, "temporal.log"),
		Port: 7233, HTTPPort: 7243, MetricsPort: 7300,
		DynamicConfig: map[string]string{"matching.numTaskqueueReadPartitions": "2", "limit.x": "5"}}
	configFile, err := writeServerConfig(opts, false)
	require.NoError(t, err)
	config, err := os.ReadFile(configFile)
	require.NoError(t, err)
	for _, want := range []string{`pluginName: "sqlite"`, `databaseName: "` + opts.DBFile + `"`, "grpcPort: 7233", "httpPort: 7243",
		`listenAddress: "127.0.0.1:7300"`, "numHistoryShards: 1", "bindOnLocalHost: true"} {
		assert.Contains(t, string(config), want)
	}
	assert.NotContains(t, string(config), "{{", "every template field is filled")
	dynamic, err := os.ReadFile(filepath.Join(dir, "temporal-dynamicconfig.yaml"))
	require.NoError(t, err)
	for _, want := range []string{
		"matching.numTaskqueueWritePartitions:\n  - value: 1\n",
		"matching.numTaskqueueReadPartitions:\n  - value: 2\n", // the caller's value wins
		"limit.x:\n  - value: 5\n",
		"system.forceSearchAttributesCacheRefreshOnRead:\n  - value: true\n",
	} {
		assert.Contains(t, string(dynamic), want)
	}

	// The internal ports are kept beside the database and reused by the next start.
	again, err := loadInternalPorts(opts.DBFile+".ports.json", false)
	require.NoError(t, err)
	assert.Contains(t, string(config), "grpcPort: "+strconv.Itoa(again.History))
}
