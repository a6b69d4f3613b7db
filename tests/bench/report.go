package main

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// renderMarkdown is results.md: the run's header, the measures table and the targets table.
func renderMarkdown(r *Results) string {
	var m markdown
	m.header(r)
	m.p("| Measure | captchaflow | bare twin | ratio |\n|---|---:|---:|---:|\n")
	m.throughputRows(r)
	m.selfRows(r.Codec, "encrypted", "plaintext", r.Throughput)
	m.selfRows(r.Pacing, "paced", "default configuration", r.Throughput)
	m.selfRows(r.Baseline, "this build", "the worker of "+r.BaselineCommit, r.Throughput)
	m.pollPathRows(r)
	for _, tr := range r.Throughput {
		m.p("| in.php / res.php requests per task, callback path, %s | %.3f / %.3f | | |\n", label(tr), tr.Ours.InPHPPerTask, tr.Ours.ResPHPPerTask)
	}
	m.recoveryRows(r)
	m.threadsRows(r)
	m.admissionRows(r)
	m.fleetRows(r)
	m.nexusRows(r)
	m.billingRows(r)
	m.waitingRows(r)
	m.targets(r)
	for _, n := range r.Notes {
		m.p("\n%s\n", n)
	}
	return m.String()
}

// markdown builds results.md; p appends formatted text.
type markdown struct{ strings.Builder }

func (m *markdown) p(f string, a ...any) { fmt.Fprintf(&m.Builder, f, a...) }

// header is the title and what the run ran on, with what.
func (m *markdown) header(r *Results) {
	m.p("### captchaflow benchmark — %s\n\n", r.Label)
	m.p("Server: %s", r.Server)
	if r.TemporalDB != "" {
		m.p(", SQLite file `%s`", r.TemporalDB)
	}
	m.p("\n\n")
	m.p("%s · commit %s · %s · %d CPUs · load average %s → %s · N = %d per side and concurrency (%d rounds alternating twin and ours, %d warm-up tasks each) · run took %.0f s (stack start %.0f s)\n\n",
		r.StartedAt.Format("2006-01-02 15:04 UTC"), r.GitCommit, r.GoVersion, r.CPUs, r.LoadAvgStart, r.LoadAvgEnd,
		r.N, r.Rounds, r.Warmup, r.DurationSeconds, r.StackStartSecs)
	m.p("captchaflow's Temporal connections: %s (the twin's: gzip, the SDK's default)\n\n", cmp.Or(r.GRPCCompression, "not recorded"))
	if len(r.DynamicConfig) > 0 || len(r.WorkerEnv) > 0 {
		m.p("Levers: dynamic config %v, worker env %v\n\n", r.DynamicConfig, r.WorkerEnv)
	}
}

// throughputRows compare the two sides of each scenario.
func (m *markdown) throughputRows(r *Results) {
	for _, tr := range r.Throughput {
		c := label(tr)
		o, t := tr.Ours, tr.Twin
		m.p("| **%s** throughput, tasks/s%s | **%s** | %s | **%.2f** |\n", c, defaultNote(tr), num(o.TasksPerSec), num(t.TasksPerSec), tr.ThroughputRatio)
		m.p("| %s start → result p50 / p95 / p99, ms | %s | %s | %.2f (p99) |\n", c, dist3(o.StartToResult), dist3(t.StartToResult), tr.StartP99Ratio)
		m.p("| %s callback → result p50 / p95 / p99, ms (twin: signal → result) | %s | %s | **%.2f** (p99) |\n", c, dist3(o.CallbackToResult), dist3(t.CallbackToResult), tr.CallbackP99Ratio)
		m.p("| %s CPU per task, ms: %s | %s | %s | %.2f (total) |\n", c, cpuLegend(r.Throughput), cpuRow(o.CPUms, o.CPUms), cpuRow(t.CPUms, o.CPUms), ratio(cpuTotal(o.CPUms), cpuTotal(t.CPUms)))
		m.p("| %s history events per task (min–max, mean; sampled) | %s | %s | |\n", c, histRange(o.HistoryEvents), histRange(t.HistoryEvents))
		if o.HistoryRequests != nil {
			m.p("| %s Temporal history-service requests per task (where the sides differ) | %s | %s | |\n", c, requestsCell(o.HistoryRequests, t.HistoryRequests), requestsCell(t.HistoryRequests, o.HistoryRequests))
		}
		m.p("| %s share of tasks that started the callback timer | %s | %s | |\n", c, timerShare(o.HistoryEvents), timerShare(t.HistoryEvents))
		if o.Failed+t.Failed+o.Missing+t.Missing > 0 {
			m.p("| %s failed / without callback time | %d / %d | %d / %d | |\n", c, o.Failed, o.Missing, t.Failed, t.Missing)
		}
	}
}

// selfRows: a variant of captchaflow against its default configuration, interleaved (the twin's column is the default's).
func (m *markdown) selfRows(rs []SelfResult, variant, against string, throughput []ThroughputResult) {
	for _, cr := range rs {
		c := fmt.Sprintf("C = %d %s (against %s, %d interleaved rounds)", cr.Concurrency, variant, against, cr.Rounds)
		e, p := cr.Variant, cr.Default
		m.p("| **%s** throughput, tasks/s (each round's ratio %s) | **%s** | %s | **%.2f** |\n", c,
			roundSpread(cr.RoundRatios), num(e.TasksPerSec), num(p.TasksPerSec), cr.ThroughputRatio)
		m.p("| %s callback → result p50 / p95 / p99, ms | %s | %s | **%.2f** (p99) |\n", c, dist3(e.CallbackToResult),
			dist3(p.CallbackToResult), cr.CallbackP99Ratio)
		m.p("| %s CPU per task, ms: %s | %s | %s | %.2f (total) |\n", c, cpuLegend(throughput), cpuRow(e.CPUms, e.CPUms),
			cpuRow(p.CPUms, e.CPUms), ratio(cpuTotal(e.CPUms), cpuTotal(p.CPUms)))
		if e.Failed+p.Failed > 0 {
			m.p("| %s failed | %d | %d | |\n", c, e.Failed, p.Failed)
		}
	}
}

