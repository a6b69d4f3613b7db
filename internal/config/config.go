// Package config reads the environment (docs/operations.md), failing fast naming the variable; Temporal's via envconfig.
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/internal/telemetry"
)

const (
	DefaultProviderBaseURL    = "https://ocr.captchaai.com"
	DefaultStickyCacheSize    = 2000 // ~50 KB a workflow, ~100 MiB (the SDK's 10 000 took ~490 MiB)
	DefaultWorkerMetricsAddr  = "127.0.0.1:9091"
	DefaultIngressMetricsAddr = "127.0.0.1:9092"
	// CompressionEnv is none (the default: a few KB a message cost more CPU to gzip than to send) or gzip.
	CompressionEnv = "CAPTCHAFLOW_GRPC_COMPRESSION"
)

// Worker is the worker's configuration; secrets are unset from the environment once read.
type Worker struct {
	ProviderAPIKey             Secret         `env:"CAPTCHAAI_API_KEY,unset"` // unless PROVIDERS_FILE names the keys
	ProviderBaseURL            string         `env:"CAPTCHAAI_BASE_URL"`
	SubmitsPerSecond           float64        `env:"CAPTCHAAI_SUBMITS_PER_SECOND"` // 0: the provider's documented budget (2captcha's hosts), else not paced
	ResultsPerSecond           float64        `env:"CAPTCHAAI_RESULTS_PER_SECOND"`
	CallbackBaseURL            string         `env:"CALLBACK_BASE_URL,required,notEmpty"`
	CallbackSecret             Secret         `env:"CALLBACK_SECRET,required,notEmpty,unset"`
	NotifySecret               Secret         `env:"NOTIFY_SECRET,unset"`
	TaskQueue                  string         `env:"TASK_QUEUE"`
	MetricsAddr                string         `env:"WORKER_METRICS_ADDR"` // set but empty: off
	ProviderTimeout            time.Duration  `env:"CAPTCHAAI_TIMEOUT" envDefault:"30s"`
	DeliveryRequestTimeout     time.Duration  `env:"NOTIFY_REQUEST_TIMEOUT" envDefault:"15s"`
	ShutdownTimeout            time.Duration  `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`
	NotifyAllowPrivate         bool           `env:"NOTIFY_ALLOW_PRIVATE" envDefault:"false"`
	MaxConcurrentActivities    int            `env:"WORKER_MAX_CONCURRENT_ACTIVITIES" envDefault:"0"`
	MaxConcurrentWorkflowTasks int            `env:"WORKER_MAX_CONCURRENT_WORKFLOW_TASKS" envDefault:"0"`
	StickyCacheSize            int            `env:"WORKER_STICKY_CACHE_SIZE"`
	CallbackTimeoutByMethod    MethodTimeouts `env:"CALLBACK_TIMEOUT_BY_METHOD"`
	ProviderBalanceInterval    time.Duration  `env:"PROVIDER_BALANCE_INTERVAL" envDefault:"1m"` // 0: the schedule is left alone
	ProviderBalanceLow         float64        `env:"PROVIDER_BALANCE_LOW" envDefault:"0"`
	ProviderThreads            int            `env:"PROVIDER_THREADS" envDefault:"0"` // 0: no admission control
	ProvidersFile              string         `env:"PROVIDERS_FILE"`
	ProviderGiveUp             time.Duration  `env:"PROVIDER_GIVE_UP" envDefault:"2m"`
	ProviderNoSlotBudget       time.Duration  `env:"PROVIDER_NO_SLOT_BUDGET" envDefault:"60s"`
	NexusCallers               []string       `env:"NEXUS_CALLER_NAMESPACES"` // empty: the endpoint serves every namespace
	// The codec server for the Web UI and the CLI (docs/security.md): off unless CODEC_ADDR is set.
	CodecAddr                 string   `env:"CODEC_ADDR"`
	CodecToken                Secret   `env:"CODEC_TOKEN_FILE,file"` // the file's content, the bearer token
	CodecUIOrigins            []string `env:"CODEC_UI_ORIGINS" envDefault:"http://localhost:8233,http://127.0.0.1:8233"`
	CodecLoopbackWithoutToken bool     `env:"CODEC_LOOPBACK_WITHOUT_TOKEN"` // make run's: no sign-in, loopback only
}

