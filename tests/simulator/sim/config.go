package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/captchaflow/captchaflow/providers"
)

// KeyLength is the length of a well-formed provider API key; anything else is
// answered with ERROR_WRONG_USER_KEY, as the real service does.
const KeyLength = 32

// DefaultAPIKey is the key accepted when SIM_API_KEYS is not set. It is a
// public development value, not a secret.
const DefaultAPIKey = "simulator0dev0key000000000000000"

// Config controls the simulator. Every field can be set from the environment
// (tags below); DefaultConfig returns the envDefault values.
type Config struct {
	// Addr is where simulator/main.go listens; unused when embedded.
	Addr string `env:"SIM_ADDR" envDefault:"127.0.0.1:8099"`
	// Protocol is the provider protocol this process speaks: ProtocolInPHP (in.php / res.php, GET pingbacks) or
	// ProtocolCreateTask (JSON createTask / getTaskResult, POST callbacks), one per process as one provider speaks one.
	Protocol string `env:"SIM_PROTOCOL" envDefault:"inphp"`
	// Flavor is the createTask provider imitated (providers.Flavor: task types, task-ID form, callback body, report
	// calls, error statuses); only read with ProtocolCreateTask.
	Flavor string `env:"SIM_FLAVOR" envDefault:"anticaptcha"`
	// APIKeys are the accepted provider keys (each KeyLength characters).
	APIKeys []string `env:"SIM_API_KEYS" envSeparator:"," envDefault:"simulator0dev0key000000000000000"`

	// SolveMin and SolveMax bound the uniform solve-time distribution.
	// Both zero means tasks are solved immediately.
	SolveMin time.Duration `env:"SIM_SOLVE_MIN" envDefault:"10s"`
	SolveMax time.Duration `env:"SIM_SOLVE_MAX" envDefault:"60s"`

	// Threads is the number of tasks one key may have in solving at once;
	// 0 means unlimited. When full, in.php answers BusyCode (refused, not
	// queued); a thread frees when its task is solved or found unsolvable.
	// PUT /_sim/threads changes it at run time.
	Threads int `env:"SIM_THREADS" envDefault:"0"`
	// SubmitLimit, SubmitWindow and SubmitBan are the account's submission rule (2captcha's for in.php: 60, 3s,
	// 10s): more than SubmitLimit submissions with one key within SubmitWindow answer MAX_USER_TURN (createTask: the
	// flavor's rate refusal) and bar the key for SubmitBan. SubmitLimit 0 turns the rule off. See limits.go.
	SubmitLimit  int           `env:"SIM_SUBMIT_LIMIT" envDefault:"0"`
	SubmitWindow time.Duration `env:"SIM_SUBMIT_WINDOW" envDefault:"3s"`
	SubmitBan    time.Duration `env:"SIM_SUBMIT_BAN" envDefault:"10s"`
	// SubmitCountBarred makes the requests refused during a bar count towards the window, so a client that keeps
	// sending through the bar is barred again the moment it ends (a stricter reading of the rule; off by default).
	SubmitCountBarred bool `env:"SIM_SUBMIT_COUNT_BARRED" envDefault:"false"`
	// ResultRate is the account's budget of result requests (res.php action=get, getTaskResult) per key within any
	// second; over it they answer ERROR_TOO_MUCH_REQUESTS (createTask: the flavor's rate refusal). 0 turns it off.
	// PUT /_sim/limits changes the four at run time.
	ResultRate int `env:"SIM_RESULT_RATE" envDefault:"0"`
	// BusyCode is ErrorNoSlotAvailable (2captcha) or ErrorZeroBalance (CaptchaAI).
	BusyCode string `env:"SIM_BUSY_CODE" envDefault:"ERROR_NO_SLOT_AVAILABLE"`
	// Balance is what res.php?action=getbalance reports.
	Balance float64 `env:"SIM_BALANCE" envDefault:"100"`
	// TaskIDBase is the first task id handed out (10 digits like the real service).
	TaskIDBase int64 `env:"SIM_TASK_ID_BASE" envDefault:"7300000000"`

	// Retention is how long a finished task's result stays readable on res.php.
	Retention time.Duration `env:"SIM_RETENTION" envDefault:"15m"`

	// PingbackTimeout bounds one pingback request (and the dial of a hung one).
	PingbackTimeout time.Duration `env:"SIM_PINGBACK_TIMEOUT" envDefault:"5s"`
	// PingbackConcurrency bounds pingback requests in flight at once.
	PingbackConcurrency int `env:"SIM_PINGBACK_CONCURRENCY" envDefault:"256"`

	// Seed makes every per-task random draw (solve time, faults) reproducible.
	Seed uint64 `env:"SIM_SEED" envDefault:"1"`

	// Per-run fault rates (0..1). The pingback rates partition one draw, so
	// DropRate+DupRate+LateRate+HangRate must not exceed 1.
	DropRate       float64 `env:"SIM_DROP_RATE" envDefault:"0"`
	DupRate        float64 `env:"SIM_DUP_RATE" envDefault:"0"`
	LateRate       float64 `env:"SIM_LATE_RATE" envDefault:"0"`
	HangRate       float64 `env:"SIM_HANG_RATE" envDefault:"0"`
	UnsolvableRate float64 `env:"SIM_UNSOLVABLE_RATE" envDefault:"0"`
	// UnsolvablePingback makes every unsolvable task (drawn, or by the
	// unsolvable fault) call its pingback with code=ERROR_CAPTCHA_UNSOLVABLE, as
	// 2captcha documents, instead of sending none. Off by default.
	UnsolvablePingback bool `env:"SIM_UNSOLVABLE_PINGBACK" envDefault:"false"`

	// LateDelay is how long after solving a late pingback is sent; set it
	// longer than the workflow's callback timeout.
	LateDelay time.Duration `env:"SIM_LATE_DELAY" envDefault:"2m"`
	// DupGap is the pause between the two sends of a duplicated pingback.
	DupGap time.Duration `env:"SIM_DUP_GAP" envDefault:"0s"`
	// HangFor is the longest a hung pingback connection is held open.
	HangFor time.Duration `env:"SIM_HANG_FOR" envDefault:"30s"`

	// FaultRules assigns faults by pattern; see ParseFaultRules for the syntax.
	FaultRules string `env:"SIM_FAULT_RULES"`
	// Refuse lists the task types this provider does not take — createTask "type"s, or in.php methods: createTask
	// answers them ERROR_TASK_NOT_SUPPORTED and in.php ERROR_NO_SUCH_METHOD, as a provider without that type does.
	Refuse []string `env:"SIM_REFUSE" envSeparator:","`
	// BadProxies lists proxy hosts the provider cannot connect through: a task with one is created, then ends with
	// the protocol's proxy word (res.php, getTaskResult and the pingback alike).
	BadProxies []string `env:"SIM_BAD_PROXIES" envSeparator:","`

	// CloseTimeout bounds how long Close waits for in-flight goroutines.
	CloseTimeout time.Duration `env:"SIM_CLOSE_TIMEOUT" envDefault:"5s"`

	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger `env:"-"`
}

