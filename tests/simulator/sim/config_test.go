package sim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestDefaultConfigIsValidAndRealistic(t *testing.T) {
	cfg := sim.DefaultConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "127.0.0.1:8099", cfg.Addr)
	assert.Equal(t, []string{sim.DefaultAPIKey}, cfg.APIKeys)
	assert.Len(t, sim.DefaultAPIKey, sim.KeyLength)
	assert.Equal(t, 10*time.Second, cfg.SolveMin)
	assert.Equal(t, 60*time.Second, cfg.SolveMax)
	assert.Equal(t, sim.ErrorNoSlotAvailable, cfg.BusyCode)
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("SIM_ADDR", "127.0.0.1:0")
	t.Setenv("SIM_API_KEYS", "0123456789abcdef0123456789abcdef,fedcba9876543210fedcba9876543210")
	t.Setenv("SIM_SOLVE_MIN", "50ms")
	t.Setenv("SIM_SOLVE_MAX", "300ms")
	t.Setenv("SIM_THREADS", "5")
	t.Setenv("SIM_BUSY_CODE", sim.ErrorZeroBalance)
	t.Setenv("SIM_SEED", "42")
	t.Setenv("SIM_DROP_RATE", "0.25")
	t.Setenv("SIM_LATE_DELAY", "90s")
	t.Setenv("SIM_FAULT_RULES", "chaos-=>drop_pingback")
	cfg, err := sim.ConfigFromEnv()
	require.NoError(t, err)
	assert.Len(t, cfg.APIKeys, 2)
	assert.Equal(t, 50*time.Millisecond, cfg.SolveMin)
	assert.Equal(t, 300*time.Millisecond, cfg.SolveMax)
	assert.Equal(t, 5, cfg.Threads)
	assert.Equal(t, sim.ErrorZeroBalance, cfg.BusyCode)
	assert.EqualValues(t, 42, cfg.Seed)
	assert.InDelta(t, 0.25, cfg.DropRate, 1e-9)
	assert.Equal(t, 90*time.Second, cfg.LateDelay)
	assert.Equal(t, 15*time.Minute, cfg.Retention, "unset variables keep their defaults")
}

func TestConfigFromEnvRejectsBadValues(t *testing.T) {
	t.Setenv("SIM_SOLVE_MIN", "soon")
	_, err := sim.ConfigFromEnv()
	assert.Error(t, err)
}

func TestValidateReportsEveryProblemWithoutLeakingKeys(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.APIKeys = []string{"super-secret-but-short"}
	cfg.SolveMin, cfg.SolveMax = time.Second, time.Millisecond
	cfg.BusyCode = "ERROR_SOMETHING"
	cfg.DropRate, cfg.DupRate = 0.7, 0.7
	cfg.FaultRules = "x=>explode"
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"API key #1", "solve time range", "busy code", "add up to", "explode"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "super-secret")

	_, err = sim.New(cfg)
	assert.Error(t, err)
}
