// Package config reads the environment of the worker and the ingress. Both fail fast, naming the missing
// variable, rather than start half-configured. Temporal's own settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TLS, API key) are read by go.temporal.io/sdk/contrib/envconfig, not here.
package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/captchaflow/captchaflow"
)

// DefaultProviderBaseURL is CaptchaAI's API host.
const DefaultProviderBaseURL = "https://ocr.captchaai.com"

// DefaultStickyCacheSize caps the workflows a worker keeps in memory: ~50 KB each, so about 100 MiB (the SDK's
// own default of 10 000 took ~490 MiB). An evicted workflow is replayed from its short history when needed.
const DefaultStickyCacheSize = 2000

// Worker is the worker's configuration.
type Worker struct {
	// ProviderAPIKey is required unless ProvidersFile names the providers (each with its own key variable).
	ProviderAPIKey  Secret `env:"CAPTCHAAI_API_KEY,unset"`
	ProviderBaseURL string `env:"CAPTCHAAI_BASE_URL"` // default DefaultProviderBaseURL
	// CallbackBaseURL is the public base of the ingress; the provider calls CallbackBaseURL/callback/<id>?t=….
	CallbackBaseURL string `env:"CALLBACK_BASE_URL,required,notEmpty"`
	CallbackSecret  Secret `env:"CALLBACK_SECRET,required,notEmpty,unset"`
	// NotifySecret signs deliveries to notify_url; a task with notify_url fails to deliver while it is unset.
	NotifySecret Secret `env:"NOTIFY_SECRET,unset"`
	TaskQueue    string `env:"TASK_QUEUE"` // default captchaflow.DefaultTaskQueue
	// MetricsAddr serves Prometheus metrics on /metrics and /healthz; set but empty disables it (see
	// defaultUnlessSet), unset is DefaultWorkerMetricsAddr.
	MetricsAddr string `env:"WORKER_METRICS_ADDR"`
	// ProviderTimeout bounds one in.php/res.php request.
	ProviderTimeout time.Duration `env:"CAPTCHAAI_TIMEOUT" envDefault:"30s"`
	// DeliveryTimeout bounds one POST to notify_url.
	DeliveryRequestTimeout time.Duration `env:"NOTIFY_REQUEST_TIMEOUT" envDefault:"15s"`
	ShutdownTimeout        time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`
	// NotifyAllowPrivate lets deliveries reach loopback and private-network notify_url addresses (local
	// development, the demo). Off: only public addresses; link-local (cloud metadata) is refused either way.
	NotifyAllowPrivate bool `env:"NOTIFY_ALLOW_PRIVATE" envDefault:"false"`
	// Worker tuning; zero keeps the SDK default.
	MaxConcurrentActivities    int `env:"WORKER_MAX_CONCURRENT_ACTIVITIES" envDefault:"0"`
	MaxConcurrentWorkflowTasks int `env:"WORKER_MAX_CONCURRENT_WORKFLOW_TASKS" envDefault:"0"`
	// StickyCacheSize caps the workflows kept in memory (the SDK default of 10 000 took ~490 MiB).
	StickyCacheSize int `env:"WORKER_STICKY_CACHE_SIZE"` // default DefaultStickyCacheSize
	// CallbackTimeoutByMethod is the callback timeout of a task of that method whose input leaves
	// callback_timeout_seconds unset, e.g. "turnstile=60s,userrecaptcha=45s"; other methods keep 120 s. A task
	// records the value it took when it starts, so changing it affects new tasks only.
	CallbackTimeoutByMethod MethodTimeouts `env:"CALLBACK_TIMEOUT_BY_METHOD"`
	// ProviderBalanceInterval is how often the namespace's Schedule captchaflow-balance reads the provider's balance
	// (res.php?action=getbalance) into the captchaflow_provider_balance gauge: at least a minute; 0 leaves the
	// schedule alone (this worker neither creates nor updates it, but still runs it).
	ProviderBalanceInterval time.Duration `env:"PROVIDER_BALANCE_INTERVAL" envDefault:"1m"`
	// ProviderBalanceLow is the low-balance alert's threshold, exported as captchaflow_provider_balance_low_threshold;
	// 0 (unset) exports nothing and the alert stays quiet.
	ProviderBalanceLow float64 `env:"PROVIDER_BALANCE_LOW" envDefault:"0"`
	// ProviderThreads is the provider plan's thread count: at most this many provider tasks in flight across
	// every worker of the task queue, the rest wait in phase queued (0 or unset: no admission control). Without
	// PROVIDERS_FILE only; each ask carries it, the latest wins.
	ProviderThreads int `env:"PROVIDER_THREADS" envDefault:"0"`
	// ProvidersFile names the YAML file of providers (see internal/providers); empty: CAPTCHAAI_* is the one provider.
	ProvidersFile string `env:"PROVIDERS_FILE"`
	// ProviderGiveUp: a provider unreachable this long gives up its open submissions, which go elsewhere.
	ProviderGiveUp time.Duration `env:"PROVIDER_GIVE_UP" envDefault:"2m"`
	// ProviderNoSlotBudget: a provider answering no-slot without a break this long is skipped for a while.
	ProviderNoSlotBudget time.Duration `env:"PROVIDER_NO_SLOT_BUDGET" envDefault:"60s"`
}

// Ingress is the ingress's configuration.
type Ingress struct {
	Addr                   string `env:"INGRESS_ADDR" envDefault:"127.0.0.1:8080"`
	CallbackSecret         Secret `env:"CALLBACK_SECRET,required,notEmpty,unset"`
	CallbackSecretPrevious Secret `env:"CALLBACK_SECRET_PREVIOUS,unset"`
	// SignalTimeout bounds the wait for Temporal to accept a signal; past it the callback gets a 503.
	SignalTimeout     time.Duration `env:"INGRESS_SIGNAL_TIMEOUT" envDefault:"5s"`
	ReadHeaderTimeout time.Duration `env:"INGRESS_READ_HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout       time.Duration `env:"INGRESS_READ_TIMEOUT" envDefault:"10s"`
	WriteTimeout      time.Duration `env:"INGRESS_WRITE_TIMEOUT" envDefault:"15s"`
	IdleTimeout       time.Duration `env:"INGRESS_IDLE_TIMEOUT" envDefault:"60s"`
	ShutdownTimeout   time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// BodyLimit caps a callback body (Echo size syntax, e.g. 64K).
	BodyLimit string `env:"INGRESS_BODY_LIMIT" envDefault:"64K"`
	// LookupTimeout bounds the search-attribute lookup of an untokened callback (visibility is eventually
	// consistent, so it is retried within this bound).
	LookupTimeout time.Duration `env:"INGRESS_LOOKUP_TIMEOUT" envDefault:"3s"`
	// MetricsAddr serves /metrics on a listener of its own, never on the public callback one; set but empty
	// disables it. LoadIngress applies the default, DefaultIngressMetricsAddr, itself: the env library treats a
	// set-but-empty variable as unset (a tag default would win), and here empty must mean "off".
	MetricsAddr string `env:"INGRESS_METRICS_ADDR"`
	// TrustedProxies are CIDRs of reverse proxies whose X-Forwarded-For names the client, for the per-IP limit;
	// empty trusts no header: the TCP peer is the client.
	TrustedProxies []string `env:"INGRESS_TRUSTED_PROXIES"`
	// UntokenedRate and UntokenedRatePerIP cap untokened callbacks per second, in all and per client IP (a burst
	// of twice the rate); past either the answer is 429 with Retry-After.
	UntokenedRate      float64 `env:"INGRESS_UNTOKENED_RATE" envDefault:"50"`
	UntokenedRatePerIP float64 `env:"INGRESS_UNTOKENED_RATE_PER_IP" envDefault:"10"`
	// UntokenedQueue and UntokenedWorkers size the background lookup and signal of accepted untokened callbacks;
	// a callback that finds the queue full is answered 503.
	UntokenedQueue   int `env:"INGRESS_UNTOKENED_QUEUE" envDefault:"512"`
	UntokenedWorkers int `env:"INGRESS_UNTOKENED_WORKERS" envDefault:"8"`
	// UntokenedAllowCIDRs, when set, are the only client networks served on the untokened route (the provider's
	// callback sources); others get 403. Comma-separated CIDRs; empty serves everyone. The client is the TCP peer,
	// or what a trusted proxy (INGRESS_TRUSTED_PROXIES) names.
	UntokenedAllowCIDRs []string `env:"UNTOKENED_ALLOW_CIDRS"`
	// CallbackBurst and CallbackRefill budget the signals one workflow (tokened route) or one provider task ID
	// (untokened route) receives: CallbackBurst at once, then one per CallbackRefill. Callbacks past the budget,
	// and exact repeats, are answered 200 without a signal; the workflow's fallback poll still gets the result.
	CallbackBurst  int           `env:"INGRESS_CALLBACK_BURST" envDefault:"4"`
	CallbackRefill time.Duration `env:"INGRESS_CALLBACK_REFILL" envDefault:"30s"`
}

