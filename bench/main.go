// Command bench drives the real captchaflow stack (worker, ingress, provider simulator with instant solves and
// pingbacks, and Temporal: a dev server it starts, or an external server such as the PostgreSQL-backed cluster)
// and, in the same run with the same N and C, a bare twin workflow of the same shape with no I/O (package twin).
// captchaflow's figures are reported as ratios to the twin's, because absolute times on a shared machine drift.
//
//	go run ./bench                                   # dev server, C = 20 and 100, 1 000 and 10 000 waiting tasks
//	go run ./bench -temporal-address 127.0.0.1:7333  # the PostgreSQL cluster (cluster/up.sh --detach)
//	go run ./bench -phases throughput -c 20 -n 500   # one phase, e.g. to try a lever
//
// It prints a Markdown table and writes results.json, results.md and latency.svg to -out.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/bench/twin"
	"github.com/captchaflow/captchaflow/devstack"
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
	timeout          time.Duration
	waitBudget       time.Duration
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

var allPhases = []string{"throughput", "parked", "poll", "recovery", "waiting"}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("bench: ")
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		log.Print(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.replot {
		if err := replot(cfg.out, cfg.copyPlot); err != nil {
			log.Printf("FAILED: %v", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, cfg); err != nil {
		log.Printf("FAILED: %v", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var cfg config
	var cs, waiting, phases, polls string
	dyn := kvFlag{}
	wenv := kvFlag{}
	spids := kvFlag{}
	fs.IntVar(&cfg.n, "n", 600, "measured tasks per side (ours, twin) and concurrency")
	fs.StringVar(&cs, "c", "20,100", "concurrencies: tasks in flight at once, comma list")
	fs.IntVar(&cfg.rounds, "rounds", 3, "alternate twin and ours this many times per concurrency (N split evenly), so that drift hits both")
	fs.IntVar(&cfg.warmup, "warmup", 50, "unmeasured tasks per side before each concurrency")
	fs.StringVar(&cfg.temporalAddress, "temporal-address", "", "an external Temporal frontend (e.g. the PostgreSQL cluster, 127.0.0.1:7333); empty starts a dev server")
	fs.StringVar(&cfg.namespace, "namespace", "default", "namespace on the external server")
	fs.StringVar(&waiting, "waiting", "1000,10000", "waiting-task levels for the worker memory phase, ascending, comma list")
	fs.IntVar(&cfg.startConcurrency, "start-concurrency", 64, "start requests in flight in the memory phase")
	fs.StringVar(&cfg.out, "out", "bench/out", "output directory (results.json, results.md, latency.svg, run logs)")
	fs.StringVar(&phases, "phases", strings.Join(allPhases, ","), "phases to run: "+strings.Join(allPhases, ","))
	fs.Var(dyn, "dynamic-config", "dev server dynamic config KEY=JSON, repeatable (a lever, e.g. system.enableActivityEagerExecution=true)")
	fs.Var(spids, "server-pid", "NAME=PIDFILE of an external server's process, repeatable: its CPU (with its descendants') is counted as NAME (bench/cluster.sh passes temporal and postgres)")
	fs.Var(wenv, "worker-env", "worker environment KEY=VALUE, repeatable (a lever, e.g. WORKER_STICKY_CACHE_SIZE=2000)")
	fs.IntVar(&cfg.parkedN, "parked-n", 200, "tasks per side whose callback comes -parked-delay after the submit, to a workflow waiting on its timer")
	fs.IntVar(&cfg.parkedC, "parked-c", 20, "concurrency of the parked runs")
	fs.DurationVar(&cfg.parkedDelay, "parked-delay", 2*time.Second, "solve time (twin: signal delay) of the parked runs")
	fs.IntVar(&cfg.recoveryTasks, "recovery-tasks", 20, "tasks whose pingback is dropped, for the recovery time")
	fs.StringVar(&polls, "polls", "1,10,100", "poll-path tasks: res.php requests each should need, comma list")
	fs.StringVar(&cfg.dbDir, "temporal-db-dir", "", `where the dev server's SQLite file goes: "" = a fresh directory on /dev/shm (tmpfs) when there is one, "disk" = the run directory`)
	fs.StringVar(&cfg.label, "label", "", "what the server is, for the table's and the plot's title (default: dev server, or the external address)")
	fs.BoolVar(&cfg.replot, "replot", false, "only redraw the plot and results.md of the run in -out (from its samples.json and results.json)")
	fs.StringVar(&cfg.copyPlot, "copy-plot", "", "also copy latency.svg here (e.g. docs/bench-latency.svg for the README)")
	fs.DurationVar(&cfg.timeout, "timeout", 25*time.Minute, "bound on the whole run")
	fs.DurationVar(&cfg.waitBudget, "waiting-budget", 5*time.Minute, "time budget of the memory phase; a level not reached within it is measured where it got to and extrapolated")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.concurrencies, err = intList(cs); err != nil {
		return cfg, fmt.Errorf("-c: %w", err)
	}
	if cfg.waiting, err = intList(waiting); err != nil {
		return cfg, fmt.Errorf("-waiting: %w", err)
	}
	if !slices.IsSorted(cfg.waiting) {
		return cfg, errors.New("-waiting: levels must be ascending")
	}
	if cfg.polls, err = intList(polls); err != nil {
		return cfg, fmt.Errorf("-polls: %w", err)
	}
	cfg.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return cfg, fmt.Errorf("-phases: unknown phase %q", p)
		}
		cfg.phases[p] = true
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.n < cfg.rounds {
		return cfg, errors.New("-n must be ≥ -rounds ≥ 1")
	}
	if len(dyn) > 0 && cfg.temporalAddress != "" {
		return cfg, errors.New("-dynamic-config applies to the dev server only")
	}
	if cfg.temporalAddress == "" {
		for k, v := range benchDynamicConfig {
			if _, set := dyn[k]; !set {
				dyn[k] = v
			}
		}
	}
	cfg.dynamicConfig, cfg.workerEnv, cfg.serverPIDs = dyn, wenv, spids
	return cfg, nil
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

// bench holds the run's connections and identifiers.
type bench struct {
	cfg       config
	st        stack
	c         client.Client // the driver's connection
	sim       *simClient
	twinActs  *twin.Activities
	runID     string
	taskQueue string
	twinQueue string
	res       *Results
	samples   []latencySamples
	pids      func() map[string]int
	pidTrees  map[string]bool
}

func run(ctx context.Context, cfg config) (err error) {
	began := time.Now()
	runID := began.UTC().Format("0102-150405")
	b := &bench{
		cfg:       cfg,
		runID:     runID,
		taskQueue: "bench-captcha-solve-" + runID,
		twinQueue: "bench-twin-" + runID,
		res: &Results{
			StartedAt:     began.UTC(),
			GitCommit:     gitCommit(),
			GoVersion:     runtime.Version(),
			CPUs:          runtime.NumCPU(),
			LoadAvgStart:  loadAvg(),
			N:             cfg.n,
			Rounds:        cfg.rounds,
			Warmup:        cfg.warmup,
			DynamicConfig: cfg.dynamicConfig,
			WorkerEnv:     cfg.workerEnv,
		},
	}
	for _, p := range allPhases {
		if cfg.phases[p] {
			b.res.Phases = append(b.res.Phases, p)
		}
	}
	runDir, err := filepath.Abs(filepath.Join(cfg.out, "run-"+runID))
	if err != nil {
		return err
	}
	dataDir := runDir
	if cfg.temporalAddress == "" {
		switch cfg.dbDir {
		case "disk":
		case "":
			// On this kind of VM every SQLite commit waits for an fsync of a few ms, and the dev server then
			// measures the disk, not Temporal or captchaflow; tmpfs takes the disk out (make run keeps it).
			if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
				if dataDir, err = os.MkdirTemp("/dev/shm", "captchaflow-bench-"); err != nil {
					return err
				}
				defer os.RemoveAll(dataDir)
			}
		default:
			dataDir = cfg.dbDir
		}
		b.res.TemporalDB = filepath.Join(dataDir, "temporal.db")
	}
	if cfg.temporalAddress == "" {
		log.Printf("run %s: logs in %s, Temporal data in %s", runID, runDir, dataDir)
	} else {
		log.Printf("run %s: logs in %s, Temporal at %s", runID, runDir, cfg.temporalAddress)
	}

	started := time.Now()
	workerEnv := map[string]string{"TASK_QUEUE": b.taskQueue}
	maps.Copy(workerEnv, cfg.workerEnv)
	b.st, err = startStack(ctx, stackConfig{
		RunDir:          runDir,
		DataDir:         dataDir,
		TemporalAddress: cfg.temporalAddress,
		Namespace:       cfg.namespace,
		TaskQueue:       b.taskQueue,
		DynamicConfig:   cfg.dynamicConfig,
		// Instant solves and pingbacks; tasks kept long enough to be read back after the run.
		SimulatorEnv: map[string]string{"SIM_SOLVE_MIN": "0s", "SIM_SOLVE_MAX": "0s", "SIM_RETENTION": "2h", "SIM_LOG_LEVEL": "warn"},
		WorkerEnv:    workerEnv,
		Logf:         func(f string, a ...any) { log.Printf("stack: "+f, a...) },
	})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	b.res.StackStartSecs = round2(time.Since(started).Seconds())
	b.res.Server = b.st.Server()
	b.res.Label = cfg.label
	if b.res.Label == "" {
		b.res.Label = b.res.Server
		if cfg.temporalAddress == "" {
			b.res.Label = "Temporal dev server (SQLite)"
		}
	}
	defer func() {
		log.Print("stopping the stack")
		if stopErr := b.st.Stop(); stopErr != nil {
			log.Printf("stopping the stack: %v", stopErr)
		}
	}()
	b.sim = newSimClient(b.st.SimulatorURL())
	b.pidTrees = map[string]bool{}
	b.pids = func() map[string]int {
		m := b.st.PIDs()
		m["bench"] = os.Getpid()
		// An external server's processes, named on the command line (e.g. by bench/cluster.sh).
		for name, pidFile := range cfg.serverPIDs {
			if pid, err := readPIDFile(pidFile); err == nil {
				m[name] = pid
				b.pidTrees[name] = true
			}
		}
		return m
	}

	dial := func() (client.Client, error) {
		return client.DialContext(ctx, client.Options{
			HostPort:  b.st.TemporalAddress(),
			Namespace: b.st.Namespace(),
			Logger:    devstack.QuietSDKLogger(),
		})
	}
	if b.c, err = dial(); err != nil {
		return err
	}
	defer b.c.Close()
	// The twin gets connections of its own, as captchaflow's worker and ingress have.
	twinWorkerClient, err := dial()
	if err != nil {
		return err
	}
	defer twinWorkerClient.Close()
	signaller, err := dial()
	if err != nil {
		return err
	}
	defer signaller.Close()
	b.twinActs = &twin.Activities{Signaller: signaller}
	// The SDK defaults, as captchaflow's worker runs with unless WORKER_* tuning is set.
	tw, err := twin.NewWorker(twinWorkerClient, b.twinQueue, b.twinActs, worker.Options{})
	if err != nil {
		return err
	}
	if err := tw.Start(); err != nil {
		return fmt.Errorf("starting the twin worker: %w", err)
	}
	defer tw.Stop()

	// A few tasks first: a server that has just started (the cluster) takes seconds over its first workflow tasks,
	// which would otherwise land on the poll-path tasks started next.
	log.Print("warming the stack up with 10 tasks")
	if n, err := failures(drive(ctx, ids(fmt.Sprintf("bench-%s-prewarm-", runID), 0, 10), 10, b.runOurs(solveInput(nil), nil))); n > 0 {
		return fmt.Errorf("the stack does not solve tasks: %d of 10 failed: %w", n, err)
	}

	// The poll-path tasks take up to a hundred seconds; they run alongside the other phases.
	var pollDone chan []PollPathResult
	if cfg.phases["poll"] {
		pollDone = make(chan []PollPathResult, 1)
		go func() { pollDone <- b.pollPath(ctx) }()
	}
	var scenarios []scenario
	if cfg.phases["throughput"] {
		for _, c := range cfg.concurrencies {
			scenarios = append(scenarios, scenario{
				Name: scenarioInstant, N: cfg.n, C: c, Warmup: cfg.warmup, Rounds: cfg.rounds,
				OursInput:   solveInput(nil),
				TwinInput:   twin.Input{CallbackTimeoutSeconds: captchaflow.DefaultCallbackTimeoutSeconds},
				Description: "solved at once: the pingback usually arrives before the workflow has processed in.php's answer",
			})
		}
	}
	if cfg.phases["parked"] {
		delay := int(cfg.parkedDelay.Milliseconds())
		scenarios = append(scenarios, scenario{
			Name: scenarioParked, N: cfg.parkedN, C: cfg.parkedC, Rounds: cfg.rounds,
			OursInput: solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(delay)}),
			TwinInput: twin.Input{CallbackTimeoutSeconds: captchaflow.DefaultCallbackTimeoutSeconds, SignalDelayMS: delay},
			Description: fmt.Sprintf("solved after %s: the pingback reaches a workflow parked on its callback timer (the real-world case)",
				cfg.parkedDelay),
		})
	}
	for _, sc := range scenarios {
		tr, err := b.compare(ctx, sc)
		if err != nil {
			return err
		}
		b.res.Throughput = append(b.res.Throughput, tr)
	}
	if cfg.phases["recovery"] {
		if b.res.Recovery, err = b.recovery(ctx); err != nil {
			return err
		}
	}
	if pollDone != nil {
		log.Print("waiting for the poll-path tasks")
		select {
		case b.res.PollPath = <-pollDone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if cfg.phases["waiting"] {
		if b.res.Waiting, err = b.waitingMemory(ctx); err != nil {
			return err
		}
	}

	b.res.LoadAvgEnd = loadAvg()
	b.res.DurationSeconds = round2(time.Since(began).Seconds())
	b.res.Targets = evaluateTargets(b.res)
	return b.write()
}

func (b *bench) write() error {
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.cfg.out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	md := renderMarkdown(b.res)
	if err := os.WriteFile(filepath.Join(b.cfg.out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if len(b.samples) > 0 {
		raw, err := json.Marshal(b.samples)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(b.cfg.out, "samples.json"), raw, 0o644); err != nil {
			return err
		}
		if err := plotFiles(b.cfg.out, b.samples, b.res.Label, b.cfg.copyPlot); err != nil {
			return err
		}
	}
	fmt.Print("\n" + md)
	log.Printf("wrote %s/results.{json,md} and latency.{svg,png} in %.0fs", b.cfg.out, b.res.DurationSeconds)
	return nil
}

// readPIDFile reads a pid file's first line (PostgreSQL's postmaster.pid has more).
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// plotFiles writes latency.svg and latency.png to dir, and copies the SVG to copyTo if set.
func plotFiles(dir string, samples []latencySamples, label, copyTo string) error {
	svgPath := filepath.Join(dir, "latency.svg")
	for _, path := range []string{svgPath, filepath.Join(dir, "latency.png")} {
		if err := writePlot(path, samples, label); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if copyTo == "" {
		return nil
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		return err
	}
	return os.WriteFile(copyTo, svg, 0o644)
}

// replot redraws the plot and the Markdown of an earlier run from its samples.json and results.json.
func replot(dir, copyTo string) error {
	var samples []latencySamples
	var res Results
	for name, v := range map[string]any{"samples.json": &samples, "results.json": &res} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	res.Targets = evaluateTargets(&res)
	md := renderMarkdown(&res)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return plotFiles(dir, samples, res.Label, copyTo)
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
