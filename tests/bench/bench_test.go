package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSummarizeNearestRank(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100..1, unsorted
	}
	d := summarize(xs)
	if d.Count != 100 || d.Min != 1 || d.P50 != 50 || d.P95 != 95 || d.P99 != 99 || d.Max != 100 || d.Mean != 50.5 {
		t.Fatalf("summarize = %+v", d)
	}
	if got := summarize(nil); got.Count != 0 {
		t.Fatalf("empty sample: %+v", got)
	}
}

func TestCeilDivIsTheResPHPBound(t *testing.T) {
	// 1 + ⌈(solve − timeout) / interval⌉ for the poll-path tasks: k polls need exactly k requests.
	for _, k := range []int{1, 10, 100} {
		solve := (pollCallbackTimeout + (k-1)*pollInterval) * 1000
		if got := 1 + ceilDiv(solve-pollCallbackTimeout*1000, pollInterval*1000); got != k {
			t.Errorf("k=%d: bound %d", k, got)
		}
	}
	if ceilDiv(-5, 1000) != 0 || ceilDiv(1, 1000) != 1 {
		t.Error("ceilDiv")
	}
}

func TestExtrapolate(t *testing.T) {
	base := MemorySample{RSSMiB: 30, HeapInuseMiB: 6}
	prev := []WaitingSize{{Tasks: 1000, Reached: 1000, Memory: MemorySample{RSSMiB: 80, HeapInuseMiB: 36}}}
	ws := WaitingSize{Tasks: 10000, Reached: 5000, Memory: MemorySample{RSSMiB: 280, HeapInuseMiB: 156}}
	e := extrapolate(base, prev, ws)
	if e == nil || e.RSSMiB != 530 || e.HeapInuseMiB != 306 {
		t.Fatalf("extrapolate = %+v", e)
	}
}

func TestReportAndPlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sample := func(n int, scale float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = scale * (1 + rng.ExpFloat64())
		}
		return xs
	}
	r := &Results{
		StartedAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Server: "test server", N: 100, Rounds: 2,
		Throughput: []ThroughputResult{{
			Scenario: scenarioInstant, Concurrency: 20, ThroughputRatio: 0.9, CallbackP99Ratio: 1.2,
			Ours: SideResult{Tasks: 100, TasksPerSec: 18, InPHPPerTask: 1, HistoryEvents: HistoryStats{Sampled: 5, Min: 13, Max: 13, Mean: 13}},
			Twin: SideResult{Tasks: 100, TasksPerSec: 20},
		}},
		PollPath: []PollPathResult{{Polls: 1, Via: "poll", HistoryEvents: 24, InPHP: 1, ResPHP: 1, ResPHPBound: 1}},
		Recovery: &RecoveryResult{Tasks: 3, CallbackTimeoutSeconds: 1, PollIntervalSeconds: 1, DropToResult: Dist{Count: 3, Max: 1500}},
		Waiting:  &WaitingResult{Sizes: []WaitingSize{{Tasks: 10000, Reached: 10000, Memory: MemorySample{RSSMiB: 250}}}},
	}
	r.Targets = evaluateTargets(r)
	for _, tg := range r.Targets {
		if !tg.Met || !tg.Measured {
			t.Errorf("target %q: %+v", tg.Name, tg)
		}
	}
	md := renderMarkdown(r)
	for _, want := range []string{"| **C = 20** throughput, tasks/s | **18.0** | 20.0 | **0.90** |", "✅"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	dir := os.Getenv("BENCH_PLOT_OUT")
	if dir == "" {
		dir = t.TempDir()
	}
	samples := []latencySamples{
		{Label: "C = 20", OursStart: sample(500, 300), TwinStart: sample(500, 250), OursCallback: sample(500, 120), TwinCallback: sample(500, 100)},
		{Label: "C = 20 parked", OursStart: sample(200, 2000), TwinStart: sample(200, 2000), OursCallback: sample(200, 60), TwinCallback: sample(200, 50)},
	}
	for _, name := range []string{"latency.svg", "latency.png"} {
		path := filepath.Join(dir, name)
		if err := writePlot(path, samples, "test server"); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v %v", name, st, err)
		}
	}
}
