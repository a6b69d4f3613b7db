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

// The codec's cost (issue 38): captchaflow encrypted against captchaflow in plaintext at one C, the two sides
// alternating inside every round (which goes first alternating too), the ingress restarted with or without the key
// between them, so that the machine's drift between scenarios, which put earlier runs anywhere in 0.72–1.15 ×,
// hits both sides alike. Both workers run throughout: each side has the other's idle pollers beside it.

// CodecResult is the codec's cost at one concurrency.
type CodecResult struct {
	Concurrency int        `json:"concurrency"`
	Rounds      int        `json:"rounds"`
	Plain       SideResult `json:"plain"`
	Encrypted   SideResult `json:"encrypted"`
	// ThroughputRatio is encrypted / plain tasks per second over every round; CallbackP99Ratio the same of the
	// callback → result p99.
	ThroughputRatio  float64 `json:"throughput_ratio"`
	CallbackP99Ratio float64 `json:"callback_p99_ratio"`
	// RoundRatios are each round's encrypted / plain tasks per second: their spread is the measurement's own.
	RoundRatios []float64 `json:"round_ratios"`
}

// codecSide is one side's scenario and what it measured.
type codecSide struct {
	sc     scenario
	prefix string
	runs   []taskRun
	secs   float64
	cpu    *cpuMeter
	rates  []float64 // tasks per second, per round
}

// compareCodec measures enc's tasks against the same tasks in plaintext on the stack's worker.
func (b *bench) compareCodec(ctx context.Context, enc scenario) (CodecResult, error) {
	plain := enc
	plain.Name, plain.Queue = scenarioInstant, b.taskQueue
	prefix := fmt.Sprintf("bench-%s-codec-c%d-", b.runID, enc.C)
	sides := [2]*codecSide{
		{sc: plain, prefix: prefix + "plain-", cpu: newCPUMeter(b.pids, b.pidTrees)},
		{sc: enc, prefix: prefix + "encrypted-", cpu: newCPUMeter(b.pidsFor(enc), b.pidTrees)},
	}
	for _, s := range sides {
		if err := b.keyIngress(ctx, s.sc.Name == scenarioEncrypted); err != nil {
			return CodecResult{}, err
		}
		drive(ctx, ids(s.prefix+"warm-", 0, enc.Warmup), enc.C, b.oursFor(s.sc, nil))
	}
	per := enc.N / enc.Rounds
	for r := range enc.Rounds {
		to := (r + 1) * per
		if r == enc.Rounds-1 {
			to = enc.N
		}
		for i := range sides {
			if err := b.codecSegment(ctx, sides[(i+r)%2], r*per, to); err != nil {
				return CodecResult{}, err
			}
		}
		log.Printf("C = %d codec round %d/%d: plain %.1f tasks/s, encrypted %.1f tasks/s", enc.C, r+1, enc.Rounds,
			sides[0].rates[r], sides[1].rates[r])
	}
	return b.codecResult(ctx, enc, sides)
}

// codecSegment runs tasks [from, to) of one side, with the ingress keyed for it.
func (b *bench) codecSegment(ctx context.Context, s *codecSide, from, to int) error {
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

// codecResult summarizes both sides, their callback times from the simulator's pingbacks.
func (b *bench) codecResult(ctx context.Context, enc scenario, sides [2]*codecSide) (CodecResult, error) {
	res := CodecResult{Concurrency: enc.C, Rounds: enc.Rounds}
	out := [2]*SideResult{&res.Plain, &res.Encrypted}
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
	res.ThroughputRatio = ratio(res.Encrypted.TasksPerSec, res.Plain.TasksPerSec)
	res.CallbackP99Ratio = ratio(res.Encrypted.CallbackToResult.P99, res.Plain.CallbackToResult.P99)
	log.Printf("C = %d codec: encrypted %.2f × plain tasks/s (rounds %v), callback→result p99 %.2f ×", enc.C,
		res.ThroughputRatio, res.RoundRatios, res.CallbackP99Ratio)
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
