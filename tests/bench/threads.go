package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// The threads phase: a provider capped at threadsCap threads per key, threadsTasks tasks started at once, each
// solved threadsSolve after it is accepted. The targets: no-slot answers per task and the batch's wall time
// against the ideal ⌈tasks / cap⌉ × solve.
const (
	threadsCap   = 4
	threadsTasks = 24
	threadsSolve = 2 * time.Second

	maxNoSlotPerTask  = 0.5
	maxThreadsWallIdl = 1.5
)

// ThreadsResult is the threads phase.
type ThreadsResult struct {
	Tasks   int `json:"tasks"`
	Threads int `json:"threads"` // the simulator's cap per key
	SolveMS int `json:"solve_ms"`
	// ProviderThreads is the worker's PROVIDER_THREADS (-worker-env), "unset" when not given.
	ProviderThreads string  `json:"provider_threads"`
	Failed          int     `json:"failed"`
	FirstError      string  `json:"first_error,omitempty"`
	WallSeconds     float64 `json:"wall_seconds"`  // first start request → last result
	IdealSeconds    float64 `json:"ideal_seconds"` // ⌈tasks / threads⌉ × solve
	WallToIdeal     float64 `json:"wall_to_ideal"`
	// NoSlot counts the in.php requests the simulator refused for no free thread during the phase.
	NoSlot        int64   `json:"no_slot"`
	NoSlotPerTask float64 `json:"no_slot_per_task"`
	// PeakInUse is the most tasks the key had being solved at once (must not exceed Threads).
	PeakInUse int `json:"peak_in_use"`
	// SubmitAttempts are the Submit activity's attempts per task from the histories (1 = accepted at once).
	SubmitAttempts Dist    `json:"submit_attempts"`
	InPHPPerTask   float64 `json:"in_php_accepted_per_task"`
	// ActionsPerTask is the mean Temporal Cloud billable actions per task (countActions): each busy answer is an
	// activity retry, one action.
	ActionsPerTask float64 `json:"actions_per_task"`
	StartToResult  Dist    `json:"start_to_result"`
}

// threads runs the threads phase. It needs the provider to itself: the poll-path tasks must be done and the
// waiting phase not started (its tasks hold threads for hours).
func (b *bench) threads(ctx context.Context) (*ThreadsResult, error) {
	tr := &ThreadsResult{Tasks: threadsTasks, Threads: threadsCap, SolveMS: int(threadsSolve.Milliseconds()),
		ProviderThreads: "unset"}
	if v, ok := b.cfg.workerEnv["PROVIDER_THREADS"]; ok {
		tr.ProviderThreads = v
	}
	tr.IdealSeconds = float64(ceilDiv(threadsTasks, threadsCap)) * threadsSolve.Seconds()
	if err := b.sim.waitIdle(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	if err := b.sim.setThreads(ctx, threadsCap); err != nil {
		return nil, err
	}
	defer func() {
		// Back to unlimited for the phases after this one, even when this one failed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.sim.setThreads(rctx, 0); err != nil {
			log.Printf("threads: restoring the simulator's thread cap: %v", err)
		}
	}()
	before, err := b.sim.stats(ctx)
	if err != nil {
		return nil, err
	}
	log.Printf("threads: %d tasks at once against %d provider threads, %s solves (PROVIDER_THREADS %s)",
		threadsTasks, threadsCap, threadsSolve, tr.ProviderThreads)
	prefix := fmt.Sprintf("bench-%s-threads-", b.runID)
	in := solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(tr.SolveMS)})
	runs := drive(ctx, ids(prefix, 0, threadsTasks), threadsTasks, b.runOurs(in, nil))
	after, err := b.sim.stats(ctx)
	if err != nil {
		return nil, err
	}
	b.summarizeThreads(ctx, tr, runs, before, after, prefix)
	log.Printf("threads: wall %.1f s (ideal %.0f s, %.2f ×), %d no-slot answers (%.2f per task), peak %d threads in use",
		tr.WallSeconds, tr.IdealSeconds, tr.WallToIdeal, tr.NoSlot, tr.NoSlotPerTask, tr.PeakInUse)
	return tr, nil
}

