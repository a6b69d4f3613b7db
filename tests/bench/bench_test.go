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
		Throughput: []ThroughputResult{
			throughputRow(scenarioInstant, 0, 19.2, 1.05, 13), throughputRow(scenarioPaced, 1000, 18.4, 1.08, 14),
		},
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
	for _, want := range []string{"| **C = 20** throughput, tasks/s, default configuration (not paced) | **19.2** | 20.0 | **0.96** |", "✅"} {
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

// throughputRow is a comparison at C = 20 against a twin at 20 tasks/s with every task in.php'd once.
func throughputRow(scenario string, pace, tasksPerSec, callbackP99Ratio, meanEvents float64) ThroughputResult {
	return ThroughputResult{
		Scenario: scenario, Concurrency: 20, Pace: pace, ThroughputRatio: round2(tasksPerSec / 20), CallbackP99Ratio: callbackP99Ratio,
		Ours: SideResult{Tasks: 100, TasksPerSec: tasksPerSec, InPHPPerTask: 1,
			HistoryEvents: HistoryStats{Sampled: 5, Min: 13, Max: 15, Mean: meanEvents}},
		Twin: SideResult{Tasks: 100, TasksPerSec: 20},
	}
}

// TestPacedRowsAreLabelledAndTargeted: issue 36's side-by-side rows, each saying which rate it ran at, and its
// targets: 0.95 × the twin for the default configuration, 0.9 × paced, callback p99 ≤ 1.1 ×, ≤ 14 events.
func TestPacedRowsAreLabelledAndTargeted(t *testing.T) {
	r := &Results{Throughput: []ThroughputResult{
		throughputRow(scenarioInstant, 0, 18.4, 1.05, 13), throughputRow(scenarioPaced, 1000, 18.4, 1.12, 14.5),
		throughputRow(scenarioPaced, 10, 10, 1, 13),
	}}
	r.Targets = evaluateTargets(r)
	md := renderMarkdown(r)
	for _, want := range []string{
		"| **C = 20** throughput, tasks/s, default configuration (not paced) | **18.4** | 20.0 | **0.92** |",
		"| **C = 20 paced at 1000/s** throughput, tasks/s | **18.4** | 20.0 | **0.92** |",
		"| C = 20 paced at 1000/s callback → result p50 / p95 / p99, ms",
		"| throughput at C = 20, default configuration (not paced) | ≥ 0.95 × twin | 0.92 × (18.4 vs 20.0 tasks/s) | ❌ |",
		"| throughput at C = 20 paced at 1000/s | ≥ 0.90 × twin | 0.92 × (18.4 vs 20.0 tasks/s) | ✅ |",
		"| callback→result p99, C = 20 | ≤ 1.1 × twin signal→result p99 | 1.05 × ",
		"| callback→result p99, C = 20 paced at 1000/s | ≤ 1.1 × twin signal→result p99 | 1.12 × ",
		"| history events, callback path, C = 20 | ≤ 14 (mean of the sampled) | mean 13.0 (min–max 13–15, 5 sampled) | ✅ |",
		"| history events, callback path, C = 20 paced at 1000/s | ≤ 14 (mean of the sampled) | mean 14.5 (min–max 13–15, 5 sampled) | ❌ |",
		"paced at or below the offered load (the twin's 20.0 tasks/s): not evaluated | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "default configuration (not paced)"); n != 2 { // its throughput row and its target
		t.Errorf("\"default configuration (not paced)\" %d times, want 2 (the paced rows are not the default):\n%s", n, md)
	}
}

// The requests row names only the operations where the sides differ: a heartbeat per task shows as one.
func TestRequestsCell(t *testing.T) {
	ours := map[string]float64{"RecordActivityTaskHeartbeat": 1, "RespondWorkflowTaskCompleted": 2.02}
	twin := map[string]float64{"RespondWorkflowTaskCompleted": 2}
	if got, want := requestsCell(ours, twin), "3.0 (RecordActivityTaskHeartbeat 1.00)"; got != want {
		t.Errorf("ours: got %q, want %q", got, want)
	}
	if got, want := requestsCell(twin, ours), "2.0 (RecordActivityTaskHeartbeat 0.00)"; got != want {
		t.Errorf("twin: got %q, want %q", got, want)
	}
	if got := requestsCell(nil, twin); got != "—" {
		t.Errorf("unread: got %q", got)
	}
}