func (m *markdown) pollPathRows(r *Results) {
	if len(r.PollPath) == 0 {
		return
	}
	var ev, res, secs []string
	for _, pp := range r.PollPath {
		ev = append(ev, strconv.Itoa(pp.HistoryEvents))
		res = append(res, fmt.Sprintf("%d", pp.ResPHP))
		secs = append(secs, fmt.Sprintf("%.1f", pp.Seconds))
	}
	m.p("| history events per task, poll path %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(ev, " / "))
	m.p("| res.php requests, poll path %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(res, " / "))
	m.p("| poll path start → result, s %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(secs, " / "))
}

func (m *markdown) recoveryRows(r *Results) {
	rec := r.Recovery
	if rec == nil {
		return
	}
	m.p("| recovery after a dropped pingback (%d tasks, callback timeout %d s, poll interval %d s): dropped pingback → result p50 / max, ms | %s / %s | | |\n",
		rec.Tasks, rec.CallbackTimeoutSeconds, rec.PollIntervalSeconds, num(rec.DropToResult.P50), num(rec.DropToResult.Max))
	m.p("| recovery: timer fired → result p50 / max, ms | %s / %s | | |\n", num(rec.TimerToResult.P50), num(rec.TimerToResult.Max))
	m.p("| recovery: res.php requests per task | %.2f | | |\n", rec.ResPHPPerTask)
}

func (m *markdown) waitingRows(r *Results) {
	w := r.Waiting
	if w == nil {
		return
	}
	m.p("| worker RSS / Go heap in use, idle after restart, MiB | %.0f / %.0f | | |\n", w.Baseline.RSSMiB, w.Baseline.HeapInuseMiB)
	for _, s := range w.Sizes {
		m.p("| worker RSS / Go heap in use, %s tasks waiting for their callback, MiB | %.0f / %.0f | | |\n",
			thousands(s.Reached), s.Memory.RSSMiB, s.Memory.HeapInuseMiB)
		if e := s.Extrapolated; e != nil {
			m.p("| worker RSS / Go heap in use, %s tasks waiting, MiB — *extrapolated*, the time budget ran out at %s | ~%.0f / ~%.0f | | |\n",
				thousands(s.Tasks), thousands(s.Reached), e.RSSMiB, e.HeapInuseMiB)
		}
	}
	if len(w.Sizes) > 0 {
		var rates []string
		for _, s := range w.Sizes {
			rates = append(rates, num(s.StartRate))
		}
		m.p("| tasks parked per second (start → awaiting callback) | %s | | |\n", strings.Join(rates, " / "))
	}
	m.p("| worker sticky cache size | %s | | |\n", w.StickyCacheSize)
}

// targets is the second table: each target with ✅ met, ❌ missed or — not measured.
func (m *markdown) targets(r *Results) {
	m.p("\n| Target | Want | Got | Met |\n|---|---|---|:-:|\n")
	for _, t := range r.Targets {
		mark := "✅"
		switch {
		case !t.Measured:
			mark = "—"
		case !t.Met:
			mark = "❌"
		}
		m.p("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, mark)
	}
}

func pollLabels(ps []PollPathResult) string {
	var l []string
	for _, p := range ps {
		l = append(l, strconv.Itoa(p.Polls))
	}
	return "(" + strings.Join(l, " / ") + " polls)"
}

func dist3(d Dist) string {
	if d.Count == 0 {
		return "—"
	}
	return num(d.P50) + " / " + num(d.P95) + " / " + num(d.P99)
}

func histRange(h HistoryStats) string {
	if h.Sampled == 0 {
		return "—"
	}
	return fmt.Sprintf("%d–%d (%.1f)", h.Min, h.Max, h.Mean)
}

// cpuOrder is the order of cpuRow's figures.
var cpuOrder = []string{"temporal", "postgres", "worker", "ingress", "simulator", "bench"}

func cpuLegend(rs []ThroughputResult) string {
	names := map[string]string{"temporal": "Temporal", "postgres": "PostgreSQL", "worker": "worker", "ingress": "ingress",
		"simulator": "simulator", "bench": "bench process (twin: its worker runs there)"}
	var parts []string
	for _, k := range cpuOrder {
		for _, r := range rs {
			if _, ok := r.Ours.CPUms[k]; ok {
				parts = append(parts, names[k])
				break
			}
		}
	}
	return strings.Join(parts, " + ")
}

func cpuRow(m, keys map[string]float64) string {
	if len(m) == 0 {
		return "—"
	}
	var parts []string
	for _, k := range cpuOrder {
		if _, shown := keys[k]; !shown {
			continue
		}
		if v, ok := m[k]; ok {
			parts = append(parts, num(v))
		} else {
			parts = append(parts, "·")
		}
	}
	return strings.Join(parts, " + ")
}

func cpuTotal(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func timerShare(h HistoryStats) string {
	if h.Sampled == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(h.WithTimer)/float64(h.Sampled))
}

func label(tr ThroughputResult) string { return scenarioLabel(tr.Scenario, tr.Concurrency, tr.Pace) }

// defaultNote says where a scenario ran the default configuration: its label says a pace, none here.
func defaultNote(tr ThroughputResult) string {
	if tr.Pace > 0 {
		return ""
	}
	return ", default configuration (not paced)"
}

func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case x >= 100:
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	parts = append([]string{s}, parts...)
	return strings.Join(parts, " ")
}
