package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
)

// The throughput phase's paced scenarios (issue 36): the same tasks as the default ones, on a worker of their own
// whose account is paced at -paced-rate, above the offered load. Its Submit and polls run on the account's paced
// task queues (<queue>@captchaai/submit, /results), whose rate the server enforces: what pacing costs a task when
// it does not hold one back.

// pacedEnv are the worker settings that pace the account; the stack's worker never gets them from the bench.
var pacedEnv = []string{"CAPTCHAAI_SUBMITS_PER_SECOND", "CAPTCHAAI_RESULTS_PER_SECOND"}

// pacedQueue is the paced worker's task queue: of its own, so that the stack's worker takes none of its tasks.
func (b *bench) pacedQueue() string { return b.taskQueue + "-paced" }

// defaultPace is the rate the stack's worker paces at: none (the default configuration on loopback) unless
// -worker-env sets one, which its scenarios then report.
func defaultPace(workerEnv map[string]string) float64 {
	pace := 0.0
	for _, k := range pacedEnv {
		if v, err := strconv.ParseFloat(workerEnv[k], 64); err == nil {
			pace = max(pace, v) // either rate moves that kind of request to a paced queue
		}
	}
	return pace
}

func rateText(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }

// servePaced starts the paced worker for a paced scenario and stops it for any other. The paced scenarios run
// after the default ones, so it is started once and never runs during a default scenario: even idle, its pollers'
// long polls would cost the server CPU the default scenario's measurement would count.
func (b *bench) servePaced(ctx context.Context, paced bool) error {
	if !paced {
		b.stopPaced()
		return nil
	}
	if b.paced != nil {
		return nil
	}
	env := map[string]string{"TASK_QUEUE": b.pacedQueue()}
	for _, k := range pacedEnv {
		env[k] = rateText(b.cfg.pacedRate)
	}
	log.Printf("starting the paced worker on %s: %v", b.pacedQueue(), env)
	w, err := b.st.StartExtraWorker(ctx, "worker-paced", env)
	if err != nil {
		return fmt.Errorf("starting the paced worker: %w", err)
	}
	b.paced = w
	// The first Submit on fresh paced queues waited ~20 s in a smoke run (cause not investigated): one task served
	// first, as the stack's prewarm does for its queue, keeps that out of any measurement whatever -warmup is.
	if err := b.runOursOn(b.pacedQueue(), solveInput(nil), nil)(ctx, "bench-"+b.runID+"-paced-first"); err != nil {
		return fmt.Errorf("the paced worker's first task: %w", err)
	}
	return nil
}

// stopPaced stops the paced worker if it runs.
func (b *bench) stopPaced() {
	if b.paced == nil {
		return
	}
	if err := b.paced.Stop(); err != nil {
		log.Printf("stopping the paced worker: %v", err)
	}
	b.paced = nil
}

// pidsFor counts as "worker" the worker that serves sc's tasks: the paced one in a paced scenario (the stack's,
// idle meanwhile, is then not counted, as a paced deployment would not run it).
func (b *bench) pidsFor(sc scenario) func() map[string]int {
	w := b.paced
	if sc.Name != scenarioPaced || w == nil {
		return b.pids
	}
	return func() map[string]int {
		m := b.pids()
		m["worker"] = w.PID()
		return m
	}
}

// runScenarios runs the throughput and parked phases' comparisons; the paced worker runs for the paced ones
// alone and is stopped after the last (before the parked scenario, which the stack's worker serves).
func (b *bench) runScenarios(ctx context.Context) error {
	defer b.stopPaced()
	for _, sc := range b.scenarios() {
		if err := b.servePaced(ctx, sc.Name == scenarioPaced); err != nil {
			return err
		}
		tr, err := b.compare(ctx, sc)
		if err != nil {
			return err
		}
		b.res.Throughput = append(b.res.Throughput, tr)
	}
	return nil
}
