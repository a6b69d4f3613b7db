package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Target thresholds from the issues (measured and reported, not asserted); the throughput, callback p99 and
// callback-path events ones are issue 36's, for the default configuration and a pace above the offered load.
const (
	minThroughputRatio      = 0.95
	minPacedThroughputRatio = 0.9
	maxCallbackP99Ratio     = 1.1
	maxCallbackPathEvents   = 14 // the mean of the sampled histories
	// Issue 38: the codec may cost at most 5 %, encrypted against the default scenario (captchaflow to captchaflow);
	// issue 36: pacing above the offered load too, paced against the default scenario.
	minSelfThroughputRatio   = 0.95
	maxCodecCallbackP99Ratio = 1.05
	maxWaitingRSSMiB         = 300
	waitingTargetTasks       = 10000
)

// targetRules evaluate the targets, in the order of the report's table; each gives the targets its phase's
// results allow (none when the phase did not run).
var targetRules = []func(r *Results) []Target{
	throughputTargets,
	callbackP99Targets,
	codecTargets,
	pacingTargets,
	baselineTargets,
	callbackPathEventsTargets,
	pollPathEventsTarget,
	inPHPTarget,
	resPHPTarget,
	waitingRSSTarget,
	recoveryTarget,
	threadsTargets,
	admissionTargets,
	fleetTargets,
	nexusTargets,
}

func evaluateTargets(r *Results) []Target {
	var ts []Target
	for _, rule := range targetRules {
		ts = append(ts, rule(r)...)
	}
	return ts
}

// throughputTargets: one per scenario solved at once, the paced ones allowed a little more than the default.
func throughputTargets(r *Results) []Target {
	var ts []Target
	for _, tr := range r.Throughput {
		if tr.Scenario == scenarioParked {
			continue // its pace is set by the solve delay
		}
		want := minThroughputRatio
		if tr.Pace > 0 {
			want = minPacedThroughputRatio
		}
		t := Target{
			Name:     "throughput at " + label(tr) + defaultNote(tr),
			Want:     fmt.Sprintf("≥ %.2f × twin", want),
			Got:      fmt.Sprintf("%.2f × (%.1f vs %.1f tasks/s)", tr.ThroughputRatio, tr.Ours.TasksPerSec, tr.Twin.TasksPerSec),
			Met:      tr.ThroughputRatio >= want && tr.Ours.Failed == 0,
			Measured: true,
		}
		if tr.Pace > 0 && tr.Pace <= tr.Twin.TasksPerSec {
			// A pace the offered load reaches holds the tasks back by design: not the case the target is for.
			t.Met, t.Measured = false, false
			t.Got += fmt.Sprintf(" — paced at or below the offered load (the twin's %.1f tasks/s): not evaluated", tr.Twin.TasksPerSec)
		}
		ts = append(ts, t)
	}
	return ts
}

// callbackP99Targets: one per scenario.
func callbackP99Targets(r *Results) []Target {
	var ts []Target
	for _, tr := range r.Throughput {
		ts = append(ts, Target{
			Name:     fmt.Sprintf("callback→result p99, %s", label(tr)),
			Want:     fmt.Sprintf("≤ %.1f × twin signal→result p99", maxCallbackP99Ratio),
			Got:      fmt.Sprintf("%.2f × (%s vs %s ms)", tr.CallbackP99Ratio, num(tr.Ours.CallbackToResult.P99), num(tr.Twin.CallbackToResult.P99)),
			Met:      tr.CallbackP99Ratio <= maxCallbackP99Ratio,
			Measured: true,
		})
	}
	return ts
}

// codecTargets: per concurrency, encrypted captchaflow's throughput and callback→result p99 against plaintext
// captchaflow's, the two interleaved in the same rounds.
func codecTargets(r *Results) []Target {
	var ts []Target
	for _, cr := range r.Codec {
		c := fmt.Sprintf("C = %d", cr.Concurrency)
		ts = append(ts, selfThroughputTarget("codec cost: throughput at "+c+" encrypted", "plaintext's", cr), Target{
			Name: "codec cost: callback→result p99, " + c + " encrypted",
			Want: fmt.Sprintf("≤ %.2f × plaintext's", maxCodecCallbackP99Ratio),
			Got: fmt.Sprintf("%.2f × (%s vs %s ms)", cr.CallbackP99Ratio, num(cr.Variant.CallbackToResult.P99),
				num(cr.Default.CallbackToResult.P99)),
			Met: cr.CallbackP99Ratio <= maxCodecCallbackP99Ratio, Measured: true,
		})
	}
	return ts
}

// pacingTargets: per concurrency, paced captchaflow's throughput against the default configuration's, interleaved.
func pacingTargets(r *Results) []Target {
	var ts []Target
	for _, pr := range r.Pacing {
		ts = append(ts, selfThroughputTarget(fmt.Sprintf("pacing cost: throughput at C = %d paced", pr.Concurrency),
			"the default configuration's", pr))
	}
	return ts
}

func selfThroughputTarget(name, against string, sr SelfResult) Target {
	return Target{Name: name, Want: fmt.Sprintf("≥ %.2f × %s", minSelfThroughputRatio, against),
		Got: fmt.Sprintf("%.2f × (%.1f vs %.1f tasks/s; rounds %s)", sr.ThroughputRatio, sr.Variant.TasksPerSec,
			sr.Default.TasksPerSec, roundSpread(sr.RoundRatios)),
		Met: sr.ThroughputRatio >= minSelfThroughputRatio && sr.Variant.Failed == 0, Measured: true}
}

