package main

import (
	"fmt"
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

// targetRules evaluate the targets, in the order of the report's table; each gives the targets its phase's
// results allow (none when the phase did not run).
var targetRules = []func(r *Results) []Target{
	throughputTargets,
	callbackP99Targets,
	callbackPathEventsTarget,
	pollPathEventsTarget,
	inPHPTarget,
	resPHPTarget,
	waitingRSSTarget,
	recoveryTarget,
	threadsTargets,
	admissionTargets,
	fleetTargets,
}

func evaluateTargets(r *Results) []Target {
	var ts []Target
	for _, rule := range targetRules {
		ts = append(ts, rule(r)...)
	}
	return ts
}

// throughputTargets: one per instant-solve concurrency.
func throughputTargets(r *Results) []Target {
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

// callbackPathEventsTarget: the longest sampled history over all scenarios.
func callbackPathEventsTarget(r *Results) []Target {
	if len(r.Throughput) == 0 {
		return nil
	}
	maxEv, sampled := 0, 0
	for _, tr := range r.Throughput {
		maxEv = max(maxEv, tr.Ours.HistoryEvents.Max)
		sampled += tr.Ours.HistoryEvents.Sampled
	}
	return []Target{{
		Name:     "history events, callback path",
		Want:     fmt.Sprintf("≤ %d", maxCallbackPathEvent),
		Got:      fmt.Sprintf("max %d (%d tasks sampled)", maxEv, sampled),
		Met:      sampled > 0 && maxEv <= maxCallbackPathEvent,
		Measured: sampled > 0,
	}}
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
