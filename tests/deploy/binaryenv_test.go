package deploy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/internal/binaryenv"
)

// binaries maps each compose service running one of our binaries to what that binary reads.
func binaries(t *testing.T) map[string]binaryenv.Env {
	t.Helper()
	all, err := binaryenv.Binaries(repoRoot)
	require.NoError(t, err)
	out := map[string]binaryenv.Env{}
	for _, name := range []string{"worker", "ingress", "simulator"} {
		b := all[name]
		require.NotEmpty(t, b.Known, name)
		if name != "simulator" {
			// A compose file that leaves these out points the client at localhost:7233 inside the container.
			b.Required = append(b.Required, "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE")
		}
		out[name] = b
	}
	return out
}

func TestBinaryEnvIsDerivedFromTheCode(t *testing.T) {
	b := binaries(t)
	// Spot checks that each source of names is really read, so a broken derivation cannot pass silently.
	require.True(t, b["worker"].Reads("CALLBACK_BASE_URL"), "from config.Worker")
	require.True(t, b["worker"].Reads("LOG_LEVEL"), "read by worker/main.go via os.Getenv")
	require.True(t, b["worker"].Reads("TEMPORAL_NAMESPACE"), "from envconfig")
	require.True(t, b["worker"].Reads("TEMPORAL_GRPC_META_X_TENANT"), "envconfig's header family")
	require.True(t, b["ingress"].Reads("INGRESS_ADDR"), "from config.Ingress")
	require.False(t, b["ingress"].Reads("CAPTCHAAI_API_KEY"), "the ingress never sees the provider key")
	require.True(t, b["simulator"].Reads("SIM_ADDR"), "from sim.Config")
	require.True(t, b["simulator"].Reads("SIM_LOG_LEVEL"), "read by simulator/main.go via envOr")
	require.Contains(t, b["worker"].Required, "CALLBACK_SECRET")
	require.Contains(t, b["ingress"].Required, "CALLBACK_SECRET")
}
