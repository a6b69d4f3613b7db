package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Target thresholds from the issue (measured and reported, not asserted).
const (
	minThroughputRatio   = 0.8
	maxCallbackP99Ratio  = 1.5
	maxCallbackPathEvent = 16
	maxWaitingRSSMiB     = 300
	waitingTargetTasks   = 10000
)

func evaluateTargets(r *Results) []Target {
	var ts []Target
	for _, tr := range r.Throughput {
		if tr.Scenario != scenarioInstant {
			continue // its pace is set by the solve delay
		}
		ts = append(ts, Target{
			Name:     fmt.Sprintf("throughput at C = %d", tr.Concurrency),
			Want:     fmt.Sprintf("≥ %.1f × twin", minThroughputRatio),
			Got:      fmt.Sprintf("%.2f × (%.1f vs %.1f tasks/s)", tr.ThroughputRatio, tr.Ours.TasksPerSec, tr.Twin.TasksPerSec),
			Met:      tr.ThroughputRatio >= minThroughputRatio && tr.Ours.Failed == 0,
			Measured: true,
		})
	}
	for _, tr := range r.Throughput {
		ts = append(ts, Target{
			Name:     fmt.Sprintf("callback→result p99, %s", label(tr)),
			Want:     fmt.Sprintf("≤ %.1f × twin signal→result p99", maxCallbackP99Ratio),
			Got:      fmt.Sprintf("%.2f × (%s vs %s ms)", tr.CallbackP99Ratio, num(tr.Ours.CallbackToResult.P99), num(tr.Twin.CallbackToResult.P99)),
			Met:      tr.CallbackP99Ratio <= maxCallbackP99Ratio,
			Measured: true,
		})
	}
	if len(r.Throughput) > 0 {
		maxEv, sampled := 0, 0
		for _, tr := range r.Throughput {
			maxEv = max(maxEv, tr.Ours.HistoryEvents.Max)
			sampled += tr.Ours.HistoryEvents.Sampled
		}
		ts = append(ts, Target{
			Name:     "history events, callback path",
			Want:     fmt.Sprintf("≤ %d", maxCallbackPathEvent),
			Got:      fmt.Sprintf("max %d (%d tasks sampled)", maxEv, sampled),
			Met:      sampled > 0 && maxEv <= maxCallbackPathEvent,
			Measured: sampled > 0,
		})
	}
	if len(r.PollPath) > 0 {
		var counts []string
		same, ok := true, true
		for _, p := range r.PollPath {
			counts = append(counts, strconv.Itoa(p.HistoryEvents))
			ok = ok && p.Err == "" && p.Via == "poll"
			same = same && p.HistoryEvents == r.PollPath[0].HistoryEvents
		}
		ts = append(ts, Target{
			Name:     "history events, poll path " + pollLabels(r.PollPath),
			Want:     "the same for every poll count",
			Got:      strings.Join(counts, " / "),
			Met:      ok && same,
			Measured: true,
		})
	}
	{
		mismatch, measured := 0, false
		var got []string
		for _, tr := range r.Throughput {
			measured = true
			mismatch += tr.Ours.InPHPMismatch
			got = append(got, fmt.Sprintf("%.3f/task at %s", tr.Ours.InPHPPerTask, label(tr)))
			if tr.Ours.InPHPPerTask != 1 {
				mismatch++
			}
		}
		for _, p := range r.PollPath {
			measured = true
			if p.InPHP != 1 {
				mismatch++
			}
		}
		if len(r.PollPath) > 0 {
			got = append(got, "1 per poll-path task")
		}
		if mismatch > 0 {
			got = append(got, fmt.Sprintf("%d mismatches", mismatch))
		}
		ts = append(ts, Target{
			Name:     "in.php requests",
			Want:     "exactly one per submission",
			Got:      strings.Join(got, ", "),
			Met:      measured && mismatch == 0,
			Measured: measured,
		})
	}
	if len(r.PollPath) > 0 {
		var got []string
		ok := true
		for _, p := range r.PollPath {
			got = append(got, fmt.Sprintf("%d (bound %d)", p.ResPHP, p.ResPHPBound))
			ok = ok && p.Err == "" && p.ResPHP <= int64(p.ResPHPBound)
		}
		ts = append(ts, Target{
			Name:     "res.php requests per poll-recovered task " + pollLabels(r.PollPath),
			Want:     "≤ 1 + ⌈(solve − callback timeout) / poll interval⌉",
			Got:      strings.Join(got, " / "),
			Met:      ok,
			Measured: true,
		})
	}
	if w := r.Waiting; w != nil && len(w.Sizes) > 0 {
		last := w.Sizes[len(w.Sizes)-1]
		t := Target{
			Name: fmt.Sprintf("worker RSS with %s tasks waiting", thousands(waitingTargetTasks)),
			Want: fmt.Sprintf("≤ %d MiB", maxWaitingRSSMiB),
			Got:  fmt.Sprintf("%.0f MiB with %s waiting", last.Memory.RSSMiB, thousands(last.Reached)),
			// 2 % short of the level (a few starts still in flight when counted) still measures it.
			Measured: last.Tasks >= waitingTargetTasks && float64(last.Reached) >= 0.98*waitingTargetTasks,
		}
		t.Met = t.Measured && last.Memory.RSSMiB <= maxWaitingRSSMiB
		if !t.Measured && last.Tasks >= waitingTargetTasks && last.Memory.RSSMiB > maxWaitingRSSMiB {
			// Above the bound with fewer tasks already: missed, whatever the rest would add.
			t.Measured = true
			t.Got += " — over the bound before reaching 10 000"
		} else if !t.Measured {
			if e := last.Extrapolated; e != nil && last.Tasks >= waitingTargetTasks {
				t.Got += fmt.Sprintf("; ~%.0f MiB extrapolated to %s (not measured)", e.RSSMiB, thousands(last.Tasks))
			} else {
				t.Got += " (the 10 000 level was not run; not evaluated)"
			}
		}
		ts = append(ts, t)
	}
	if rec := r.Recovery; rec != nil {
		bound := float64(rec.CallbackTimeoutSeconds+rec.PollIntervalSeconds+1) * 1000
		ts = append(ts, Target{
			Name:     "recovery after a dropped pingback (dropped pingback → result, max)",
			Want:     fmt.Sprintf("≤ callback timeout + poll interval + 1 s = %.0f ms", bound),
			Got:      fmt.Sprintf("%s ms (timer fired → result max %s ms)", num(rec.DropToResult.Max), num(rec.TimerToResult.Max)),
			Met:      rec.Failed == 0 && rec.DropToResult.Count > 0 && rec.DropToResult.Max <= bound,
			Measured: rec.DropToResult.Count > 0,
		})
	}
	return ts
}

