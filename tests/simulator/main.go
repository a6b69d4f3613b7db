// Command simulator runs the provider simulator: CaptchaAI-compatible in.php by default, or one createTask provider
// (-protocol createtask -flavor capsolver); run one process per provider.
//
// Configuration comes from SIM_* environment variables (see sim.Config);
// command-line flags override them. Example:
//
//	SIM_SOLVE_MIN=50ms SIM_SOLVE_MAX=300ms go run ./simulator -drop-rate 0.1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(1)
	}
}

// run loads the configuration, starts the simulator and serves it until a signal arrives.
func run() error {
	cfg, err := configFromEnvAndFlags(os.Args[1:])
	if err != nil {
		return err
	}
	log, err := newLogger()
	if err != nil {
		return err
	}
	cfg.Logger = log

	simulator, err := sim.New(cfg)
	if err != nil {
		return err
	}
	defer simulator.Close()

	listener, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	server := newServer(simulator.Handler(), log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(listener) }()
	logReady(log, listener.Addr().String(), cfg)
	return waitAndShutdown(ctx, server, serveErr, log)
}

// newLogger logs JSON to stderr at SIM_LOG_LEVEL.
func newLogger() (*slog.Logger, error) {
	level := new(slog.LevelVar)
	if err := level.UnmarshalText([]byte(envOr("SIM_LOG_LEVEL", "info"))); err != nil {
		return nil, fmt.Errorf("SIM_LOG_LEVEL: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// newServer bounds every phase of a request, so a slow client cannot hold a connection forever.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// logReady says where the simulator listens and how it behaves; never the keys, only how many there are.
func logReady(log *slog.Logger, addr string, cfg sim.Config) {
	log.Info("simulator ready",
		"addr", addr,
		"protocol", cfg.Protocol, "flavor", cfg.Flavor,
		"api_keys", len(cfg.APIKeys),
		"solve_min", cfg.SolveMin, "solve_max", cfg.SolveMax,
		"threads", cfg.Threads, "busy_code", cfg.BusyCode, "seed", cfg.Seed,
		"drop_rate", cfg.DropRate, "dup_rate", cfg.DupRate, "late_rate", cfg.LateRate,
		"hang_rate", cfg.HangRate, "unsolvable_rate", cfg.UnsolvableRate,
		"fault_rules", cfg.FaultRules != "", "refuse", cfg.Refuse)
}

// waitAndShutdown returns when the server fails or, on a signal, once it has shut down gracefully.
func waitAndShutdown(ctx context.Context, server *http.Server, serveErr <-chan error, log *slog.Logger) error {
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// configFromEnvAndFlags loads SIM_* variables, then lets flags override them.
func configFromEnvAndFlags(args []string) (sim.Config, error) {
	cfg, err := sim.ConfigFromEnv()
	if err != nil {
		return sim.Config{}, err
	}
	fs := flag.NewFlagSet("simulator", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (SIM_ADDR)")
	fs.StringVar(&cfg.Protocol, "protocol", cfg.Protocol, "provider protocol: inphp or createtask (SIM_PROTOCOL)")
	fs.StringVar(&cfg.Flavor, "flavor", cfg.Flavor, "createTask provider imitated: anticaptcha, 2captcha, capmonster or capsolver (SIM_FLAVOR)")
	keys := strings.Join(cfg.APIKeys, ",")
	fs.Func("api-keys", "comma-separated accepted API keys (SIM_API_KEYS)", func(v string) error {
		keys = v
		return nil
	})
	fs.DurationVar(&cfg.SolveMin, "solve-min", cfg.SolveMin, "minimum solve time (SIM_SOLVE_MIN)")
	fs.DurationVar(&cfg.SolveMax, "solve-max", cfg.SolveMax, "maximum solve time (SIM_SOLVE_MAX)")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "threads per key, 0 = unlimited (SIM_THREADS)")
	fs.StringVar(&cfg.BusyCode, "busy-code", cfg.BusyCode, "answer when all threads are busy (SIM_BUSY_CODE)")
	fs.Float64Var(&cfg.Balance, "balance", cfg.Balance, "getbalance answer (SIM_BALANCE)")
	fs.Int64Var(&cfg.TaskIDBase, "task-id-base", cfg.TaskIDBase, "first task id (SIM_TASK_ID_BASE)")
	fs.DurationVar(&cfg.Retention, "retention", cfg.Retention, "result retention (SIM_RETENTION)")
	fs.DurationVar(&cfg.PingbackTimeout, "pingback-timeout", cfg.PingbackTimeout, "pingback request timeout (SIM_PINGBACK_TIMEOUT)")
	fs.IntVar(&cfg.PingbackConcurrency, "pingback-concurrency", cfg.PingbackConcurrency, "pingbacks in flight (SIM_PINGBACK_CONCURRENCY)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed (SIM_SEED)")
	fs.Float64Var(&cfg.DropRate, "drop-rate", cfg.DropRate, "pingback drop rate (SIM_DROP_RATE)")
	fs.Float64Var(&cfg.DupRate, "dup-rate", cfg.DupRate, "pingback duplicate rate (SIM_DUP_RATE)")
	fs.Float64Var(&cfg.LateRate, "late-rate", cfg.LateRate, "late pingback rate (SIM_LATE_RATE)")
	fs.Float64Var(&cfg.HangRate, "hang-rate", cfg.HangRate, "hung pingback rate (SIM_HANG_RATE)")
	fs.Float64Var(&cfg.UnsolvableRate, "unsolvable-rate", cfg.UnsolvableRate, "unsolvable rate (SIM_UNSOLVABLE_RATE)")
	fs.DurationVar(&cfg.LateDelay, "late-delay", cfg.LateDelay, "delay of a late pingback (SIM_LATE_DELAY)")
	fs.DurationVar(&cfg.DupGap, "dup-gap", cfg.DupGap, "gap between duplicate pingbacks (SIM_DUP_GAP)")
	fs.DurationVar(&cfg.HangFor, "hang-for", cfg.HangFor, "longest a hung pingback is held (SIM_HANG_FOR)")
	refuse := strings.Join(cfg.Refuse, ",")
	fs.StringVar(&refuse, "refuse", refuse, "task types refused: createTask types or in.php methods, comma list (SIM_REFUSE)")
	badProxies := strings.Join(cfg.BadProxies, ",")
	fs.StringVar(&badProxies, "bad-proxies", badProxies, "proxy hosts the provider cannot use, comma list (SIM_BAD_PROXIES)")
	fs.StringVar(&cfg.FaultRules, "fault-rules", cfg.FaultRules, "REGEX=>FAULTS rules separated by ; (SIM_FAULT_RULES)")
	fs.DurationVar(&cfg.CloseTimeout, "close-timeout", cfg.CloseTimeout, "bound on shutdown wait (SIM_CLOSE_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return sim.Config{}, err
	}
	cfg.APIKeys, cfg.Refuse, cfg.BadProxies = splitList(keys), splitList(refuse), splitList(badProxies)
	return cfg, cfg.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return fallback
}
