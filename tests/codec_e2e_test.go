package tests

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// TestE2E_EncryptedTaskHistory runs a stack with CAPTCHAFLOW_KEYS_FILE (as make run does): a task started under one
// key finishes after the worker and the ingress restarted with the next key first; its stored history holds
// neither its input nor its code in plaintext, only ciphertext under both key IDs; the report reads it through the
// codec; and a plaintext start (a client without the codec) still runs.
func TestE2E_EncryptedTaskHistory(t *testing.T) {
	server, err := devstack.TemporalServerPath()
	require.NoError(t, err)
	if _, err := os.Stat(server); err != nil && os.Getenv("CI") == "" {
		t.Skipf("e2e: temporal-server missing at %s", server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	keys := filepath.Join(t.TempDir(), "keys")
	old := codec.NewKeyLine("rotation-old")
	require.NoError(t, os.WriteFile(keys, []byte(old), 0o600))
	runDir := t.TempDir()
	t.Cleanup(func() { // what went wrong, should anything
		for _, name := range []string{"worker", "ingress"} {
			if t.Failed() {
				t.Logf("--- %s.log ---\n%s", name, devstack.TailFile(filepath.Join(runDir, name+".log"), 30))
			}
		}
	})
	stack, err := devstack.Start(ctx, devstack.Options{RunDir: runDir, TemporalHeadless: true, KeysFile: keys,
		SimulatorEnv: map[string]string{"SIM_SOLVE_MIN": "200ms", "SIM_SOLVE_MAX": "400ms"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Stop() })
	c, err := stack.Dial(ctx)
	require.NoError(t, err)
	defer func() { c.Close() }()

	id := "codec-" + strconv.FormatInt(time.Now().UnixMilli()%1e7, 36)
	const proxyPassword = "s3cret-codec-proxy"
	in := captchaflow.Input{Method: "userrecaptcha", Params: captchaflow.Params{"googlekey": "6Le-codec-site-key",
		"pageurl": "https://codec.example.test/login", "sim_solve_ms": "6000",
		"proxy": "user:" + proxyPassword + "@203.0.113.7:3128", "proxytype": "HTTP"},
		CallbackTimeoutSeconds: 10, PollIntervalSeconds: 1} // a pingback lost to the ingress's restart is polled for
	run, err := captchaflow.Start(ctx, c, id, in)
	require.NoError(t, err)
	// Rotation while the task runs: the next key first, the old one kept; every process restarts onto it.
	require.NoError(t, os.WriteFile(keys, []byte(codec.NewKeyLine("rotation-next")+old), 0o600))
	for _, p := range []*devstack.Process{stack.Ingress(), stack.Worker()} {
		require.NoError(t, p.Stop())
	}
	require.NoError(t, stack.StartWorker(ctx))
	require.NoError(t, stack.StartIngress(ctx))
	c.Close() // the old key alone cannot read what the next one wrote
	c, err = stack.Dial(ctx)
	require.NoError(t, err)
	var res captchaflow.Result
	require.NoError(t, c.GetWorkflow(ctx, id, run.GetRunID()).Get(ctx, &res), "the task started under the old key finishes under the next")
	require.NotEmpty(t, res.Code)

	plain, err := stack.Temporal.Dial(ctx) // what the Web UI and the CLI without the codec read
	require.NoError(t, err)
	defer plain.Close()
	raw := storedHistory(ctx, t, plain, id)
	for _, secret := range []string{res.Code, "6Le-codec-site-key", "codec.example.test", proxyPassword} {
		assert.NotContains(t, raw, secret, "plaintext in the stored history")
	}
	for _, name := range []string{"worker", "ingress", "simulator"} { // nor in any process's log
		log, err := os.ReadFile(filepath.Join(runDir, name+".log"))
		require.NoError(t, err)
		assert.NotContains(t, string(log), proxyPassword, "the proxy's password in %s.log", name)
		if name != "simulator" { // the provider knows the code
			assert.NotContains(t, string(log), res.Code, "the code in %s.log", name)
		}
	}
	assert.Contains(t, raw, codec.EncodingEncrypted)
	for _, keyID := range []string{"rotation-old", "rotation-next"} {
		assert.Contains(t, raw, keyID, "payloads under key %s", keyID) // a metadata value, decoded by historyText
	}
	report, err := captchaflow.SendReport(ctx, c, id, captchaflow.VerdictGood)
	require.NoError(t, err, "the report reads the encrypted history through the codec")
	assert.Equal(t, res.ProviderTaskID, report.ProviderTaskID)

	// A plaintext start (the CLI without a codec, another SDK) runs: its input is what it exposes, its result is
	// encrypted all the same, so reading it takes the codec.
	_, err = captchaflow.Start(ctx, plain, id+"-plain", in)
	require.NoError(t, err)
	var res2 captchaflow.Result
	require.NoError(t, c.GetWorkflow(ctx, id+"-plain", "").Get(ctx, &res2))
	stored := storedHistory(ctx, t, plain, id+"-plain")
	assert.Contains(t, stored, "codec.example.test", "the plaintext start's input")
	assert.NotContains(t, stored, res2.Code, "the result")
}

// storedHistory is id's history as stored, every base64 payload decoded (historyText) but nothing decrypted.
func storedHistory(ctx context.Context, t *testing.T, c client.Client, id string) string {
	t.Helper()
	h := &historypb.History{}
	for iter := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); iter.HasNext(); {
		ev, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.Marshal(h)
	require.NoError(t, err)
	return historyText(b)
}
