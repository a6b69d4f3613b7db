package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow/providers"
)

type config struct {
	n                int
	concurrencies    []int
	rounds           int
	warmup           int
	temporalAddress  string
	namespace        string
	waiting          []int
	startConcurrency int
	out              string
	phases           map[string]bool
	dynamicConfig    map[string]string
	workerEnv        map[string]string
	ingressEnv       map[string]string
	recoveryTasks    int
	polls            []int
	copyPlot         string
	label            string
	replot           bool
	serverPIDs       map[string]string
	dbDir            string
	parkedN          int
	parkedC          int
	parkedDelay      time.Duration
	nexusSolve       time.Duration
	timeout          time.Duration
	waitBudget       time.Duration
	fleetN           int
	fleetSolve       time.Duration
	pacedRate        float64
	codec            bool
	codecRounds      int
	baseline         string
}

// benchDynamicConfig is added to devstack's dev-server settings unless -dynamic-config sets the key.
//
// The Temporal CLI's dev server forces a search-attribute cache refresh on every read (so that attributes
// created in a session show up at once). Every start with search attributes and every upsert then re-reads the
// cluster metadata from SQLite: captchaflow, which sets CaptchaPhase at start and upserts CaptchaTaskId and
// CaptchaPhase when it waits, paid ~7 ms more server CPU per task than the twin and a ×2–3 callback → result p99
// at C = 100, none of which a production server (cache refreshed in the background) charges. captchaflow's
// attributes are registered when the server starts, before any workflow runs, so the refresh is not needed.
var benchDynamicConfig = map[string]string{
	"system.forceSearchAttributesCacheRefreshOnRead": "false",
}

var allPhases = []string{"throughput", "parked", "poll", "recovery", "nexus", "threads", "billing", "admission", "fleet", "waiting"}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var cfg config
	raw := defineFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	err := raw.apply(&cfg)
	return cfg, err
}

// rawFlags are the flags that need parsing or checking before they go into config.
type rawFlags struct {
	cs, waiting, phases, polls string
	dyn, wenv, ienv, spids     kvFlag
}

// defineFlags declares every flag on fs: the plain ones straight into cfg, the others into the returned rawFlags.
func defineFlags(fs *flag.FlagSet, cfg *config) *rawFlags {
	raw := &rawFlags{dyn: kvFlag{}, wenv: kvFlag{}, ienv: kvFlag{}, spids: kvFlag{}}
	fs.IntVar(&cfg.n, "n", 600, "measured tasks per side (ours, twin) and concurrency")
	fs.StringVar(&raw.cs, "c", "20,100", "concurrencies: tasks in flight at once, comma list")
	fs.IntVar(&cfg.rounds, "rounds", 4, "alternate twin and ours this many times per concurrency (N split evenly; which goes first alternating too), so that drift hits both")
	fs.IntVar(&cfg.warmup, "warmup", 50, "unmeasured tasks per side before each concurrency")
	fs.StringVar(&cfg.temporalAddress, "temporal-address", "", "an external Temporal frontend (e.g. the PostgreSQL cluster, 127.0.0.1:7333); empty starts a dev server")
	fs.StringVar(&cfg.namespace, "namespace", "default", "namespace on the external server")
	fs.StringVar(&raw.waiting, "waiting", "1000,10000", "waiting-task levels for the worker memory phase, ascending, comma list")
	fs.IntVar(&cfg.startConcurrency, "start-concurrency", 64, "start requests in flight in the memory phase")
	fs.StringVar(&cfg.out, "out", "bench/out", "output directory (results.json, results.md, latency.svg, run logs)")
	fs.StringVar(&raw.phases, "phases", strings.Join(allPhases, ","), "phases to run: "+strings.Join(allPhases, ","))
	fs.Var(raw.dyn, "dynamic-config", "dev server dynamic config KEY=JSON, repeatable (a lever, e.g. system.enableActivityEagerExecution=true)")
	fs.Var(raw.spids, "server-pid", "NAME=PIDFILE of an external server's process, repeatable: its CPU (with its descendants') is counted as NAME (bench/cluster.sh passes temporal and postgres)")
	fs.Var(raw.wenv, "worker-env", "worker environment KEY=VALUE, repeatable (a lever, e.g. WORKER_STICKY_CACHE_SIZE=2000)")
	fs.Var(raw.ienv, "ingress-env", "ingress environment KEY=VALUE, repeatable (e.g. OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318)")
	fs.IntVar(&cfg.parkedN, "parked-n", 200, "tasks per side whose callback comes -parked-delay after the submit, to a workflow waiting on its timer")
	fs.IntVar(&cfg.parkedC, "parked-c", 20, "concurrency of the parked runs")
	fs.DurationVar(&cfg.parkedDelay, "parked-delay", 2*time.Second, "solve time (twin: signal delay) of the parked runs")
	fs.DurationVar(&cfg.nexusSolve, "nexus-solve", 0, "solve time of the nexus phase's tasks, both sides (0: at once)")
	fs.BoolVar(&cfg.codec, "codec", true, "also run each throughput concurrency encrypted against plaintext: every payload through the product's codec (issue 38), on a worker of its own, interleaved with plaintext tasks on the stack's worker, the ingress restarted with or without the key between them; -codec=false runs none")
	fs.IntVar(&cfg.codecRounds, "codec-rounds", 6, "rounds of each comparison of captchaflow with itself (the codec's, pacing's), each one segment of the variant and one of the default configuration (N split evenly)")
	fs.Float64Var(&cfg.pacedRate, "paced-rate", 1000, "CAPTCHAAI_SUBMITS_PER_SECOND and CAPTCHAAI_RESULTS_PER_SECOND of the throughput phase's paced scenarios (a worker of their own), a rate above the offered load, each compared with the twin and, interleaved, with the default configuration; 0 runs none")
	fs.StringVar(&cfg.baseline, "baseline", "", "a commit (e.g. $(cat previous-release)) whose worker, built from a git worktree, the throughput phase also measures against this build's, per concurrency, both in the default configuration, interleaved in -codec-rounds rounds; \"\" runs none")
	fs.IntVar(&cfg.fleetN, "fleet-n", 600, "tasks the fleet phase starts at once on its two workers")
	fs.DurationVar(&cfg.fleetSolve, "fleet-solve", 5*time.Second, "solve time of the fleet phase's tasks")
	fs.IntVar(&cfg.recoveryTasks, "recovery-tasks", 20, "tasks whose pingback is dropped, for the recovery time")
	fs.StringVar(&raw.polls, "polls", "1,10,100", "poll-path tasks: res.php requests each should need, comma list")
	fs.StringVar(&cfg.dbDir, "temporal-db-dir", "", `where the dev server's SQLite file goes: "" = a fresh directory on /dev/shm (tmpfs) when there is one, "disk" = the run directory`)
	fs.StringVar(&cfg.label, "label", "", "what the server is, for the table's and the plot's title (default: dev server, or the external address)")
	fs.BoolVar(&cfg.replot, "replot", false, "only redraw the plot and results.md of the run in -out (from its samples.json and results.json)")
	fs.StringVar(&cfg.copyPlot, "copy-plot", "", "also copy latency.svg here (e.g. ../docs/bench-latency.svg for the README)")
	fs.DurationVar(&cfg.timeout, "timeout", 25*time.Minute, "bound on the whole run")
	fs.DurationVar(&cfg.waitBudget, "waiting-budget", 5*time.Minute, "time budget of the memory phase; a level not reached within it is measured where it got to and extrapolated")
	return raw
}

