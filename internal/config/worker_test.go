package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func setWorkerRequired(t *testing.T) {
	t.Helper()
	t.Setenv("CAPTCHAAI_API_KEY", "the-provider-key")
	t.Setenv("CALLBACK_BASE_URL", "http://127.0.0.1:8080")
	t.Setenv("CALLBACK_SECRET", "the-callback-secret")
}

func TestWorkerNotifyAllowPrivateIsOffByDefault(t *testing.T) {
	setWorkerRequired(t)
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.False(t, cfg.NotifyAllowPrivate, "deliveries go to public addresses only unless asked")

	setWorkerRequired(t) // the secrets are unset once read
	t.Setenv("NOTIFY_ALLOW_PRIVATE", "true")
	cfg, err = LoadWorker()
	require.NoError(t, err)
	assert.True(t, cfg.NotifyAllowPrivate)

	setWorkerRequired(t)
	t.Setenv("NOTIFY_ALLOW_PRIVATE", "yes please")
	_, err = LoadWorker()
	require.Error(t, err, "a value that is not a boolean is refused, not read as false")
}

func TestWorkerBalanceSettings(t *testing.T) {
	setWorkerRequired(t)
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, time.Minute, cfg.ProviderBalanceInterval, "the balance is read once a minute by default")
	assert.Zero(t, cfg.ProviderBalanceLow, "no low-balance threshold unless set")

	setWorkerRequired(t)
	t.Setenv("PROVIDER_BALANCE_INTERVAL", "5m")
	t.Setenv("PROVIDER_BALANCE_LOW", "12.5")
	cfg, err = LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, cfg.ProviderBalanceInterval)
	assert.Equal(t, 12.5, cfg.ProviderBalanceLow)

	setWorkerRequired(t)
	t.Setenv("PROVIDER_BALANCE_LOW", "plenty")
	_, err = LoadWorker()
	require.Error(t, err)
}

func TestWorkerProviderThreads(t *testing.T) {
	setWorkerRequired(t)
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Zero(t, cfg.ProviderThreads, "unset: no admission control")

	setWorkerRequired(t)
	t.Setenv("PROVIDER_THREADS", "4")
	cfg, err = LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.ProviderThreads)
}
