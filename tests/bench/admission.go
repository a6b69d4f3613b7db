package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/tests/bench/admission"
)

// The admission phase (issue #16): the provider-threads semaphore alone, each design of the ask at saturation, then
// SolveCaptcha batches against a capped provider with PROVIDER_THREADS unset and set, side by side in one run.
const (
	// admissionProbes requesters take admissionEach slots each, one after the other, holding none: the semaphore's
	// own pace. With admissionSaturatedPlan slots most of them wait (grants by signal); with admissionProbes slots
	// none does (the answer carries the grant, for the designs that can).
	admissionProbes        = 100
	admissionEach          = 6
	admissionSaturatedPlan = 20
	// admissionRounds: each design is measured this many times, the designs in turn, so that the machine's drift
	// (other work on a shared 2-core machine moves a figure by ±50 %) hits them all alike; the median round is kept.
	admissionRounds = 3

	// The batches: the plan not the bottleneck (bigTasks against bigCap threads) and the plan the bottleneck
	// (smallTasks against smallCap), solved batchSolve after they are accepted.
	bigTasks   = 200
	bigCap     = 40
	smallTasks = 24
	smallCap   = 4
	batchSolve = 2 * time.Second

	minAdmissionsPerSec = 50
	maxBigBatchRatio    = 1.1
	maxSmallNoSlot      = 0.05
	maxSmallBusyIdeal   = 1.2
)

// AdmissionResult is the admission phase.
type AdmissionResult struct {
	Designs []DesignResult `json:"designs"`
	// BigUnset / BigSet: bigTasks at once against bigCap provider threads, PROVIDER_THREADS unset and = bigCap.
	BigUnset BatchFigures `json:"big_unset"`
	BigSet   BatchFigures `json:"big_set"`
	// BigRatio is BigSet's wall time over BigUnset's.
	BigRatio   float64      `json:"big_ratio"`
	SmallUnset BatchFigures `json:"small_unset"`
	SmallSet   BatchFigures `json:"small_set"`
}

// DesignResult is one design of the ask at one plan: admissions per second and the history they cost.
type DesignResult struct {
	Design      string  `json:"design"`
	Plan        int     `json:"plan"`
	Admissions  int     `json:"admissions"`
	Failed      int     `json:"failed"`
	FirstError  string  `json:"first_error,omitempty"`
	WallSeconds float64 `json:"wall_seconds"`
	PerSecond   float64 `json:"per_second"` // the median round's
	// Rounds are the admissions per second of every round, in the order run.
	Rounds []float64 `json:"rounds"`
	// GrantedInAnswer is the share of admissions whose grant came in AcquireSlot's answer (no grant signal).
	GrantedInAnswer float64 `json:"granted_in_answer"`
	// SemaphoreEvents and ProbeEvents are history events per admission: the semaphore's (every run) and the
	// requesters'.
	SemaphoreEvents float64 `json:"semaphore_events_per_admission"`
	SemaphoreRuns   int     `json:"semaphore_runs"`
	ProbeEvents     float64 `json:"probe_events_per_admission"`
	Wait            Dist    `json:"ask_to_grant"`
	// CPUms is the CPU milliseconds per admission of each process: "temporal" (the server) and "bench" (the
	// requesters and the semaphore's worker, in this process). 2 000 over their sum is what two free cores could
	// admit per second, a figure the machine's other load does not move.
	CPUms map[string]float64 `json:"cpu_ms_per_admission"`
}