// apply parses and checks the raw flags into cfg, in the order their errors are reported.
func (raw *rawFlags) apply(cfg *config) error {
	if err := raw.applyLists(cfg); err != nil {
		return err
	}
	var err error
	if cfg.phases, err = parsePhases(raw.phases); err != nil {
		return err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.n < cfg.rounds {
		return errors.New("-n must be ≥ -rounds ≥ 1")
	}
	if (cfg.codec || cfg.pacedRate > 0 || cfg.baseline != "") && (cfg.codecRounds < 1 || cfg.n < cfg.codecRounds) {
		return errors.New("-n must be ≥ -codec-rounds ≥ 1")
	}
	if cfg.fleetN < 1 || cfg.fleetSolve < 0 {
		return errors.New("-fleet-n must be ≥ 1 and -fleet-solve not negative")
	}
	// The worker refuses a rate outside [0, MaxRate]: say so before the stack starts.
	if !(cfg.pacedRate >= 0 && cfg.pacedRate <= providers.MaxRate) {
		return fmt.Errorf("-paced-rate must be from 0 (no paced scenarios) to %d", providers.MaxRate)
	}
	return raw.applyLevers(cfg)
}

// applyLists parses the comma lists -c, -waiting and -polls.
func (raw *rawFlags) applyLists(cfg *config) error {
	var err error
	if cfg.concurrencies, err = intList(raw.cs); err != nil {
		return fmt.Errorf("-c: %w", err)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(cfg.concurrencies)))) < len(cfg.concurrencies) {
		return errors.New("-c: a concurrency listed twice would start the first one's workflow IDs again")
	}
	if cfg.waiting, err = intList(raw.waiting); err != nil {
		return fmt.Errorf("-waiting: %w", err)
	}
	if !slices.IsSorted(cfg.waiting) {
		return errors.New("-waiting: levels must be ascending")
	}
	if cfg.polls, err = intList(raw.polls); err != nil {
		return fmt.Errorf("-polls: %w", err)
	}
	return nil
}

// parsePhases reads -phases into the set of phases to run.
func parsePhases(s string) (map[string]bool, error) {
	phases := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("-phases: unknown phase %q", p)
		}
		phases[p] = true
	}
	return phases, nil
}

// applyLevers sets the key=value flags, adding benchDynamicConfig's defaults for a dev server.
func (raw *rawFlags) applyLevers(cfg *config) error {
	dyn := raw.dyn
	if len(dyn) > 0 && cfg.temporalAddress != "" {
		return errors.New("-dynamic-config applies to the dev server only")
	}
	if cfg.temporalAddress == "" {
		for k, v := range benchDynamicConfig {
			if _, set := dyn[k]; !set {
				dyn[k] = v
			}
		}
	}
	cfg.dynamicConfig, cfg.workerEnv, cfg.ingressEnv, cfg.serverPIDs = dyn, raw.wenv, raw.ienv, raw.spids
	return nil
}

type kvFlag map[string]string

func (k kvFlag) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlag) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	k[key] = v
	return nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
