package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	workerconfig "github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/tests/bench/twin"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

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
	own       *devstack.Process // the worker of its own of the paced or encrypted scenarios, while they run
	ownFor    string            // the scenario own serves
	enc       client.Client     // the codec's driver connection, while the encrypted scenarios run
	runDir    string
	keysFile  string // the encrypted scenarios' keys file, once written
	// baselineBin is the -baseline commit's worker, built before the stack starts.
	baselineBin string
	// ingressKeyed: the ingress runs with keysFile (its callbacks' signals encrypted).
	ingressKeyed bool
}

// run sets the stack up, runs the phases -phases selects and writes the results.
func run(ctx context.Context, cfg config) error {
	began := time.Now()
	b := newBench(cfg, began)
	var td teardown
	defer td.run()
	if err := b.setUp(ctx, &td); err != nil {
		return err
	}
	if err := b.runPhases(ctx); err != nil {
		return err
	}
	b.res.LoadAvgEnd = loadAvg()
	b.res.DurationSeconds = round2(time.Since(began).Seconds())
	b.res.Targets = evaluateTargets(b.res)
	return b.write()
}

// newBench names the run after its start time and fills in the results' header.
func newBench(cfg config, began time.Time) *bench {
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
			// The stack's processes inherit it (devstack drops only TEMPORAL_*).
			GRPCCompression: cmp.Or(os.Getenv(workerconfig.CompressionEnv), "none"),
		},
	}
	for _, p := range allPhases {
		if cfg.phases[p] {
			b.res.Phases = append(b.res.Phases, p)
		}
	}
	return b
}

// runPhases runs the phases -phases selects into b.res.
func (b *bench) runPhases(ctx context.Context) error {
	// The poll-path tasks take up to a hundred seconds; they run alongside the other phases.
	var pollDone chan []PollPathResult
	if b.cfg.phases["poll"] {
		pollDone = make(chan []PollPathResult, 1)
		go func() { pollDone <- b.pollPath(ctx) }()
	}
	if err := b.runScenarios(ctx); err != nil {
		return err
	}
	var err error
	if b.cfg.phases["recovery"] {
		if b.res.Recovery, err = b.recovery(ctx); err != nil {
			return err
		}
	}
	if b.cfg.phases["nexus"] {
		if b.res.Nexus, err = b.nexus(ctx); err != nil {
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
	// The threads, billing and admission phases need the provider and the server to themselves: after the
	// poll-path tasks, before the waiting phase's parked tasks (which hold provider threads for hours).
	if err := b.providerPhases(ctx); err != nil {
		return err
	}
	if b.cfg.phases["waiting"] {
		if b.res.Waiting, err = b.waitingMemory(ctx); err != nil {
			return err
		}
	}
	return nil
}

// providerPhases runs the threads, billing, admission and fleet phases -phases selects.
func (b *bench) providerPhases(ctx context.Context) error {
	var err error
	if b.cfg.phases["threads"] {
		if b.res.Threads, err = b.threads(ctx); err != nil {
			return err
		}
	}
	if b.cfg.phases["billing"] {
		if b.res.Billing, err = b.billing(ctx); err != nil {
			return err
		}
	}
	if b.cfg.phases["admission"] {
		if b.res.Admission, err = b.admission(ctx); err != nil {
			return err
		}
	}
	if b.cfg.phases["fleet"] {
		b.res.Fleet, err = b.fleet(ctx)
	}
	return err
}

// scenarios are the comparisons of the throughput and parked phases, in the order they run.
func (b *bench) scenarios() []scenario {
	cfg := b.cfg
	var scenarios []scenario
	if cfg.phases["throughput"] {
		scenarios = b.throughputScenarios()
	}
	if cfg.phases["parked"] {
		delay := int(cfg.parkedDelay.Milliseconds())
		scenarios = append(scenarios, scenario{
			Name: scenarioParked, N: cfg.parkedN, C: cfg.parkedC, Rounds: cfg.rounds, Queue: b.taskQueue,
			Pace:      defaultPace(cfg.workerEnv),
			OursInput: solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(delay)}),
			TwinInput: twin.Input{CallbackTimeoutSeconds: captchaflow.DefaultCallbackTimeoutSeconds, SignalDelayMS: delay},
			Description: fmt.Sprintf("solved after %s: the pingback reaches a workflow parked on its callback timer (the real-world case)",
				cfg.parkedDelay),
		})
	}
	return scenarios
}

// throughputScenarios are the throughput phase's: each concurrency on the stack's worker (the default
// configuration), then, with -paced-rate, each on the paced worker, then, with -codec, each encrypted; the same
// tasks, the same twin.
func (b *bench) throughputScenarios() []scenario {
	cfg := b.cfg
	var scenarios []scenario
	for _, c := range cfg.concurrencies {
		scenarios = append(scenarios, scenario{
			Name: scenarioInstant, N: cfg.n, C: c, Warmup: cfg.warmup, Rounds: cfg.rounds, Queue: b.taskQueue,
			Pace:        defaultPace(cfg.workerEnv),
			OursInput:   solveInput(nil),
			TwinInput:   twin.Input{CallbackTimeoutSeconds: captchaflow.DefaultCallbackTimeoutSeconds},
			Description: "solved at once: the pingback usually arrives before the workflow has processed in.php's answer",
		})
	}
	defaults := scenarios[:len(cfg.concurrencies)]
	for _, sc := range defaults {
		if cfg.pacedRate <= 0 {
			break
		}
		sc.Name, sc.Queue, sc.Pace = scenarioPaced, b.pacedQueue(), cfg.pacedRate
		sc.Description = fmt.Sprintf("solved at once, on a worker whose account is paced at %s submits and %s polls a second "+
			"(above the offered load): Submit and polls run on its paced task queues", rateText(sc.Pace), rateText(sc.Pace))
		scenarios = append(scenarios, sc)
	}
	scenarios = append(scenarios, b.baselineScenarios(defaults)...)
	return append(scenarios, b.encryptedScenarios(defaults)...)
}