// callbackPathEventsTargets: the mean sampled history of each scenario solved at once (a parked task's timer adds
// its events by design).
func callbackPathEventsTargets(r *Results) []Target {
	var ts []Target
	for _, tr := range r.Throughput {
		if tr.Scenario == scenarioParked {
			continue
		}
		h := tr.Ours.HistoryEvents
		ts = append(ts, Target{
			Name:     "history events, callback path, " + label(tr),
			Want:     fmt.Sprintf("≤ %d (mean of the sampled)", maxCallbackPathEvents),
			Got:      fmt.Sprintf("mean %.1f (min–max %d–%d, %d sampled)", h.Mean, h.Min, h.Max, h.Sampled),
			Met:      h.Sampled > 0 && h.Mean <= maxCallbackPathEvents,
			Measured: h.Sampled > 0,
		})
	}
	return ts
}

// pollPathEventsTarget: the poll path's history must not grow with the number of polls.
func pollPathEventsTarget(r *Results) []Target {
	if len(r.PollPath) == 0 {
		return nil
	}
	var counts []string
	same, ok := true, true
	for _, p := range r.PollPath {
		counts = append(counts, strconv.Itoa(p.HistoryEvents))
		ok = ok && p.Err == "" && p.Via == "poll"
		same = same && p.HistoryEvents == r.PollPath[0].HistoryEvents
	}
	return []Target{{
		Name:     "history events, poll path " + pollLabels(r.PollPath),
		Want:     "the same for every poll count",
		Got:      strings.Join(counts, " / "),
		Met:      ok && same,
		Measured: true,
	}}
}

// inPHPTarget: one submission per task, over the throughput and poll-path tasks; always listed.
func inPHPTarget(r *Results) []Target {
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
	return []Target{{
		Name:     "in.php requests",
		Want:     "exactly one per submission",
		Got:      strings.Join(got, ", "),
		Met:      measured && mismatch == 0,
		Measured: measured,
	}}
}

// resPHPTarget: each poll-path task within its bound of res.php requests.
func resPHPTarget(r *Results) []Target {
	if len(r.PollPath) == 0 {
		return nil
	}
	var got []string
	ok := true
	for _, p := range r.PollPath {
		got = append(got, fmt.Sprintf("%d (bound %d)", p.ResPHP, p.ResPHPBound))
		ok = ok && p.Err == "" && p.ResPHP <= int64(p.ResPHPBound)
	}
	return []Target{{
		Name:     "res.php requests per poll-recovered task " + pollLabels(r.PollPath),
		Want:     "≤ 1 + ⌈(solve − callback timeout) / poll interval⌉",
		Got:      strings.Join(got, " / "),
		Met:      ok,
		Measured: true,
	}}
}

// waitingRSSTarget: the worker's RSS at the last waiting level, which must be the target's 10 000 tasks to count.
func waitingRSSTarget(r *Results) []Target {
	w := r.Waiting
	if w == nil || len(w.Sizes) == 0 {
		return nil
	}
	last := w.Sizes[len(w.Sizes)-1]
	t := Target{
		Name: fmt.Sprintf("worker RSS with %s tasks waiting", thousands(waitingTargetTasks)),
		Want: fmt.Sprintf("≤ %d MiB", maxWaitingRSSMiB),
		Got:  fmt.Sprintf("%.0f MiB with %s waiting", last.Memory.RSSMiB, thousands(last.Reached)),
		// 2 % short of the level (a few starts still in flight when counted) still measures it.
		Measured: last.Tasks >= waitingTargetTasks && float64(last.Reached) >= 0.98*waitingTargetTasks,
	}
	t.Met = t.Measured && last.Memory.RSSMiB <= maxWaitingRSSMiB
	if !t.Measured {
		unmeasuredWaitingRSS(&t, last)
	}
	return []Target{t}
}

// unmeasuredWaitingRSS says why a waiting level short of the target's did or did not decide it.
func unmeasuredWaitingRSS(t *Target, last WaitingSize) {
	if last.Tasks >= waitingTargetTasks && last.Memory.RSSMiB > maxWaitingRSSMiB {
		// Above the bound with fewer tasks already: missed, whatever the rest would add.
		t.Measured = true
		t.Got += " — over the bound before reaching 10 000"
	} else if e := last.Extrapolated; e != nil && last.Tasks >= waitingTargetTasks {
		t.Got += fmt.Sprintf("; ~%.0f MiB extrapolated to %s (not measured)", e.RSSMiB, thousands(last.Tasks))
	} else {
		t.Got += " (the 10 000 level was not run; not evaluated)"
	}
}

// recoveryTarget: the slowest recovery after a dropped pingback, within one poll of the callback timeout.
func recoveryTarget(r *Results) []Target {
	rec := r.Recovery
	if rec == nil {
		return nil
	}
	bound := float64(rec.CallbackTimeoutSeconds+rec.PollIntervalSeconds+1) * 1000
	return []Target{{
		Name:     "recovery after a dropped pingback (dropped pingback → result, max)",
		Want:     fmt.Sprintf("≤ callback timeout + poll interval + 1 s = %.0f ms", bound),
		Got:      fmt.Sprintf("%s ms (timer fired → result max %s ms)", num(rec.DropToResult.Max), num(rec.TimerToResult.Max)),
		Met:      rec.Failed == 0 && rec.DropToResult.Count > 0 && rec.DropToResult.Max <= bound,
		Measured: rec.DropToResult.Count > 0,
	}}
}