func (b *bench) admission(ctx context.Context) (*AdmissionResult, error) {
	res := &AdmissionResult{}
	designs, err := b.admissionDesigns()
	if err != nil {
		return nil, err
	}
	plans := []int{admissionSaturatedPlan, admissionProbes}
	rounds := map[string][]DesignResult{}
	for round := range admissionRounds {
		for _, plan := range plans {
			for _, d := range designs {
				dr, err := b.admissionDesign(ctx, d, plan, round)
				if err != nil {
					return nil, err
				}
				log.Printf("admission: round %d, %s, plan %d: %.1f admissions/s, %.1f semaphore events each", round+1, d,
					plan, dr.PerSecond, dr.SemaphoreEvents)
				key := fmt.Sprint(d, plan)
				rounds[key] = append(rounds[key], dr)
			}
		}
	}
	for _, plan := range plans {
		for _, d := range designs {
			res.Designs = append(res.Designs, medianRound(rounds[fmt.Sprint(d, plan)]))
		}
	}
	if !b.cfg.admissionBatches {
		return res, nil
	}
	if err := b.admissionBatches(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// admissionDesigns are the designs -admission-designs names, all by default.
func (b *bench) admissionDesigns() ([]admission.Design, error) {
	if b.cfg.admissionDesigns == "" {
		return admission.Designs, nil
	}
	var out []admission.Design
	for _, name := range strings.Split(b.cfg.admissionDesigns, ",") {
		if !slices.Contains(admission.Designs, admission.Design(name)) {
			return nil, fmt.Errorf("-admission-designs: unknown design %q (%v)", name, admission.Designs)
		}
		out = append(out, admission.Design(name))
	}
	return out, nil
}

// admissionDesign runs the probes of one design against a semaphore of their own (one task queue each) served by a
// worker in this process.
func (b *bench) admissionDesign(ctx context.Context, d admission.Design, plan, round int) (DesignResult, error) {
	dr := DesignResult{Design: string(d), Plan: plan, Admissions: admissionProbes * admissionEach}
	queue := fmt.Sprintf("bench-admission-%s-%d-%d-%s", d, plan, round, b.runID)
	wc, err := b.dial(ctx)
	if err != nil {
		return dr, err
	}
	defer wc.Close()
	w := worker.New(wc, queue, worker.Options{})
	admission.Register(w, &activities.Activities{ProviderThreads: plan}, wc)
	if err := w.Start(); err != nil {
		return dr, err
	}
	defer w.Stop()
	if _, err := activities.EnsureThreadsPlan(ctx, b.c, queue, activities.PlanChange{Threads: plan}); err != nil {
		return dr, fmt.Errorf("starting the semaphore of %s: %w", queue, err)
	}
	in := admission.ProbeInput{Admissions: admissionEach, Design: d}
	began := time.Now()
	var results []admission.ProbeResult
	var runs []probeRun
	cpu := newCPUMeter(b.pids, b.pidTrees)
	cpu.measure(func() { results, runs = b.runProbes(ctx, queue, in) })
	dr.CPUms = cpu.perTask(dr.Admissions)
	delete(dr.CPUms, "ingress")
	delete(dr.CPUms, "simulator")
	delete(dr.CPUms, "worker")
	dr.WallSeconds = round2(time.Since(began).Seconds())
	dr.PerSecond = round2(float64(dr.Admissions) / dr.WallSeconds)
	dr.Failed, dr.FirstError = probeFailures(runs)
	dr.Wait, dr.GrantedInAnswer = waits(results)
	probeEvents := 0
	for _, r := range runs {
		probeEvents += b.historyLength(ctx, r.id)
	}
	semID := activities.ThreadsWorkflowID(queue)
	semEvents, semRuns := b.historyLengths(ctx, fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus != 'Running'", semID))
	semEvents, semRuns = semEvents+b.historyLength(ctx, semID), semRuns+1
	dr.ProbeEvents = round2(float64(probeEvents) / float64(dr.Admissions))
	dr.SemaphoreEvents, dr.SemaphoreRuns = round2(float64(semEvents)/float64(dr.Admissions)), semRuns
	_ = b.c.TerminateWorkflow(ctx, semID, "", "bench: design measured")
	return dr, nil
}

// medianRound is the round with the median admissions per second, with every round's figure.
func medianRound(rounds []DesignResult) DesignResult {
	var all []float64
	for _, r := range rounds {
		all = append(all, r.PerSecond)
	}
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b DesignResult) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	m := sorted[len(sorted)/2]
	m.Rounds = all
	return m
}

type probeRun struct {
	id  string
	err error
}

// runProbes starts admissionProbes probes at once on queue and waits for them all.
func (b *bench) runProbes(ctx context.Context, queue string, in admission.ProbeInput) ([]admission.ProbeResult, []probeRun) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var handles []client.WorkflowRun
	runs := make([]probeRun, admissionProbes)
	for i := range admissionProbes {
		runs[i].id = fmt.Sprintf("%s-probe-%03d", queue, i)
		h, err := b.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runs[i].id, TaskQueue: queue}, admission.ProbeWorkflowType, in)
		runs[i].err = err
		handles = append(handles, h)
	}
	var results []admission.ProbeResult
	for i, h := range handles {
		if runs[i].err != nil {
			continue
		}
		var r admission.ProbeResult
		if runs[i].err = h.Get(ctx, &r); runs[i].err == nil {
			results = append(results, r)
		}
	}
	return results, runs
}

func probeFailures(runs []probeRun) (int, string) {
	n, first := 0, ""
	for _, r := range runs {
		if r.err != nil {
			if n == 0 {
				first = fmt.Sprintf("%s: %v", r.id, r.err)
			}
			n++
		}
	}
	return n, first
}

// waits is the ask → grant distribution and the share granted in the answer (asked and granted in one moment).
func waits(results []admission.ProbeResult) (Dist, float64) {
	var xs []float64
	inAnswer := 0
	for _, r := range results {
		for _, h := range r.Holds {
			xs = append(xs, ms(h.Granted.Sub(h.Asked)))
			if h.GrantedInAnswer {
				inAnswer++
			}
		}
	}
	if len(xs) == 0 {
		return Dist{}, 0
	}
	return summarize(xs), round3(float64(inAnswer) / float64(len(xs)))
}

// historyLength is the length of id's current run's history (0 when it cannot be told).
func (b *bench) historyLength(ctx context.Context, id string) int {
	d, err := b.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		log.Printf("admission: describing %s: %v", id, err)
		return 0
	}
	return int(d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength())
}

// historyLengths sums the history length of the executions query lists, and counts them.
func (b *bench) historyLengths(ctx context.Context, query string) (events, executions int) {
	var token []byte
	for {
		resp, err := b.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			log.Printf("admission: listing %q: %v", query, err)
			return events, executions
		}
		for _, e := range resp.Executions {
			events += int(e.GetHistoryLength())
			executions++
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return events, executions
		}
	}
}
