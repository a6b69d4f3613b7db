package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// captchaflow against itself at one C (issues 36 and 38): a variant — encrypted by the codec, paced above the load
// on a worker of its own, or another commit's worker — against the default configuration on the stack's worker, the
// two sides alternating inside every round (which goes first alternating too), the ingress restarted with or without
// the key between them, so that the machine's drift between scenarios, which put earlier runs anywhere in
// 0.72–1.15 ×, hits both sides alike. Both workers run throughout: each side has the other's idle pollers beside it.

// SelfResult is a variant's cost at one concurrency.
type SelfResult struct {
	Concurrency int        `json:"concurrency"`
	Rounds      int        `json:"rounds"`
	Default     SideResult `json:"default"`
	Variant     SideResult `json:"variant"`
	// ThroughputRatio is variant / default tasks per second over every round; CallbackP99Ratio the same of the
	// callback → result p99.
	ThroughputRatio  float64 `json:"throughput_ratio"`
	CallbackP99Ratio float64 `json:"callback_p99_ratio"`
	// RoundRatios are each round's variant / default tasks per second: their spread is the measurement's own.
	RoundRatios []float64 `json:"round_ratios"`
}

// selfSide is one side's scenario and what it measured.
type selfSide struct {
	sc     scenario
	prefix string
	runs   []taskRun
	secs   float64
	cpu    *cpuMeter
	rates  []float64 // tasks per second, per round
}

// compareSelf measures v's tasks against the same tasks in the default configuration on the stack's worker.
func (b *bench) compareSelf(ctx context.Context, v scenario) (SelfResult, error) {
	plain := v
	plain.Name, plain.Queue, plain.Pace = scenarioInstant, b.taskQueue, defaultPace(b.cfg.workerEnv)
	prefix := fmt.Sprintf("bench-%s-self-%s-c%d-", b.runID, v.Name, v.C)
	sides := [2]*selfSide{
		{sc: plain, prefix: prefix + "default-", cpu: newCPUMeter(b.pids, b.pidTrees)},
		{sc: v, prefix: prefix + v.Name + "-", cpu: newCPUMeter(b.pidsFor(v), b.pidTrees)},
	}
	for _, s := range sides {
		if err := b.keyIngress(ctx, s.sc.Name == scenarioEncrypted); err != nil {
			return SelfResult{}, err
		}
		drive(ctx, ids(s.prefix+"warm-", 0, v.Warmup), v.C, b.oursFor(s.sc, nil))
	}
	per := v.N / v.Rounds
	for r := range v.Rounds {
		to := (r + 1) * per
		if r == v.Rounds-1 {
			to = v.N
		}
		for i := range sides {
			if err := b.selfSegment(ctx, sides[(i+r)%2], r*per, to); err != nil {
				return SelfResult{}, err
			}
		}
		log.Printf("C = %d %s against default, round %d/%d: default %.1f tasks/s, %s %.1f tasks/s", v.C, v.Name, r+1,
			v.Rounds, sides[0].rates[r], v.Name, sides[1].rates[r])
	}
	return b.selfResult(ctx, v, sides)
}

// selfSegment runs tasks [from, to) of one side, with the ingress keyed for it.
func (b *bench) selfSegment(ctx context.Context, s *selfSide, from, to int) error {
	if err := b.keyIngress(ctx, s.sc.Name == scenarioEncrypted); err != nil {
		return err
	}
	var runs []taskRun
	s.cpu.measure(func() { runs = drive(ctx, ids(s.prefix, from, to), s.sc.C, b.oursFor(s.sc, nil)) })
	secs := span(runs).Seconds()
	s.secs += secs
	s.runs = append(s.runs, runs...)
	s.rates = append(s.rates, float64(len(runs))/secs)
	return ctx.Err()
}

// selfResult summarizes both sides, their callback times from the simulator's pingbacks.
func (b *bench) selfResult(ctx context.Context, v scenario, sides [2]*selfSide) (SelfResult, error) {
	res := SelfResult{Concurrency: v.C, Rounds: v.Rounds}
	out := [2]*SideResult{&res.Default, &res.Variant}
	for i, s := range sides {
		tasks, err := b.sim.tasksByWorkflow(ctx, s.prefix)
		if err != nil {
			return res, fmt.Errorf("reading the simulator's tasks: %w", err)
		}
		*out[i], _, _ = summarizeSide(s.runs, s.secs, func(r taskRun) (time.Time, bool) {
			ts := tasks[r.ID]
			if len(ts) == 0 {
				return time.Time{}, false
			}
			at, outcome, ok := firstPingback(ts[len(ts)-1])
			return at, ok && outcome == sim.OutcomeSucceeded
		})
		out[i].CPUms = s.cpu.perTask(len(s.runs))
	}
	for r := range sides[0].rates {
		res.RoundRatios = append(res.RoundRatios, round2(sides[1].rates[r]/sides[0].rates[r]))
	}
	res.ThroughputRatio = ratio(res.Variant.TasksPerSec, res.Default.TasksPerSec)
	res.CallbackP99Ratio = ratio(res.Variant.CallbackToResult.P99, res.Default.CallbackToResult.P99)
	log.Printf("C = %d %s: %.2f × the default configuration's tasks/s (rounds %v), callback→result p99 %.2f ×", v.C,
		v.Name, res.ThroughputRatio, res.RoundRatios, res.CallbackP99Ratio)
	return res, nil
}

// keyIngress restarts the ingress with the keys file (its callbacks' signals encrypted) or without it, unless it
// already runs so.
func (b *bench) keyIngress(ctx context.Context, keyed bool) error {
	if b.ingressKeyed == keyed {
		return nil
	}
	var env map[string]string
	if keyed {
		env = map[string]string{codec.KeysFileEnv: b.keysFile}
	}
	if err := b.st.RestartIngress(ctx, env); err != nil {
		return fmt.Errorf("restarting the ingress (keyed: %v): %w", keyed, err)
	}
	b.ingressKeyed = keyed
	return nil
}

// roundSpread is the round ratios' range, for the report.
func roundSpread(rs []float64) string {
	if len(rs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(rs), slices.Max(rs))
}