type Ingress struct {
	Addr                   string        `env:"INGRESS_ADDR" envDefault:"127.0.0.1:8080"`
	CallbackSecret         Secret        `env:"CALLBACK_SECRET,required,notEmpty,unset"`
	CallbackSecretPrevious Secret        `env:"CALLBACK_SECRET_PREVIOUS,unset"`
	SignalTimeout          time.Duration `env:"INGRESS_SIGNAL_TIMEOUT" envDefault:"5s"`
	ReadHeaderTimeout      time.Duration `env:"INGRESS_READ_HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout            time.Duration `env:"INGRESS_READ_TIMEOUT" envDefault:"10s"`
	WriteTimeout           time.Duration `env:"INGRESS_WRITE_TIMEOUT" envDefault:"15s"`
	IdleTimeout            time.Duration `env:"INGRESS_IDLE_TIMEOUT" envDefault:"60s"`
	ShutdownTimeout        time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"20s"`
	BodyLimit              string        `env:"INGRESS_BODY_LIMIT" envDefault:"64K"`
	LookupTimeout          time.Duration `env:"INGRESS_LOOKUP_TIMEOUT" envDefault:"3s"`
	MetricsAddr            string        `env:"INGRESS_METRICS_ADDR"` // set but empty: off
	TrustedProxies         []string      `env:"INGRESS_TRUSTED_PROXIES"`
	UntokenedRate          float64       `env:"INGRESS_UNTOKENED_RATE" envDefault:"50"`
	UntokenedRatePerIP     float64       `env:"INGRESS_UNTOKENED_RATE_PER_IP" envDefault:"10"`
	UntokenedQueue         int           `env:"INGRESS_UNTOKENED_QUEUE" envDefault:"512"`
	UntokenedWorkers       int           `env:"INGRESS_UNTOKENED_WORKERS" envDefault:"8"`
	UntokenedAllowCIDRs    []string      `env:"UNTOKENED_ALLOW_CIDRS"`
	CallbackBurst          int           `env:"INGRESS_CALLBACK_BURST" envDefault:"4"`
	CallbackRefill         time.Duration `env:"INGRESS_CALLBACK_REFILL" envDefault:"30s"`
}

// LoadWorker reads Worker; defaults a tag cannot name are set before parsing.
func LoadWorker() (Worker, error) {
	cfg := Worker{ProviderBaseURL: DefaultProviderBaseURL, TaskQueue: captchaflow.DefaultTaskQueue,
		StickyCacheSize: DefaultStickyCacheSize}
	err := load("worker", &cfg, &cfg.MetricsAddr, "WORKER_METRICS_ADDR", DefaultWorkerMetricsAddr)
	if err == nil && cfg.ProvidersFile == "" && cfg.ProviderAPIKey == "" {
		err = errors.New("worker configuration: CAPTCHAAI_API_KEY: required (or name the providers in PROVIDERS_FILE)")
	}
	return cfg, err
}

func LoadIngress() (cfg Ingress, err error) {
	err = load("ingress", &cfg, &cfg.MetricsAddr, "INGRESS_METRICS_ADDR", DefaultIngressMetricsAddr)
	return cfg, err
}

// load parses cfg; a listen address gets its default only when unset, since set but empty means "no listener"
// (env would let a default win). env's messages name the variable, never a secret's value.
func load[T any](who string, cfg *T, metricsAddr *string, metricsEnv, metricsDefault string) error {
	err := env.Parse(cfg)
	if _, set := os.LookupEnv(metricsEnv); !set {
		*metricsAddr = metricsDefault
	}
	if err != nil {
		return fmt.Errorf("%s configuration: %w", who, err)
	}
	return nil
}

// ClientOptions are envconfig's (TEMPORAL_*) with logger, OTEL_* tracing as service, and the codec (codecLog nil: quiet).
func ClientOptions(ctx context.Context, service string, logger, codecLog *slog.Logger) (client.Options, *codec.Codec, func(context.Context) error, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return opts, nil, nil, fmt.Errorf("temporal client configuration: %w", err)
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	if opts.ConnectionOptions.GrpcCompression, err = compression(os.Getenv(CompressionEnv)); err != nil {
		return opts, nil, nil, err
	}
	interceptors, flush, err := telemetry.Setup(ctx, service)
	if err != nil {
		return opts, nil, nil, fmt.Errorf("OTEL_* (tracing): %w", err)
	}
	opts.Interceptors = append(opts.Interceptors, interceptors...)
	keys, err := codec.Configure(&opts, os.Getenv(codec.KeysFileEnv), codecLog)
	return opts, keys, flush, err
}

func compression(name string) (client.GrpcCompression, error) {
	switch name {
	case "", "none":
		return &client.GrpcCompressionNone{}, nil
	case "gzip":
		return &client.GrpcCompressionGzip{}, nil
	}
	return nil, fmt.Errorf("%s=%.20q: want none or gzip", CompressionEnv, name)
}

// MethodTimeouts is "method=duration,…" (e.g. "turnstile=60s"), whole seconds from 1 s to 24 h, each method once.
type MethodTimeouts map[string]time.Duration

func (m *MethodTimeouts) UnmarshalText(text []byte) error {
	out := MethodTimeouts{}
	for entry := range strings.SplitSeq(string(text), ",") {
		method, value, ok := strings.Cut(entry, "=")
		if strings.TrimSpace(entry) == "" {
			continue
		}
		method, value = strings.TrimSpace(method), strings.TrimSpace(value)
		switch d, err := time.ParseDuration(value); {
		case !ok:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %.60q is not method=duration", strings.TrimSpace(entry))
		case !captchaflow.MethodPattern.MatchString(method):
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %.60q is not a provider method name", method)
		case out[method] != 0:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s appears twice", method)
		case err != nil:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s=%.40q is not a duration (e.g. 60s)", method, value)
		case d < time.Second || d > 24*time.Hour || d%time.Second != 0:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s=%s must be whole seconds from 1s to 24h", method, d)
		default:
			out[method] = d
		}
	}
	*m = out
	return nil
}

// Secret prints as [redacted] through fmt, slog and JSON, so a config logged by accident leaks nothing.
type Secret string

const redacted = "[redacted]"

func (s Secret) Reveal() string               { return string(s) }
func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
