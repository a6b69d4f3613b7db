package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/workflows"
)

func goodSettings() config.Worker {
	return config.Worker{
		CallbackBaseURL:        "https://hooks.example.com/captcha",
		CallbackSecret:         "callback-secret",
		NotifySecret:           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		ProviderTimeout:        30 * time.Second,
		DeliveryRequestTimeout: 15 * time.Second,
	}
}

func TestCheckSettingsAcceptsWorkingSettings(t *testing.T) {
	require.NoError(t, checkSettings(goodSettings()))
	for _, mod := range []func(*config.Worker){
		func(c *config.Worker) { c.CallbackBaseURL = "http://127.0.0.1:8080" },
		func(c *config.Worker) { c.CallbackBaseURL = "https://hooks.example.com/" },
		func(c *config.Worker) { c.NotifySecret = "" }, // deliveries wait for it, visibly
		func(c *config.Worker) { c.NotifySecret = "a raw secret, used as bytes" },
		func(c *config.Worker) { c.ProviderTimeout = workflows.ProviderStartToClose - time.Second },
		func(c *config.Worker) { c.DeliveryRequestTimeout = workflows.DeliverStartToClose - time.Second },
		func(c *config.Worker) { c.ProviderBalanceInterval = time.Minute },
		func(c *config.Worker) { c.ProviderBalanceInterval = 0 }, // the schedule is left alone
		func(c *config.Worker) { c.ProviderBalanceLow = 25.5 },
	} {
		cfg := goodSettings()
		mod(&cfg)
		assert.NoError(t, checkSettings(cfg), "%+v", cfg)
	}
}

func TestCheckSettingsRefusesWhatCanOnlyFailLater(t *testing.T) {
	for _, c := range []struct {
		name     string
		mod      func(*config.Worker)
		variable string
	}{
		{"relative callback URL", func(c *config.Worker) { c.CallbackBaseURL = "/callback" }, "CALLBACK_BASE_URL"},
		{"host without scheme", func(c *config.Worker) { c.CallbackBaseURL = "hooks.example.com" }, "CALLBACK_BASE_URL"},
		{"ftp callback URL", func(c *config.Worker) { c.CallbackBaseURL = "ftp://hooks.example.com/" }, "CALLBACK_BASE_URL"},
		{"no host", func(c *config.Worker) { c.CallbackBaseURL = "http:///callback" }, "CALLBACK_BASE_URL"},
		{"query", func(c *config.Worker) { c.CallbackBaseURL = "https://h.example/?x=1" }, "CALLBACK_BASE_URL"},
		{"unparsable", func(c *config.Worker) { c.CallbackBaseURL = "http://[::1" }, "CALLBACK_BASE_URL"},
		{"whsec not base64", func(c *config.Worker) { c.NotifySecret = "whsec_s3cr3t!value" }, "NOTIFY_SECRET"},
		{"empty whsec", func(c *config.Worker) { c.NotifySecret = "whsec_" }, "NOTIFY_SECRET"},
		{"timeout equal", func(c *config.Worker) { c.ProviderTimeout = workflows.ProviderStartToClose }, "CAPTCHAAI_TIMEOUT"},
		{"timeout longer", func(c *config.Worker) { c.ProviderTimeout = 2 * time.Minute }, "CAPTCHAAI_TIMEOUT"},
		{"timeout zero", func(c *config.Worker) { c.ProviderTimeout = 0 }, "CAPTCHAAI_TIMEOUT"},
		{"delivery timeout equal", func(c *config.Worker) { c.DeliveryRequestTimeout = workflows.DeliverStartToClose }, "NOTIFY_REQUEST_TIMEOUT"},
		{"delivery timeout zero", func(c *config.Worker) { c.DeliveryRequestTimeout = 0 }, "NOTIFY_REQUEST_TIMEOUT"},
		{"balance read more than once a minute", func(c *config.Worker) { c.ProviderBalanceInterval = 30 * time.Second }, "PROVIDER_BALANCE_INTERVAL"},
		{"negative balance interval", func(c *config.Worker) { c.ProviderBalanceInterval = -time.Minute }, "PROVIDER_BALANCE_INTERVAL"},
		{"negative low balance", func(c *config.Worker) { c.ProviderBalanceLow = -1 }, "PROVIDER_BALANCE_LOW"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := goodSettings()
			c.mod(&cfg)
			err := checkSettings(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.variable)
			assert.NotContains(t, err.Error(), "s3cr3t", "a secret's value is never in the error")
			assert.NotContains(t, err.Error(), "callback-secret")
		})
	}
}

func TestCheckSettingsReportsEveryProblem(t *testing.T) {
	err := checkSettings(config.Worker{CallbackBaseURL: "relative", NotifySecret: "whsec_%%", ProviderTimeout: time.Hour,
		DeliveryRequestTimeout: time.Minute})
	require.Error(t, err)
	for _, v := range []string{"CALLBACK_BASE_URL", "NOTIFY_SECRET", "CAPTCHAAI_TIMEOUT", "NOTIFY_REQUEST_TIMEOUT"} {
		assert.Contains(t, err.Error(), v)
	}
	assert.Equal(t, 4, strings.Count(err.Error(), "\n")+1)
}

