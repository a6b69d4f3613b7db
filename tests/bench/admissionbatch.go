package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// BatchFigures is one batch of SolveCaptcha tasks started at once against a provider capped at Cap threads, each
// solved batchSolve after it is accepted.
type BatchFigures struct {
	// ProviderThreads is the worker's PROVIDER_THREADS ("unset" without).
	ProviderThreads string  `json:"provider_threads"`
	Tasks           int     `json:"tasks"`
	Cap             int     `json:"cap"`
	Failed          int     `json:"failed"`
	FirstError      string  `json:"first_error,omitempty"`
	WallSeconds     float64 `json:"wall_seconds"` // first start request → last result
	// BusySeconds is the provider's busy span: the first submission accepted → the last solve.
	BusySeconds   float64 `json:"busy_seconds"`
	IdealSeconds  float64 `json:"ideal_seconds"` // ⌈tasks / cap⌉ × solve
	BusyToIdeal   float64 `json:"busy_to_ideal"`
	NoSlot        int64   `json:"no_slot"`
	NoSlotPerTask float64 `json:"no_slot_per_task"`
	PeakInUse     int     `json:"peak_in_use"`
}

// admissionBatches runs the big and the small batch with the stack's worker (PROVIDER_THREADS as the run's
// -worker-env says: unset unless given) and with a worker of its own with PROVIDER_THREADS = the cap.
func (b *bench) admissionBatches(ctx context.Context, res *AdmissionResult) error {
	var err error
	for _, batch := range []struct {
		tasks, cap int
		unset, set *BatchFigures
	}{{bigTasks, bigCap, &res.BigUnset, &res.BigSet}, {smallTasks, smallCap, &res.SmallUnset, &res.SmallSet}} {
		if *batch.unset, err = b.cappedBatch(ctx, b.taskQueue, b.mainThreads(), batch.tasks, batch.cap); err != nil {
			return err
		}
		queue := fmt.Sprintf("%s-threads-%d", b.taskQueue, batch.cap)
		w, err := b.st.StartExtraWorker(ctx, fmt.Sprintf("worker-threads-%d", batch.cap), "",
			map[string]string{"TASK_QUEUE": queue, "PROVIDER_THREADS": strconv.Itoa(batch.cap)})
		if err != nil {
			return fmt.Errorf("starting a worker with PROVIDER_THREADS=%d: %w", batch.cap, err)
		}
		*batch.set, err = b.cappedBatch(ctx, queue, strconv.Itoa(batch.cap), batch.tasks, batch.cap)
		_ = w.Stop()
		if err != nil {
			return err
		}
	}
	if res.BigUnset.WallSeconds > 0 {
		res.BigRatio = round2(res.BigSet.WallSeconds / res.BigUnset.WallSeconds)
	}
	return nil
}

func (b *bench) mainThreads() string {
	if v, ok := b.cfg.workerEnv["PROVIDER_THREADS"]; ok {
		return v
	}
	return "unset"
}

// cappedBatch starts tasks SolveCaptcha tasks at once on queue against a provider capped at cap threads.
func (b *bench) cappedBatch(ctx context.Context, queue, threads string, tasks, cap int) (BatchFigures, error) {
	f := BatchFigures{ProviderThreads: threads, Tasks: tasks, Cap: cap,
		IdealSeconds: float64(ceilDiv(tasks, cap)) * batchSolve.Seconds()}
	if err := b.sim.waitIdle(ctx, 30*time.Second); err != nil {
		return f, err
	}
	if err := b.sim.setThreads(ctx, cap); err != nil {
		return f, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.sim.setThreads(rctx, 0); err != nil {
			log.Printf("admission: restoring the simulator's thread cap: %v", err)
		}
	}()
	before, err := b.sim.stats(ctx)
	if err != nil {
		return f, err
	}
	prefix := fmt.Sprintf("bench-%s-batch-%d-%s-", b.runID, tasks, threads)
	in := solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(int(batchSolve.Milliseconds()))})
	in.CallbackTimeoutSeconds = batchCallbackTimeout
	runs := drive(ctx, ids(prefix, 0, tasks), tasks, b.runOn(queue, in))
	after, err := b.sim.stats(ctx)
	if err != nil {
		return f, err
	}
	b.batchFigures(ctx, &f, runs, before, after, prefix)
	log.Printf("admission: %d tasks, %d threads, PROVIDER_THREADS %s: wall %.1f s, provider busy %.1f s (%.2f × ideal), %d no-slot, peak %d",
		tasks, cap, threads, f.WallSeconds, f.BusySeconds, f.BusyToIdeal, f.NoSlot, f.PeakInUse)
	return f, nil
}

