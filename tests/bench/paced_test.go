package main

import (
	"testing"
)

// TestPacedScenariosFollowTheDefaultOnes: each concurrency once on the stack's worker, not paced, then once on the
// paced worker's queue at -paced-rate (none with -paced-rate 0), then once encrypted on its own (none with -codec=false).
func TestPacedScenariosFollowTheDefaultOnes(t *testing.T) {
	cfg, err := parseFlags([]string{"-phases", "throughput,parked", "-c", "20,100"})
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: cfg, taskQueue: "q"}
	type row struct {
		name, queue, label string
		pace               float64
	}
	want := []row{
		{scenarioInstant, "q", "C = 20", 0}, {scenarioInstant, "q", "C = 100", 0},
		{scenarioPaced, "q-paced", "C = 20 paced at 1000/s", 1000}, {scenarioPaced, "q-paced", "C = 100 paced at 1000/s", 1000},
		{scenarioEncrypted, "q-encrypted", "C = 20 encrypted", 0}, {scenarioEncrypted, "q-encrypted", "C = 100 encrypted", 0},
		{scenarioParked, "q", "C = 20 parked", 0},
	}
	got := b.scenarios()
	if len(got) != len(want) {
		t.Fatalf("%d scenarios, want %d: %+v", len(got), len(want), got)
	}
	for i, sc := range got {
		if r := (row{sc.Name, sc.Queue, sc.label(), sc.Pace}); r != want[i] {
			t.Errorf("scenario %d = %+v, want %+v", i, r, want[i])
		}
		if sc.N != got[0].N && sc.Name != scenarioParked {
			t.Errorf("scenario %d runs %d tasks, the default %d", i, sc.N, got[0].N)
		}
	}
	b.cfg.baseline = "a27490f"
	if sc := b.scenarios()[4]; sc.Name != scenarioBaseline || sc.Queue != "q-baseline" || sc.Pace != 0 || sc.Rounds != cfg.codecRounds {
		t.Errorf("-baseline: scenario 4 = %+v, want C = 20 on the baseline's own queue, not paced, in -codec-rounds", sc)
	}
	if n := len(b.scenarios()); n != 9 {
		t.Errorf("-baseline: %d scenarios, want 9 (one more per concurrency, after the paced ones)", n)
	}
	b.cfg.baseline, b.cfg.pacedRate = "", 0
	if n := len(b.scenarios()); n != 5 {
		t.Errorf("-paced-rate 0: %d scenarios, want the 5 unpaced", n)
	}
	b.cfg.codec = false
	if n := len(b.scenarios()); n != 3 {
		t.Errorf("-paced-rate 0 -codec=false: %d scenarios, want the 3 unpaced and plaintext", n)
	}
}

// TestStackWorkerIsNotPaced: the bench gives the rate to the paced worker alone; -worker-env's, if any, is reported.
func TestStackWorkerIsNotPaced(t *testing.T) {
	env := stackWorkerEnv("q", map[string]string{"WORKER_STICKY_CACHE_SIZE": "2000"})
	for _, k := range pacedEnv {
		if v, ok := env[k]; ok {
			t.Errorf("the stack's worker gets %s=%s", k, v)
		}
	}
	if p := defaultPace(env); p != 0 {
		t.Errorf("defaultPace = %v, want 0", p)
	}
	if p := defaultPace(map[string]string{"CAPTCHAAI_SUBMITS_PER_SECOND": "13"}); p != 13 {
		t.Errorf("defaultPace with -worker-env CAPTCHAAI_SUBMITS_PER_SECOND=13 = %v", p)
	}
}

func TestPacedRateFlag(t *testing.T) {
	for _, bad := range []string{"-1", "10001"} {
		if _, err := parseFlags([]string{"-paced-rate", bad}); err == nil {
			t.Errorf("-paced-rate %s accepted", bad)
		}
	}
}

// TestConcurrencyListedTwiceIsRefused: a concurrency's tasks are named by it, so a second run of it would only start
// duplicates of the first's (which answer at once: a ratio of 14 was measured so).
func TestConcurrencyListedTwiceIsRefused(t *testing.T) {
	if _, err := parseFlags([]string{"-c", "20,100,20"}); err == nil {
		t.Error("-c 20,100,20 accepted")
	}
	if _, err := parseFlags([]string{"-c", "100,20"}); err != nil {
		t.Errorf("-c 100,20: %v", err)
	}
}

// TestSelfTargetsCompareCaptchaflowWithItself: issue 38's "at most 5 %" is encrypted captchaflow against plaintext
// captchaflow at the same C, and issue 36's paced against the default configuration, not against the twin.
func TestSelfTargetsCompareCaptchaflowWithItself(t *testing.T) {
	cr := SelfResult{Concurrency: 20, ThroughputRatio: 0.94, CallbackP99Ratio: 1.04}
	pr := SelfResult{Concurrency: 100, ThroughputRatio: 0.96, CallbackP99Ratio: 1.3}
	got := map[string]bool{}
	for _, tg := range append(codecTargets(&Results{Codec: []SelfResult{cr}}), pacingTargets(&Results{Pacing: []SelfResult{pr}})...) {
		got[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"codec cost: throughput at C = 20 encrypted":        false,
		"codec cost: callback→result p99, C = 20 encrypted": true,
		"pacing cost: throughput at C = 100 paced":          true,
	}
	if len(got) != len(want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for name, met := range want {
		if m, ok := got[name]; !ok || m != met {
			t.Errorf("%s: met %v (present %v), want %v", name, m, ok, met)
		}
	}
}

// TestBaselineIsReportedAsThisBuildAgainstIt: compareSelf measures the baseline as the variant; the report and the
// target read this build against the baseline, each round's ratio inverted too.
func TestBaselineIsReportedAsThisBuildAgainstIt(t *testing.T) {
	measured := SelfResult{Concurrency: 20, Default: SideResult{TasksPerSec: 50}, Variant: SideResult{TasksPerSec: 40},
		ThroughputRatio: 0.8, RoundRatios: []float64{0.8, 1.25}}
	got := thisBuildAgainst(measured)
	if got.Variant.TasksPerSec != 50 || got.Default.TasksPerSec != 40 || got.ThroughputRatio != 1.25 {
		t.Errorf("this build against the baseline: %+v, want this build's 50 tasks/s as the variant, ratio 1.25", got)
	}
	if got.RoundRatios[0] != 1.25 || got.RoundRatios[1] != 0.8 || measured.RoundRatios[0] != 0.8 {
		t.Errorf("round ratios %v (measured's now %v), want [1.25 0.8] and the measured ones untouched", got.RoundRatios, measured.RoundRatios)
	}
	ts := baselineTargets(&Results{Baseline: []SelfResult{got, thisBuildAgainst(got)}, BaselineCommit: "a27490f"})
	if len(ts) != 2 || ts[0].Name != "against a27490f: throughput at C = 20" || !ts[0].Met || ts[1].Met {
		t.Errorf("targets %+v, want C = 20 met at 1.25 and missed at 0.8", ts)
	}
}
