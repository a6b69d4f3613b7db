package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkerCallbackTimeoutByMethod(t *testing.T) {
	setWorkerRequired(t)
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Empty(t, cfg.CallbackTimeoutByMethod, "unset: every method keeps the contract's 120 s")

	setWorkerRequired(t)
	t.Setenv("CALLBACK_TIMEOUT_BY_METHOD", "turnstile=60s, userrecaptcha=45s")
	cfg, err = LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, MethodTimeouts{"turnstile": time.Minute, "userrecaptcha": 45 * time.Second}, cfg.CallbackTimeoutByMethod)

	for value, want := range map[string]string{
		"turnstile=soon":             "turnstile=\"soon\" is not a duration",
		"turnstile":                  "is not method=duration",
		"Turn Stile=60s":             "is not a provider method name",
		"turnstile=500ms":            "must be whole seconds from 1s to 24h",
		"turnstile=25h":              "must be whole seconds",
		"turnstile=60s,turnstile=5s": "turnstile appears twice",
	} {
		setWorkerRequired(t)
		t.Setenv("CALLBACK_TIMEOUT_BY_METHOD", value)
		_, err = LoadWorker()
		if assert.Error(t, err, value) {
			assert.Contains(t, err.Error(), "CALLBACK_TIMEOUT_BY_METHOD: ", value)
			assert.Contains(t, err.Error(), want, value)
		}
	}
}