func (b *bench) summarizeThreads(ctx context.Context, tr *ThreadsResult, runs []taskRun, before, after sim.Stats, prefix string) {
	var firstErr error
	tr.Failed, firstErr = failures(runs)
	if firstErr != nil {
		tr.FirstError = firstErr.Error()
	}
	tr.WallSeconds = round2(span(runs).Seconds())
	tr.WallToIdeal = round2(tr.WallSeconds / tr.IdealSeconds)
	tr.NoSlot = after.Threads.NoSlot - before.Threads.NoSlot
	tr.NoSlotPerTask = round3(float64(tr.NoSlot) / float64(threadsTasks))
	tr.PeakInUse = after.Threads.PeakInUse
	var start, attempts []float64
	actions := 0
	for _, r := range runs {
		if r.Err == nil {
			start = append(start, ms(r.End.Sub(r.Start)))
		}
		events, err := b.fullHistory(ctx, r.ID)
		if err != nil {
			log.Printf("threads: history of %s: %v", r.ID, err)
			continue
		}
		attempts = append(attempts, float64(activityAttempts(events)[submitActivity]))
		actions += countActions(events).Total
	}
	if len(attempts) > 0 {
		tr.ActionsPerTask = round2(float64(actions) / float64(len(attempts)))
	}
	tr.StartToResult = summarize(start)
	tr.SubmitAttempts = summarize(attempts) // counts, not ms: the Dist's _ms names are its only unit
	if tasks, err := b.sim.tasksByWorkflow(ctx, prefix); err == nil {
		n := 0
		for _, ts := range tasks {
			n += len(ts)
		}
		tr.InPHPPerTask = round3(float64(n) / float64(threadsTasks))
	}
}

// stats reads /_sim/stats.
func (s *simClient) stats(ctx context.Context) (sim.Stats, error) {
	var st sim.Stats
	err := s.get(ctx, "/_sim/stats", &st)
	return st, err
}

// setThreads sets the simulator's thread cap per key (0 = unlimited).
func (s *simClient) setThreads(ctx context.Context, n int) error {
	return s.put(ctx, "/_sim/threads", sim.ThreadLimit{Threads: n})
}

// put PUTs v as JSON to the simulator's control path and wants 200.
func (s *simClient) put(ctx context.Context, path string, v any) error {
	body, _ := json.Marshal(v)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: HTTP %d", path, resp.StatusCode)
	}
	return nil
}

// waitIdle waits until no task is being solved, so that a capped phase starts with every thread free.
func (s *simClient) waitIdle(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		st, err := s.stats(ctx)
		if err != nil {
			return err
		}
		if st.Threads.InUse == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the simulator still has %d tasks being solved after %s", st.Threads.InUse, bound)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// threadsRows are the threads phase's rows in the measures table.
func (m *markdown) threadsRows(r *Results) {
	t := r.Threads
	if t == nil {
		return
	}
	c := fmt.Sprintf("threads (%d tasks at once, %d provider threads, %.0f s solves, PROVIDER_THREADS %s)", t.Tasks, t.Threads, float64(t.SolveMS)/1000, t.ProviderThreads)
	m.p("| %s: batch wall time, s (ideal ⌈%d/%d⌉ × %.0f s = %.0f s) | %.1f (%.2f × ideal) | | |\n", c, t.Tasks, t.Threads,
		float64(t.SolveMS)/1000, t.IdealSeconds, t.WallSeconds, t.WallToIdeal)
	m.p("| %s: ERROR_NO_SLOT_AVAILABLE answers, total / per task | %d / %.2f | | |\n", c, t.NoSlot, t.NoSlotPerTask)
	m.p("| %s: Submit attempts per task, mean / max; peak threads in use | %.2f / %.0f; %d | | |\n", c, t.SubmitAttempts.Mean, t.SubmitAttempts.Max, t.PeakInUse)
	m.p("| %s: billable actions per task (each busy answer is an activity retry) | %.2f | | |\n", c, t.ActionsPerTask)
	m.p("| %s: start → result p50 / p95 / max, ms | %s / %s / %s | | |\n", c, num(t.StartToResult.P50), num(t.StartToResult.P95), num(t.StartToResult.Max))
	if t.Failed > 0 {
		m.p("| %s: failed | %d (%s) | | |\n", c, t.Failed, t.FirstError)
	}
}

// threadsTargets: the two targets for the threads phase.
func threadsTargets(r *Results) []Target {
	t := r.Threads
	if t == nil {
		return nil
	}
	cond := fmt.Sprintf(" (%d tasks, %d threads, PROVIDER_THREADS %s)", t.Tasks, t.Threads, t.ProviderThreads)
	return []Target{{
		Name:     "ERROR_NO_SLOT_AVAILABLE answers per task" + cond,
		Want:     fmt.Sprintf("≤ %.1f", maxNoSlotPerTask),
		Got:      fmt.Sprintf("%.2f (%d answers)", t.NoSlotPerTask, t.NoSlot),
		Met:      t.Failed == 0 && t.NoSlotPerTask <= maxNoSlotPerTask,
		Measured: true,
	}, {
		Name:     "batch wall time" + cond,
		Want:     fmt.Sprintf("≤ %.1f × ideal (⌈%d/%d⌉ × %.0f s = %.0f s)", maxThreadsWallIdl, t.Tasks, t.Threads, float64(t.SolveMS)/1000, t.IdealSeconds),
		Got:      fmt.Sprintf("%.1f s = %.2f × ideal", t.WallSeconds, t.WallToIdeal),
		Met:      t.Failed == 0 && t.WallToIdeal <= maxThreadsWallIdl,
		Measured: true,
	}}
}
