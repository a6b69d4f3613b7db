package devstack

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers"
)

// TestProvidersFileNamesEverySimulatorInOrder checks the file a routed stack writes is one the worker accepts, with
// each simulator's URL and the key's variable, and that a provider needs the simulators.
func TestProvidersFileNamesEverySimulatorInOrder(t *testing.T) {
	opts := Options{RunDir: t.TempDir(), SimulatorPort: 8099, ProviderAPIKey: "k", Providers: []SimProvider{
		{Name: "a", Protocol: providers.ProtocolInPHP},
		{Name: "b", Protocol: providers.ProtocolCreateTask, Flavor: "capsolver", Port: 9001},
	}}
	require.Error(t, resolveProviders(&opts), "simulated providers with a real provider's key")
	opts.ProviderAPIKey = ""
	require.NoError(t, resolveProviders(&opts))
	s := newStack(opts)
	require.True(t, s.routed())
	env, err := s.writeProvidersFile()
	require.NoError(t, err)
	content, err := os.ReadFile(env["PROVIDERS_FILE"])
	require.NoError(t, err)
	f, err := providers.ParseFile(content, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Len(t, f.Providers, 2)
	assert.Equal(t, "http://127.0.0.1:8099", f.Providers[0].BaseURL)
	assert.Equal(t, "http://127.0.0.1:9001", f.Providers[1].BaseURL)
	assert.Equal(t, "capsolver", f.Providers[1].Flavor)
	assert.Equal(t, s.ProviderAPIKey(), env[f.Providers[1].APIKeyEnv])
	assert.NotContains(t, string(content), s.ProviderAPIKey(), "the key sits in the environment, not the file")
	assert.Equal(t, s.ProviderSimulatorURL("b"), "http://127.0.0.1:9001")
	assert.Equal(t, map[string]string{"SIM_PROTOCOL": "createtask", "SIM_FLAVOR": "capsolver"}, s.providerSimEnv(1))
}
