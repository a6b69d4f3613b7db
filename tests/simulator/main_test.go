package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagsOverrideEnvironment(t *testing.T) {
	t.Setenv("SIM_SOLVE_MIN", "1s")
	t.Setenv("SIM_SOLVE_MAX", "2s")
	t.Setenv("SIM_THREADS", "3")
	cfg, err := configFromEnvAndFlags([]string{
		"-solve-max", "5s", "-drop-rate", "0.5",
		"-api-keys", "0123456789abcdef0123456789abcdef, fedcba9876543210fedcba9876543210",
	})
	require.NoError(t, err)
	assert.Equal(t, time.Second, cfg.SolveMin, "from the environment")
	assert.Equal(t, 5*time.Second, cfg.SolveMax, "the flag wins")
	assert.Equal(t, 3, cfg.Threads)
	assert.InDelta(t, 0.5, cfg.DropRate, 1e-9)
	assert.Equal(t, []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"}, cfg.APIKeys)
}

func TestInvalidFlagsAreRejected(t *testing.T) {
	_, err := configFromEnvAndFlags([]string{"-drop-rate", "2"})
	assert.Error(t, err)
	_, err = configFromEnvAndFlags([]string{"-no-such-flag"})
	assert.Error(t, err)
}

func TestProtocolAndFlavorFlags(t *testing.T) {
	t.Setenv("SIM_PROTOCOL", "createtask")
	cfg, err := configFromEnvAndFlags([]string{"-flavor", "capsolver"})
	require.NoError(t, err)
	assert.Equal(t, "createtask", cfg.Protocol)
	assert.Equal(t, "capsolver", cfg.Flavor)
	_, err = configFromEnvAndFlags([]string{"-protocol", "soap"})
	assert.Error(t, err)
}