// Where the processes serve /metrics unless WORKER_METRICS_ADDR / INGRESS_METRICS_ADDR say otherwise.
const (
	DefaultWorkerMetricsAddr  = "127.0.0.1:9091"
	DefaultIngressMetricsAddr = "127.0.0.1:9092"
)

// LoadWorker reads Worker from the environment. The defaults declared elsewhere are set before parsing (a struct
// tag cannot name a constant); a variable that is set overrides them.
func LoadWorker() (Worker, error) {
	cfg, err := load("worker", Worker{
		ProviderBaseURL: DefaultProviderBaseURL,
		TaskQueue:       captchaflow.DefaultTaskQueue,
		StickyCacheSize: DefaultStickyCacheSize,
	})
	defaultUnlessSet(&cfg.MetricsAddr, "WORKER_METRICS_ADDR", DefaultWorkerMetricsAddr)
	if err == nil && cfg.ProvidersFile == "" && cfg.ProviderAPIKey == "" {
		err = errors.New("worker configuration: CAPTCHAAI_API_KEY: required (or name the providers in PROVIDERS_FILE)")
	}
	return cfg, err
}

// WorkerTaskQueue is the worker's TASK_QUEUE alone, for commands that need nothing else of its configuration.
func WorkerTaskQueue() string {
	if q := os.Getenv("TASK_QUEUE"); q != "" {
		return q
	}
	return captchaflow.DefaultTaskQueue
}

// LoadIngress reads Ingress from the environment.
func LoadIngress() (Ingress, error) {
	cfg, err := load("ingress", Ingress{})
	defaultUnlessSet(&cfg.MetricsAddr, "INGRESS_METRICS_ADDR", DefaultIngressMetricsAddr)
	return cfg, err
}

// defaultUnlessSet gives a listen address its default only when its variable is unset: set but empty means "no
// listener", a distinction the env library does not make (a tag default or a preset value would win).
func defaultUnlessSet(value *string, name, def string) {
	if _, set := os.LookupEnv(name); !set {
		*value = def
	}
}

func load[T any](who string, cfg T) (T, error) {
	err := env.Parse(&cfg)
	if err != nil {
		// env's messages name the variable and never include a secret's value (secrets are plain strings, so
		// they cannot fail to parse).
		return cfg, fmt.Errorf("%s configuration: %w", who, err)
	}
	return cfg, nil
}
