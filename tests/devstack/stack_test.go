package devstack

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/internal/config"
)

func startStack(t *testing.T, ctx context.Context, opts Options) *Stack {
	t.Helper()
	temporalServerForTest(t)
	opts.RunDir = t.TempDir()
	opts.TemporalHeadless = true
	stack, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Stop() })
	return stack
}

// TestStackComponentsComeBackAfterCrashesAndStops exercises what the chaos tests do to the stack: SIGKILL the
// worker, stop the ingress, restart Temporal on its SQLite file, each followed by a start that waits for health.
func TestStackComponentsComeBackAfterCrashesAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stack := startStack(t, ctx, Options{WorkerEnv: map[string]string{"SHUTDOWN_TIMEOUT": "2s"}})
	require.True(t, stack.UsesSimulator())
	assert.Equal(t, stack.SimulatorURL(), stack.ProviderURL())
	for _, p := range []*Process{stack.Simulator(), stack.Worker(), stack.Ingress()} {
		require.NotNil(t, p)
		assert.True(t, p.Running(), p.Name())
	}
	assert.Len(t, stack.ProviderAPIKey(), 32, "a generated key the simulator accepts")
	assert.True(t, strings.HasPrefix(stack.NotifySecret(), "whsec_"))
	assert.Equal(t, stack.IngressURL(), stack.CallbackBaseURL())

	worker := stack.Worker()
	oldPID := worker.PID()
	worker.Kill()
	assert.Error(t, HTTPOK(stack.WorkerMetricsURL()+"/healthz")(ctx), "a killed worker must not answer")
	require.NoError(t, stack.StartWorker(ctx))
	assert.NotEqual(t, oldPID, stack.Worker().PID())
	assert.Error(t, stack.StartWorker(ctx), "starting a running component is refused")

	// The ingress's /metrics is on its own port, not on the callback one.
	require.NoError(t, HTTPOK(stack.IngressMetricsURL()+"/metrics")(ctx))
	assert.Error(t, HTTPOK(stack.IngressURL()+"/metrics")(ctx))

	require.NoError(t, stack.Ingress().Stop())
	require.NoError(t, stack.StartIngress(ctx))

	require.NoError(t, stack.Temporal.Stop())
	require.NoError(t, stack.Temporal.Restart(ctx))
	// The ingress reconnects by itself; its readiness follows Temporal's.
	require.NoError(t, WaitReady(ctx, "ingress after Temporal's restart", 30*time.Second, HTTPOK(stack.IngressURL()+"/readyz"), stack.Ingress()))

	logs, err := os.ReadFile(filepath.Join(stack.RunDir(), "worker.log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(logs), "=== devstack: starting worker"), "the restart appends to the same log")
	assert.NotContains(t, string(logs), stack.CallbackSecret())
	assert.NotContains(t, string(logs), stack.ProviderAPIKey())

	require.NoError(t, stack.Stop())
	for _, p := range []*Process{stack.Simulator(), stack.Worker(), stack.Ingress(), stack.Temporal.Process()} {
		assert.False(t, p.Running(), "%s still running after Stop", p.Name())
	}
}

// TestStackWithARealProviderKeySkipsTheSimulator: CAPTCHAAI_API_KEY without a base URL means the real provider.
func TestStackWithARealProviderKeySkipsTheSimulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	simPort, err := FreePort()
	require.NoError(t, err)
	stack := startStack(t, ctx, Options{ProviderAPIKey: "a-real-key-0123456789abcdef012345", SimulatorPort: simPort})

	assert.False(t, stack.UsesSimulator())
	assert.Nil(t, stack.Simulator())
	assert.Error(t, stack.StartSimulator(ctx))
	_, err = net.DialTimeout("tcp", loopback(simPort), time.Second)
	assert.Error(t, err, "no simulator may listen")
	assert.True(t, stack.Worker().Running())
	assert.Equal(t, "a-real-key-0123456789abcdef012345", stack.ProviderAPIKey())
	assert.Equal(t, config.DefaultProviderBaseURL, stack.ProviderURL())
}

func TestStartRequiresARunDir(t *testing.T) {
	_, err := Start(context.Background(), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RunDir")
}
