package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/captchaflow/captchaflow/tests/devstack"
)

// The throughput phase's baseline scenarios (-baseline): per concurrency, the worker another commit builds (the
// release before account pacing, say: issue 36 asks for what a task cost then) on a task queue of its own, against
// this build's stack worker, both in the default configuration and interleaved like pacing's cost, so that the
// machine's drift, which moves a twin ratio measured minutes apart by ±0.07, hits both. The ingress is this build's.

// scenarioBaseline: instant solves on the baseline commit's worker.
const scenarioBaseline = "baseline"

// baselineScenarios are sc (the default scenarios) served by the baseline commit's worker, when -baseline names one.
func (b *bench) baselineScenarios(defaults []scenario) []scenario {
	if b.cfg.baseline == "" {
		return nil
	}
	var scenarios []scenario
	for _, sc := range defaults {
		sc.Name, sc.Queue, sc.Rounds = scenarioBaseline, b.taskQueue+"-"+scenarioBaseline, b.cfg.codecRounds
		scenarios = append(scenarios, sc)
	}
	return scenarios
}

// buildBaseline builds the baseline commit's worker into the run directory before the stack starts, so that the
// build's CPU is in no measurement.
func (b *bench) buildBaseline(ctx context.Context) error {
	if b.cfg.baseline == "" || !b.cfg.phases["throughput"] {
		return nil
	}
	started := time.Now()
	bins, err := devstack.BuildCommit(ctx, b.cfg.baseline, filepath.Join(b.runDir, scenarioBaseline))
	if err != nil {
		return fmt.Errorf("-baseline: %w", err)
	}
	log.Printf("baseline %s: worker built in %s", b.cfg.baseline, time.Since(started).Round(time.Second))
	b.baselineBin, b.res.BaselineCommit = bins.Worker, b.cfg.baseline
	return nil
}

// thisBuildAgainst turns compareSelf's baseline / this build into this build / baseline: the report's and target's
// "captchaflow" column is this build.
func thisBuildAgainst(sr SelfResult) SelfResult {
	sr.Default, sr.Variant = sr.Variant, sr.Default
	sr.ThroughputRatio = ratio(sr.Variant.TasksPerSec, sr.Default.TasksPerSec)
	sr.CallbackP99Ratio = ratio(sr.Variant.CallbackToResult.P99, sr.Default.CallbackToResult.P99)
	rounds := make([]float64, len(sr.RoundRatios))
	for i, r := range sr.RoundRatios {
		rounds[i] = round2(1 / r)
	}
	sr.RoundRatios = rounds
	return sr
}

// baselineTargets: per concurrency, this build's throughput against the baseline's, interleaved (issue 36: a task
// costs what it cost before account pacing).
func baselineTargets(r *Results) []Target {
	var ts []Target
	for _, sr := range r.Baseline {
		ts = append(ts, selfThroughputTarget(fmt.Sprintf("against %s: throughput at C = %d", r.BaselineCommit, sr.Concurrency),
			"the baseline's", sr))
	}
	return ts
}