func pollLabels(ps []PollPathResult) string {
	var l []string
	for _, p := range ps {
		l = append(l, strconv.Itoa(p.Polls))
	}
	return "(" + strings.Join(l, " / ") + " polls)"
}

func renderMarkdown(r *Results) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("### captchaflow benchmark — %s\n\n", r.Label)
	p("Server: %s", r.Server)
	if r.TemporalDB != "" {
		p(", SQLite file `%s`", r.TemporalDB)
	}
	p("\n\n")
	p("%s · commit %s · %s · %d CPUs · load average %s → %s · N = %d per side and concurrency (%d rounds alternating twin and ours, %d warm-up tasks each) · run took %.0f s (stack start %.0f s)\n\n",
		r.StartedAt.Format("2006-01-02 15:04 UTC"), r.GitCommit, r.GoVersion, r.CPUs, r.LoadAvgStart, r.LoadAvgEnd,
		r.N, r.Rounds, r.Warmup, r.DurationSeconds, r.StackStartSecs)
	if len(r.DynamicConfig) > 0 || len(r.WorkerEnv) > 0 {
		p("Levers: dynamic config %v, worker env %v\n\n", r.DynamicConfig, r.WorkerEnv)
	}
	p("| Measure | captchaflow | bare twin | ratio |\n|---|---:|---:|---:|\n")
	for _, tr := range r.Throughput {
		c := label(tr)
		o, t := tr.Ours, tr.Twin
		p("| **%s** throughput, tasks/s | **%s** | %s | **%.2f** |\n", c, num(o.TasksPerSec), num(t.TasksPerSec), tr.ThroughputRatio)
		p("| %s start → result p50 / p95 / p99, ms | %s | %s | %.2f (p99) |\n", c, dist3(o.StartToResult), dist3(t.StartToResult), tr.StartP99Ratio)
		p("| %s callback → result p50 / p95 / p99, ms (twin: signal → result) | %s | %s | **%.2f** (p99) |\n", c, dist3(o.CallbackToResult), dist3(t.CallbackToResult), tr.CallbackP99Ratio)
		p("| %s CPU per task, ms: %s | %s | %s | %.2f (total) |\n", c, cpuLegend(r.Throughput), cpuRow(o.CPUms, o.CPUms), cpuRow(t.CPUms, o.CPUms), ratio(cpuTotal(o.CPUms), cpuTotal(t.CPUms)))
		p("| %s history events per task (min–max, mean; sampled) | %s | %s | |\n", c, histRange(o.HistoryEvents), histRange(t.HistoryEvents))
		p("| %s share of tasks that started the callback timer | %s | %s | |\n", c, timerShare(o.HistoryEvents), timerShare(t.HistoryEvents))
		if o.Failed+t.Failed+o.Missing+t.Missing > 0 {
			p("| %s failed / without callback time | %d / %d | %d / %d | |\n", c, o.Failed, o.Missing, t.Failed, t.Missing)
		}
	}
	if len(r.PollPath) > 0 {
		var ev, res, secs []string
		for _, pp := range r.PollPath {
			ev = append(ev, strconv.Itoa(pp.HistoryEvents))
			res = append(res, fmt.Sprintf("%d", pp.ResPHP))
			secs = append(secs, fmt.Sprintf("%.1f", pp.Seconds))
		}
		p("| history events per task, poll path %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(ev, " / "))
		p("| res.php requests, poll path %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(res, " / "))
		p("| poll path start → result, s %s | %s | | |\n", pollLabels(r.PollPath), strings.Join(secs, " / "))
	}
	for _, tr := range r.Throughput {
		p("| in.php / res.php requests per task, callback path, %s | %.3f / %.3f | | |\n", label(tr), tr.Ours.InPHPPerTask, tr.Ours.ResPHPPerTask)
	}
	if rec := r.Recovery; rec != nil {
		p("| recovery after a dropped pingback (%d tasks, callback timeout %d s, poll interval %d s): dropped pingback → result p50 / max, ms | %s / %s | | |\n",
			rec.Tasks, rec.CallbackTimeoutSeconds, rec.PollIntervalSeconds, num(rec.DropToResult.P50), num(rec.DropToResult.Max))
		p("| recovery: timer fired → result p50 / max, ms | %s / %s | | |\n", num(rec.TimerToResult.P50), num(rec.TimerToResult.Max))
		p("| recovery: res.php requests per task | %.2f | | |\n", rec.ResPHPPerTask)
	}
	if w := r.Waiting; w != nil {
		p("| worker RSS / Go heap in use, idle after restart, MiB | %.0f / %.0f | | |\n", w.Baseline.RSSMiB, w.Baseline.HeapInuseMiB)
		for _, s := range w.Sizes {
			p("| worker RSS / Go heap in use, %s tasks waiting for their callback, MiB | %.0f / %.0f | | |\n",
				thousands(s.Reached), s.Memory.RSSMiB, s.Memory.HeapInuseMiB)
			if e := s.Extrapolated; e != nil {
				p("| worker RSS / Go heap in use, %s tasks waiting, MiB — *extrapolated*, the time budget ran out at %s | ~%.0f / ~%.0f | | |\n",
					thousands(s.Tasks), thousands(s.Reached), e.RSSMiB, e.HeapInuseMiB)
			}
		}
		if len(w.Sizes) > 0 {
			var rates []string
			for _, s := range w.Sizes {
				rates = append(rates, num(s.StartRate))
			}
			p("| tasks parked per second (start → awaiting callback) | %s | | |\n", strings.Join(rates, " / "))
		}
		p("| worker sticky cache size | %s | | |\n", w.StickyCacheSize)
	}
	p("\n| Target | Want | Got | Met |\n|---|---|---|:-:|\n")
	for _, t := range r.Targets {
		mark := "✅"
		switch {
		case !t.Measured:
			mark = "—"
		case !t.Met:
			mark = "❌"
		}
		p("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, mark)
	}
	for _, n := range r.Notes {
		p("\n%s\n", n)
	}
	return b.String()
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

func label(tr ThroughputResult) string {
	if tr.Scenario == scenarioInstant {
		return fmt.Sprintf("C = %d", tr.Concurrency)
	}
	return fmt.Sprintf("C = %d %s", tr.Concurrency, tr.Scenario)
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