func TestWorkerRefusesToStartOnSettingsThatCanOnlyFailLater(t *testing.T) {
	t.Setenv("CAPTCHAAI_API_KEY", "the-provider-key")
	t.Setenv("CALLBACK_BASE_URL", "ingress:8080/callback")
	t.Setenv("CALLBACK_SECRET", "the-callback-secret")
	t.Setenv("NOTIFY_SECRET", "whsec_the-notify-secret")
	t.Setenv("CAPTCHAAI_TIMEOUT", "1m")
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // never reached: the settings are refused first
	err := run(slog.New(slog.DiscardHandler))
	var cfgErr configError
	require.ErrorAs(t, err, &cfgErr, "exit status 2: an operator must fix the settings")
	for _, v := range []string{"CALLBACK_BASE_URL", "NOTIFY_SECRET", "CAPTCHAAI_TIMEOUT"} {
		assert.Contains(t, err.Error(), v)
	}
	for _, secret := range []string{"the-notify-secret", "the-callback-secret", "the-provider-key"} {
		assert.NotContains(t, err.Error(), secret)
	}
}

func TestCheckSettingsProviderThreads(t *testing.T) {
	cfg := goodSettings()
	cfg.ProviderThreads = 4
	require.NoError(t, checkSettings(cfg))
	cfg.ProviderThreads = -1
	err := checkSettings(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PROVIDER_THREADS")
	cfg.ProviderThreads = providers.MaxThreads + 1 // its semaphore could not carry its holders across continue-as-new
	assert.ErrorContains(t, checkSettings(cfg), "PROVIDER_THREADS: 5001 is outside [0, 5000]")
}

func TestCheckSettingsRoutingBounds(t *testing.T) {
	cfg := goodSettings()
	cfg.ProvidersFile, cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget = "providers.yaml", 2*time.Minute, time.Minute
	require.NoError(t, checkSettings(cfg))
	cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget = time.Second, time.Hour
	err := checkSettings(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PROVIDER_GIVE_UP: 1s")
	assert.Contains(t, err.Error(), "PROVIDER_NO_SLOT_BUDGET: 1h")
}

// With PROVIDERS_FILE each provider's threads is its plan: a PROVIDER_THREADS the worker would not read stops it.
func TestCheckSettingsRefusesProviderThreadsWithProvidersFile(t *testing.T) {
	cfg := goodSettings()
	cfg.ProvidersFile, cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget = "providers.yaml", 2*time.Minute, time.Minute
	cfg.ProviderThreads = 4
	err := checkSettings(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PROVIDER_THREADS: not read with PROVIDERS_FILE")
	assert.Contains(t, err.Error(), "providers.yaml")
}

// The account's budgets of CAPTCHAAI_* are refused with PROVIDERS_FILE (its providers' own are read), and out of range
// without it, naming the variable.
func TestCheckSettingsJudgesTheSingleProvidersBudgets(t *testing.T) {
	cfg := goodSettings()
	cfg.SubmitsPerSecond, cfg.ResultsPerSecond = -1, 20000
	err := checkSettings(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CAPTCHAAI_SUBMITS_PER_SECOND: -1 is outside [0, 10000]")
	assert.Contains(t, err.Error(), "CAPTCHAAI_RESULTS_PER_SECOND: 20000 is outside")
	cfg = goodSettings()
	cfg.ProvidersFile, cfg.ProviderGiveUp, cfg.ProviderNoSlotBudget = "providers.yaml", 2*time.Minute, time.Minute
	cfg.SubmitsPerSecond = 5
	err = checkSettings(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not read with PROVIDERS_FILE; unset them and set submits_per_second")
}

func TestCheckSettingsCodecServerNeedsKeysAndACredential(t *testing.T) {
	cfg := goodSettings()
	cfg.CodecAddr = "127.0.0.1:8234"
	t.Setenv("CAPTCHAFLOW_KEYS_FILE", "")
	require.ErrorContains(t, checkSettings(cfg), "CAPTCHAFLOW_KEYS_FILE")
	t.Setenv("CAPTCHAFLOW_KEYS_FILE", "/run/keys")
	require.ErrorContains(t, checkSettings(cfg), "CODEC_TOKEN_FILE", "neither a token nor make run's exception")
	cfg.CodecLoopbackWithoutToken = true
	require.NoError(t, checkSettings(cfg))
	cfg.CodecAddr = "0.0.0.0:8234"
	require.ErrorContains(t, checkSettings(cfg), "loopback", "the exception is loopback only")
	cfg.CodecToken = "tok"
	require.NoError(t, checkSettings(cfg))
}
