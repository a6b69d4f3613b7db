package main

import (
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow/tests/bench/twin"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// teardown holds the cleanups of the run's setup, run in reverse order as the defers they replace would be.
type teardown []func()

func (td *teardown) add(f func()) { *td = append(*td, f) }

// run has a pointer receiver so that `defer td.run()` sees the cleanups added after the defer statement.
func (td *teardown) run() {
	for i := len(*td) - 1; i >= 0; i-- {
		(*td)[i]()
	}
}

// setUp starts the stack, connects the driver, starts the twin's worker and warms the stack up; td gets the
// cleanups.
func (b *bench) setUp(ctx context.Context, td *teardown) error {
	runDir, err := filepath.Abs(filepath.Join(b.cfg.out, "run-"+b.runID))
	if err != nil {
		return err
	}
	b.runDir = runDir
	dataDir, err := b.dataDir(runDir, td)
	if err != nil {
		return err
	}
	if b.cfg.temporalAddress == "" {
		log.Printf("run %s: logs in %s, Temporal data in %s", b.runID, runDir, dataDir)
	} else {
		log.Printf("run %s: logs in %s, Temporal at %s", b.runID, runDir, b.cfg.temporalAddress)
	}
	if err := b.buildBaseline(ctx); err != nil {
		return err
	}
	if err := b.launchStack(ctx, runDir, dataDir, td); err != nil {
		return err
	}
	if err := b.connect(ctx, td); err != nil {
		return err
	}
	return b.prewarm(ctx)
}

// dataDir picks the dev server's data directory (see -temporal-db-dir); an external server's is runDir, unused.
func (b *bench) dataDir(runDir string, td *teardown) (string, error) {
	dataDir := runDir
	if b.cfg.temporalAddress != "" {
		return dataDir, nil
	}
	switch b.cfg.dbDir {
	case "disk":
	case "":
		// On this kind of VM every SQLite commit waits for an fsync of a few ms, and the dev server then
		// measures the disk, not Temporal or captchaflow; tmpfs takes the disk out (make run keeps it).
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			if dataDir, err = os.MkdirTemp("/dev/shm", "captchaflow-bench-"); err != nil {
				return "", err
			}
			td.add(func() { os.RemoveAll(dataDir) })
		}
	default:
		dataDir = b.cfg.dbDir
	}
	b.res.TemporalDB = filepath.Join(dataDir, "temporal.db")
	return dataDir, nil
}

// launchStack starts captchaflow's processes (and the dev server) and records what the run is measuring.
func (b *bench) launchStack(ctx context.Context, runDir, dataDir string, td *teardown) error {
	started := time.Now()
	var err error
	b.st, err = startStack(ctx, stackConfig{
		RunDir:          runDir,
		DataDir:         dataDir,
		TemporalAddress: b.cfg.temporalAddress,
		Namespace:       b.cfg.namespace,
		TaskQueue:       b.taskQueue,
		DynamicConfig:   b.cfg.dynamicConfig,
		// Instant solves and pingbacks; tasks kept long enough to be read back after the run.
		SimulatorEnv: map[string]string{"SIM_SOLVE_MIN": "0s", "SIM_SOLVE_MAX": "0s", "SIM_RETENTION": "2h", "SIM_LOG_LEVEL": "warn"},
		WorkerEnv:    stackWorkerEnv(b.taskQueue, b.cfg.workerEnv),
		IngressEnv:   b.cfg.ingressEnv,
		Logf:         func(f string, a ...any) { log.Printf("stack: "+f, a...) },
	})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	b.res.StackStartSecs = round2(time.Since(started).Seconds())
	b.res.Server = b.st.Server()
	b.res.Label = runLabel(b.cfg, b.res.Server)
	td.add(func() {
		log.Print("stopping the stack")
		if stopErr := b.st.Stop(); stopErr != nil {
			log.Printf("stopping the stack: %v", stopErr)
		}
	})
	b.sim = newSimClient(b.st.SimulatorURL())
	b.pidTrees = map[string]bool{}
	b.pids = b.processPIDs
	return nil
}

// stackWorkerEnv is the stack's worker's environment: the default configuration (no pace; the paced worker gets
// its rate as its own overrides) with -worker-env's levers.
func stackWorkerEnv(queue string, levers map[string]string) map[string]string {
	// No balance schedule (PROVIDER_BALANCE_INTERVAL=0): its CheckBalance runs would add workflow starts and
	// activity attempts to the measured actions; -worker-env can turn it back on.
	env := map[string]string{"TASK_QUEUE": queue, "PROVIDER_BALANCE_INTERVAL": "0"}
	maps.Copy(env, levers)
	return env
}

// runLabel is the title of the table and the plot: -label, else what the server is.
func runLabel(cfg config, server string) string {
	if cfg.label != "" {
		return cfg.label
	}
	if cfg.temporalAddress == "" {
		return "Temporal dev server (SQLite)"
	}
	return server
}

func (b *bench) dial(ctx context.Context) (client.Client, error) {
	return client.DialContext(ctx, client.Options{
		HostPort:  b.st.TemporalAddress(),
		Namespace: b.st.Namespace(),
		Logger:    devstack.QuietSDKLogger(),
	})
}

// connect dials the driver's connection and starts the twin's worker.
func (b *bench) connect(ctx context.Context, td *teardown) error {
	var err error
	if b.c, err = b.dial(ctx); err != nil {
		return err
	}
	td.add(b.c.Close)
	// The twin gets connections of its own, as captchaflow's worker and ingress have.
	twinWorkerClient, err := b.dial(ctx)
	if err != nil {
		return err
	}
	td.add(twinWorkerClient.Close)
	signaller, err := b.dial(ctx)
	if err != nil {
		return err
	}
	td.add(signaller.Close)
	b.twinActs = &twin.Activities{Signaller: signaller}
	// The SDK defaults, as captchaflow's worker runs with unless WORKER_* tuning is set.
	tw, err := twin.NewWorker(twinWorkerClient, b.twinQueue, b.twinActs, worker.Options{})
	if err != nil {
		return err
	}
	if err := tw.Start(); err != nil {
		return fmt.Errorf("starting the twin worker: %w", err)
	}
	td.add(tw.Stop)
	return nil
}

// prewarm runs a few tasks first: a server that has just started (the cluster) takes seconds over its first
// workflow tasks, which would otherwise land on the poll-path tasks started next.
// With the search-attribute cache refreshed in the background (benchDynamicConfig), attributes registered at start
// reach the frontend within its 60 s refresh: until then a start is refused, and is tried again.
func (b *bench) prewarm(ctx context.Context) error {
	log.Print("warming the stack up with 10 tasks")
	for until := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		n, err := failures(drive(ctx, ids(fmt.Sprintf("bench-%s-prewarm-", b.runID), 0, 10), 10, b.runOurs(solveInput(nil), nil)))
		switch {
		case n == 0:
			return nil
		case err != nil && strings.Contains(err.Error(), "no mapping defined for search attribute") && time.Now().Before(until):
			continue
		}
		return fmt.Errorf("the stack does not solve tasks: %d of 10 failed: %w", n, err)
	}
}
