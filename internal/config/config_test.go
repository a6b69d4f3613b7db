package config

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

func TestWorkerFailsFastNamingMissingVariable(t *testing.T) {
	t.Setenv("CAPTCHAAI_API_KEY", "")
	t.Setenv("CALLBACK_BASE_URL", "http://127.0.0.1:8080")
	t.Setenv("CALLBACK_SECRET", "cbsecret")
	_, err := LoadWorker()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CAPTCHAAI_API_KEY")
}

func TestWorkerLoadsAndRedactsSecrets(t *testing.T) {
	t.Setenv("CAPTCHAAI_API_KEY", "the-provider-key")
	t.Setenv("CALLBACK_BASE_URL", "http://127.0.0.1:8080")
	t.Setenv("CALLBACK_SECRET", "the-callback-secret")
	t.Setenv("NOTIFY_SECRET", "the-notify-secret")
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, "the-provider-key", cfg.ProviderAPIKey.Reveal())
	assert.Equal(t, "captcha-solve", cfg.TaskQueue)
	assert.Equal(t, DefaultProviderBaseURL, cfg.ProviderBaseURL)

	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "key", cfg.ProviderAPIKey)
	js, _ := json.Marshal(cfg)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.CallbackSecret), logged.String(), string(js)} {
		for _, secret := range []string{"the-provider-key", "the-callback-secret", "the-notify-secret"} {
			assert.NotContains(t, out, secret)
		}
	}
}

func TestIngressDefaultsAndRequiredSecret(t *testing.T) {
	t.Setenv("CALLBACK_SECRET", "")
	_, err := LoadIngress()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CALLBACK_SECRET")

	t.Setenv("CALLBACK_SECRET", "s")
	cfg, err := LoadIngress()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", cfg.Addr)
	assert.Equal(t, "s", cfg.CallbackSecret.Reveal())
}

func TestIngressMetricsAddrDefaultsAndEmptyDisables(t *testing.T) {
	t.Setenv("CALLBACK_SECRET", "s")
	cfg, err := LoadIngress()
	require.NoError(t, err)
	assert.Equal(t, DefaultIngressMetricsAddr, cfg.MetricsAddr)
	assert.Equal(t, 4, cfg.CallbackBurst)
	assert.Equal(t, 50.0, cfg.UntokenedRate)

	t.Setenv("CALLBACK_SECRET", "s") // read once and unset (the `unset` tag)
	t.Setenv("INGRESS_METRICS_ADDR", "")
	cfg, err = LoadIngress()
	require.NoError(t, err)
	assert.Empty(t, cfg.MetricsAddr, "set but empty disables the metrics listener")

	t.Setenv("INGRESS_METRICS_ADDR", "0.0.0.0:9300")
	t.Setenv("INGRESS_TRUSTED_PROXIES", "10.0.0.0/8,192.168.1.1/32")
	t.Setenv("CALLBACK_SECRET", "s")
	cfg, err = LoadIngress()
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:9300", cfg.MetricsAddr)
	assert.Equal(t, []string{"10.0.0.0/8", "192.168.1.1/32"}, cfg.TrustedProxies)
}

func TestWorkerMetricsAddrDefaultsWhenUnsetAndIsOffWhenEmpty(t *testing.T) {
	t.Setenv("CAPTCHAAI_API_KEY", "k")
	t.Setenv("CALLBACK_BASE_URL", "http://127.0.0.1:8080")
	t.Setenv("CALLBACK_SECRET", "s")
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, DefaultWorkerMetricsAddr, cfg.MetricsAddr, "unset: the default")

	t.Setenv("CAPTCHAAI_API_KEY", "k") // read once and unset (the `unset` tag)
	t.Setenv("CALLBACK_SECRET", "s")
	t.Setenv("WORKER_METRICS_ADDR", "")
	cfg, err = LoadWorker()
	require.NoError(t, err)
	assert.Empty(t, cfg.MetricsAddr, "set but empty disables the metrics listener, as the README says")
}

func TestIngressUntokenedAllowCIDRs(t *testing.T) {
	t.Setenv("CALLBACK_SECRET", "s")
	cfg, err := LoadIngress()
	require.NoError(t, err)
	assert.Empty(t, cfg.UntokenedAllowCIDRs, "unset: every source is served")

	t.Setenv("CALLBACK_SECRET", "s")
	t.Setenv("UNTOKENED_ALLOW_CIDRS", "198.51.100.0/24, 2001:db8::/32")
	cfg, err = LoadIngress()
	require.NoError(t, err)
	assert.Equal(t, []string{"198.51.100.0/24", " 2001:db8::/32"}, cfg.UntokenedAllowCIDRs, "the ingress trims and checks them")
}

func TestWorkerReadsTheCodecTokenFromItsFile(t *testing.T) {
	t.Setenv("CAPTCHAAI_API_KEY", "k")
	t.Setenv("CALLBACK_BASE_URL", "http://127.0.0.1:8080")
	t.Setenv("CALLBACK_SECRET", "s")
	path := t.TempDir() + "/token"
	require.NoError(t, os.WriteFile(path, []byte("the-codec-token\n"), 0o600))
	t.Setenv("CODEC_TOKEN_FILE", path)
	cfg, err := LoadWorker()
	require.NoError(t, err)
	assert.Equal(t, "the-codec-token\n", cfg.CodecToken.Reveal(), "the worker trims it")
	assert.NotContains(t, fmt.Sprintf("%+v", cfg), "the-codec-token")
	assert.Equal(t, []string{"http://localhost:8233", "http://127.0.0.1:8233"}, cfg.CodecUIOrigins)
}

func TestTemporalConnectionsAreUncompressedUnlessGzipIsAsked(t *testing.T) {
	for value, want := range map[string]client.GrpcCompression{
		"": &client.GrpcCompressionNone{}, "none": &client.GrpcCompressionNone{}, "gzip": &client.GrpcCompressionGzip{},
	} {
		t.Setenv(CompressionEnv, value)
		opts, _, _, err := ClientOptions(context.Background(), "test", slog.New(slog.DiscardHandler), nil)
		if err != nil || reflect.TypeOf(opts.ConnectionOptions.GrpcCompression) != reflect.TypeOf(want) {
			t.Errorf("%s=%q: compression %T, error %v; want %T", CompressionEnv, value, opts.ConnectionOptions.GrpcCompression, err, want)
		}
	}
	t.Setenv(CompressionEnv, "zstd")
	if _, _, _, err := ClientOptions(context.Background(), "test", slog.New(slog.DiscardHandler), nil); err == nil ||
		!strings.Contains(err.Error(), CompressionEnv) || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("error %v, want one naming %s and the value", err, CompressionEnv)
	}
}