// The protocols a simulator process can speak (Config.Protocol).
const (
	ProtocolInPHP      = "inphp"
	ProtocolCreateTask = "createtask"
)

// DefaultConfig returns the documented defaults, ignoring the environment.
func DefaultConfig() Config {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		// The defaults are compile-time constants; failing here is a programming error.
		panic(fmt.Sprintf("sim: invalid built-in defaults: %v", err))
	}
	return cfg
}

// ConfigFromEnv reads the SIM_* environment variables over the defaults.
func ConfigFromEnv() (Config, error) {
	cfg, err := env.ParseAs[Config]()
	if err != nil {
		return Config{}, fmt.Errorf("sim: reading environment: %w", err)
	}
	return cfg, cfg.Validate()
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	return errors.Join(slices.Concat(c.keyErrors(), c.serviceErrors(), c.timingErrors(), c.faultErrors(),
		limitErrors(c.SubmitLimit, c.SubmitWindow, c.SubmitBan, c.ResultRate))...)
}

// keyErrors checks the API keys without ever echoing one.
func (c Config) keyErrors() []error {
	var errs []error
	if len(c.APIKeys) == 0 {
		errs = append(errs, errors.New("at least one API key is required"))
	}
	for i, k := range c.APIKeys {
		if len(k) != KeyLength {
			// Never echo the key itself.
			errs = append(errs, fmt.Errorf("API key #%d has %d characters, want %d", i+1, len(k), KeyLength))
		}
	}
	return errs
}

// serviceErrors checks what the simulated service is: its solve times, protocol, flavor, threads and task ids.
func (c Config) serviceErrors() []error {
	var errs []error
	if c.SolveMin < 0 || c.SolveMax < c.SolveMin {
		errs = append(errs, fmt.Errorf("solve time range [%s, %s] is invalid", c.SolveMin, c.SolveMax))
	}
	if c.Protocol != ProtocolInPHP && c.Protocol != ProtocolCreateTask {
		errs = append(errs, fmt.Errorf("protocol must be %s or %s, got %.20q", ProtocolInPHP, ProtocolCreateTask, c.Protocol))
	}
	if _, ok := providers.ProfileOf(providers.Flavor(c.Flavor)); !ok {
		errs = append(errs, fmt.Errorf("flavor must be one of %v, got %.20q", providers.Flavors, c.Flavor))
	}
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("threads must be >= 0, got %d", c.Threads))
	}
	if c.BusyCode != ErrorNoSlotAvailable && c.BusyCode != ErrorZeroBalance {
		errs = append(errs, fmt.Errorf("busy code must be %s or %s, got %q", ErrorNoSlotAvailable, ErrorZeroBalance, c.BusyCode))
	}
	if c.TaskIDBase < 1 {
		errs = append(errs, fmt.Errorf("task id base must be positive, got %d", c.TaskIDBase))
	}
	return errs
}

// timingErrors checks the durations and the pingback concurrency the simulator's timers and senders run with.
func (c Config) timingErrors() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"retention", c.Retention}, {"pingback timeout", c.PingbackTimeout}, {"hang duration", c.HangFor}, {"close timeout", c.CloseTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if c.LateDelay < 0 || c.DupGap < 0 {
		errs = append(errs, errors.New("late delay and duplicate gap must not be negative"))
	}
	if c.PingbackConcurrency < 1 {
		errs = append(errs, fmt.Errorf("pingback concurrency must be >= 1, got %d", c.PingbackConcurrency))
	}
	return errs
}

// faultErrors checks the fault rates are probabilities that fit in one draw, and the fault rules parse.
func (c Config) faultErrors() []error {
	var errs []error
	for _, r := range []struct {
		name string
		v    float64
	}{{"drop", c.DropRate}, {"duplicate", c.DupRate}, {"late", c.LateRate}, {"hang", c.HangRate}, {"unsolvable", c.UnsolvableRate}} {
		if r.v < 0 || r.v > 1 {
			errs = append(errs, fmt.Errorf("%s rate must be within [0,1], got %g", r.name, r.v))
		}
	}
	if sum := c.DropRate + c.DupRate + c.LateRate + c.HangRate; sum > 1 {
		errs = append(errs, fmt.Errorf("pingback fault rates add up to %g, must not exceed 1", sum))
	}
	if _, err := ParseFaultRules(c.FaultRules); err != nil {
		errs = append(errs, err)
	}
	return errs
}