func (b *bench) batchFigures(ctx context.Context, f *BatchFigures, runs []taskRun, before, after sim.Stats, prefix string) {
	var firstErr error
	if f.Failed, firstErr = failures(runs); firstErr != nil {
		f.FirstError = firstErr.Error()
	}
	f.WallSeconds = round2(span(runs).Seconds())
	f.NoSlot = after.Threads.NoSlot - before.Threads.NoSlot
	f.NoSlotPerTask = round3(float64(f.NoSlot) / float64(f.Tasks))
	f.PeakInUse = after.Threads.PeakInUse
	tasks, err := b.sim.tasksByWorkflow(ctx, prefix)
	if err != nil {
		log.Printf("admission: the simulator's tasks: %v", err)
		return
	}
	var first, last time.Time
	for _, ts := range tasks {
		for _, t := range ts {
			if first.IsZero() || t.SubmittedAt.Before(first) {
				first = t.SubmittedAt
			}
			if t.SolvedAt != nil && t.SolvedAt.After(last) {
				last = *t.SolvedAt
			}
		}
	}
	if !first.IsZero() && last.After(first) {
		f.BusySeconds = round2(last.Sub(first).Seconds())
		f.BusyToIdeal = round2(f.BusySeconds / f.IdealSeconds)
	}
}

// runOn starts a task on queue and waits for its result.
func (b *bench) runOn(queue string, in captchaflow.Input) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		_, err := captchaflow.Solve(ctx, b.c, id, in, captchaflow.StartOptions{TaskQueue: queue})
		return err
	}
}

// admissionRows are the admission phase's rows in the measures table.
func (m *markdown) admissionRows(r *Results) {
	a := r.Admission
	if a == nil {
		return
	}
	for _, f := range []BatchFigures{a.BigUnset, a.BigSet, a.SmallUnset, a.SmallSet} {
		if f.Tasks == 0 {
			continue // not run
		}
		c := fmt.Sprintf("admission batch, %d tasks, %d provider threads, %.0f s solves, PROVIDER_THREADS %s", f.Tasks, f.Cap,
			batchSolve.Seconds(), f.ProviderThreads)
		m.p("| %s: wall s; provider busy s (× ideal %.0f s); no-slot answers (per task); peak in use; failed | %.1f; %.1f (%.2f ×); %d (%.3f); %d; %d | | |\n",
			c, f.IdealSeconds, f.WallSeconds, f.BusySeconds, f.BusyToIdeal, f.NoSlot, f.NoSlotPerTask, f.PeakInUse, f.Failed)
	}
}

// admissionTargets: the figures for the batches.
func admissionTargets(r *Results) []Target {
	a := r.Admission
	if a == nil || a.BigUnset.Tasks == 0 {
		return nil
	}
	return []Target{{
		Name:     fmt.Sprintf("batch time, %d tasks, %d threads: PROVIDER_THREADS=%d over unset", bigTasks, bigCap, bigCap),
		Want:     fmt.Sprintf("≤ %.1f ×", maxBigBatchRatio),
		Got:      fmt.Sprintf("%.2f × (%.1f s vs %.1f s)", a.BigRatio, a.BigSet.WallSeconds, a.BigUnset.WallSeconds),
		Met:      a.BigSet.Failed == 0 && a.BigUnset.Failed == 0 && a.BigRatio <= maxBigBatchRatio,
		Measured: true,
	}, {
		Name:     fmt.Sprintf("no-slot answers per task, %d tasks, %d threads, PROVIDER_THREADS=%d", smallTasks, smallCap, smallCap),
		Want:     fmt.Sprintf("≤ %.2f", maxSmallNoSlot),
		Got:      fmt.Sprintf("%.3f (%d; unset: %d)", a.SmallSet.NoSlotPerTask, a.SmallSet.NoSlot, a.SmallUnset.NoSlot),
		Met:      a.SmallSet.Failed == 0 && a.SmallSet.NoSlotPerTask <= maxSmallNoSlot,
		Measured: true,
	}, {
		Name:     fmt.Sprintf("provider busy span, %d tasks, %d threads, PROVIDER_THREADS=%d", smallTasks, smallCap, smallCap),
		Want:     fmt.Sprintf("≤ %.1f × ideal (%.0f s)", maxSmallBusyIdeal, a.SmallSet.IdealSeconds),
		Got:      fmt.Sprintf("%.1f s = %.2f × (unset: %.2f ×)", a.SmallSet.BusySeconds, a.SmallSet.BusyToIdeal, a.SmallUnset.BusyToIdeal),
		Met:      a.SmallSet.Failed == 0 && a.SmallSet.BusyToIdeal > 0 && a.SmallSet.BusyToIdeal <= maxSmallBusyIdeal,
		Measured: true,
	}}
}
