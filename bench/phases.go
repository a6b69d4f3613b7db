package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/batch/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
	workerconfig "github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/simulator/sim"
)

// The poll path and recovery use short, whole-second timeouts so that they fit in the run.
const (
	pollCallbackTimeout = 1 // seconds
	pollInterval        = 1 // seconds
)

// droppedInput is a task whose pingback the simulator drops, solved after solveMS.
func droppedInput(solveMS int) captchaflow.Input {
	in := solveInput(map[string]string{"sim_fault": "drop_pingback", "sim_solve_ms": strconv.Itoa(solveMS)})
	in.CallbackTimeoutSeconds = pollCallbackTimeout
	in.PollIntervalSeconds = pollInterval
	in.DeadlineSeconds = 600
	return in
}

// pollPath runs one task per -polls entry k: pingback dropped, solved k−1 poll intervals after the callback
// timeout, so that it takes exactly k res.php requests and its history should not depend on k.
func (b *bench) pollPath(ctx context.Context) []PollPathResult {
	out := make([]PollPathResult, len(b.cfg.polls))
	var wg sync.WaitGroup
	for i, k := range b.cfg.polls {
		wg.Go(func() {
			solveMS := (pollCallbackTimeout + (k-1)*pollInterval) * 1000
			r := PollPathResult{
				Polls:       k,
				SolveMS:     solveMS,
				WorkflowID:  fmt.Sprintf("bench-%s-poll-%d", b.runID, k),
				ResPHPBound: 1 + ceilDiv(solveMS-pollCallbackTimeout*1000, pollInterval*1000),
			}
			tctx, cancel := context.WithTimeout(ctx, time.Duration(solveMS)*time.Millisecond+2*time.Minute)
			defer cancel()
			start := time.Now()
			res, err := captchaflow.Solve(tctx, b.c, r.WorkflowID, droppedInput(solveMS), captchaflow.StartOptions{TaskQueue: b.taskQueue})
			end := time.Now()
			r.Seconds = round2(end.Sub(start).Seconds())
			if err != nil {
				r.Err = err.Error()
				out[i] = r
				return
			}
			r.Via = string(res.Via)
			if events, err := b.history(ctx, r.WorkflowID); err != nil {
				r.Err = "history: " + err.Error()
			} else {
				r.HistoryEvents = len(events)
				if fired, ok := eventTime(events, enums.EVENT_TYPE_TIMER_FIRED); ok {
					r.TimerToResult = round2(ms(end.Sub(fired)))
				}
			}
			if tasks, err := b.sim.tasksByWorkflow(ctx, r.WorkflowID); err != nil {
				r.Err = "simulator: " + err.Error()
			} else {
				ts := tasks[r.WorkflowID]
				r.InPHP = len(ts)
				for _, t := range ts {
					r.ResPHP += t.ResGetCount
				}
			}
			log.Printf("poll path, %d poll(s): %s in %.1fs, %d history events, %d res.php requests", k, r.Via, r.Seconds, r.HistoryEvents, r.ResPHP)
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// recovery runs tasks solved at once whose pingback is dropped: the result must come from the first poll after
// the callback timer fires.
func (b *bench) recovery(ctx context.Context) (*RecoveryResult, error) {
	n := b.cfg.recoveryTasks
	log.Printf("recovery: %d tasks with a dropped pingback", n)
	prefix := fmt.Sprintf("bench-%s-recovery-", b.runID)
	in := droppedInput(0)
	runs := drive(ctx, ids(prefix, 0, n), n, b.runOurs(in, nil))
	rr := &RecoveryResult{Tasks: n, CallbackTimeoutSeconds: pollCallbackTimeout, PollIntervalSeconds: pollInterval}
	var firstErr error
	rr.Failed, firstErr = failures(runs)
	if firstErr != nil {
		rr.FirstError = firstErr.Error()
	}
	tasks, err := b.sim.tasksByWorkflow(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the simulator's tasks: %w", err)
	}
	var timerTo, dropTo []float64
	var resPHP int64
	for _, r := range runs {
		if r.Err != nil {
			continue
		}
		ts := tasks[r.ID]
		for _, t := range ts {
			resPHP += t.ResGetCount
		}
		if len(ts) > 0 {
			if at, outcome, ok := firstPingback(ts[len(ts)-1]); ok && outcome == sim.OutcomeDropped {
				dropTo = append(dropTo, ms(r.End.Sub(at)))
			}
		}
		events, err := b.history(ctx, r.ID)
		if err != nil {
			log.Printf("history of %s: %v", r.ID, err)
			continue
		}
		if fired, ok := eventTime(events, enums.EVENT_TYPE_TIMER_FIRED); ok {
			timerTo = append(timerTo, ms(r.End.Sub(fired)))
		}
	}
	rr.TimerToResult = summarize(timerTo)
	rr.DropToResult = summarize(dropTo)
	rr.ResPHPPerTask = round3(float64(resPHP) / float64(max(n-rr.Failed, 1)))
	rr.HistoryEvents = b.historyStats(ctx, sampleIDs(runs, n))
	log.Printf("recovery: dropped pingback→result p50 %.0f ms, max %.0f ms; timer→result p50 %.0f ms, max %.0f ms",
		rr.DropToResult.P50, rr.DropToResult.Max, rr.TimerToResult.P50, rr.TimerToResult.Max)
	return rr, nil
}

func eventTime(events []historyEvent, t enums.EventType) (time.Time, bool) {
	for _, e := range events {
		if e.Type == t {
			return e.At, true
		}
	}
	return time.Time{}, false
}

func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// waitingMemory parks tasks waiting for their callback (solve and callback timeout far beyond the run) at each
// level and reads the worker's memory. The worker is restarted first so the figures do not carry the heap of the
// throughput runs.
func (b *bench) waitingMemory(ctx context.Context) (*WaitingResult, error) {
	wr := &WaitingResult{StickyCacheSize: fmt.Sprintf("worker default (%d)", workerconfig.DefaultStickyCacheSize)}
	if v, ok := b.cfg.workerEnv["WORKER_STICKY_CACHE_SIZE"]; ok {
		wr.StickyCacheSize = v
	}
	log.Print("memory: restarting the worker for a clean heap")
	if err := b.st.RestartWorker(ctx); err != nil {
		return nil, err
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	var err error
	if wr.Baseline, err = b.memory(ctx); err != nil {
		return nil, err
	}
	log.Printf("memory: idle worker RSS %.0f MiB, heap in use %.0f MiB", wr.Baseline.RSSMiB, wr.Baseline.HeapInuseMiB)

	in := solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(int((3 * time.Hour).Milliseconds()))})
	in.CallbackTimeoutSeconds = 2 * 60 * 60
	in.DeadlineSeconds = 3 * 60 * 60
	prefix := fmt.Sprintf("bench-%s-waiting-", b.runID)
	query := fmt.Sprintf("TaskQueue = %q AND %s = %q AND ExecutionStatus = \"Running\"",
		b.taskQueue, captchaflow.PhaseKey.GetName(), captchaflow.PhaseAwaitingCallback)
	if b.cfg.temporalAddress != "" {
		defer b.terminateWaiting()
	}
	phaseDeadline := time.Now().Add(b.cfg.waitBudget)
	started := 0
	for _, level := range b.cfg.waiting {
		ws := WaitingSize{Tasks: level}
		t0 := time.Now()
		// Starts stop at the phase's deadline; the level is then measured where it got to.
		startCtx, cancelStarts := context.WithDeadline(ctx, phaseDeadline)
		runs := drive(startCtx, ids(prefix, started, level), b.cfg.startConcurrency, func(ctx context.Context, id string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err := captchaflow.Start(ctx, b.c, id, in, captchaflow.StartOptions{TaskQueue: b.taskQueue})
			return err
		})
		cancelStarts()
		ws.Failed, _ = failures(runs)
		started = level
		want := started - totalFailed(wr.Sizes) - ws.Failed
		log.Printf("memory: %d tasks started in %.0fs (%d not started); waiting until they all wait for their callback",
			level-ws.Failed, time.Since(t0).Seconds(), ws.Failed)
		lastLog := time.Now()
		for {
			n, err := b.count(ctx, query)
			if err != nil {
				log.Printf("memory: counting waiting tasks: %v", err)
			}
			ws.Reached = n
			if n >= want || time.Now().After(phaseDeadline) {
				break
			}
			if time.Since(lastLog) > 15*time.Second {
				log.Printf("memory: %d/%d waiting", n, level)
				lastLog = time.Now()
			}
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
		}
		ws.StartSeconds = round2(time.Since(t0).Seconds())
		ws.StartRate = round2(float64(ws.Reached-prevReached(wr.Sizes)) / ws.StartSeconds)
		if ws.Reached < level {
			log.Printf("memory: %d of %d tasks waiting when the phase's budget (-waiting-budget %s) ran out", ws.Reached, level, b.cfg.waitBudget)
		}
		// Let the last workflow tasks and GC settle before reading.
		if err := sleep(ctx, 5*time.Second); err != nil {
			return nil, err
		}
		if ws.Memory, err = b.memory(ctx); err != nil {
			return nil, err
		}
		log.Printf("memory: %d waiting: worker RSS %.0f MiB, heap in use %.0f MiB, %0.f goroutines (%.0f tasks/s to park)",
			ws.Reached, ws.Memory.RSSMiB, ws.Memory.HeapInuseMiB, ws.Memory.Goroutines, ws.StartRate)
		if ws.Reached < level {
			ws.Extrapolated = extrapolate(wr.Baseline, wr.Sizes, ws)
		}
		wr.Sizes = append(wr.Sizes, ws)
		if time.Now().After(phaseDeadline) {
			break
		}
	}
	return wr, nil
}

func totalFailed(sizes []WaitingSize) int {
	n := 0
	for _, s := range sizes {
		n += s.Failed
	}
	return n
}

func prevReached(sizes []WaitingSize) int {
	if len(sizes) == 0 {
		return 0
	}
	return sizes[len(sizes)-1].Reached
}

// extrapolate estimates the memory at ws.Tasks waiting tasks from the last two measured points (the level
// before, or the idle worker), assuming the cost per waiting task stays what it was between them.
func extrapolate(baseline MemorySample, before []WaitingSize, ws WaitingSize) *MemorySample {
	from, fromN := baseline, 0
	if len(before) > 0 {
		from, fromN = before[len(before)-1].Memory, before[len(before)-1].Reached
	}
	if ws.Reached <= fromN {
		return nil
	}
	k := float64(ws.Tasks-ws.Reached) / float64(ws.Reached-fromN)
	return &MemorySample{
		RSSMiB:       round2(ws.Memory.RSSMiB + k*(ws.Memory.RSSMiB-from.RSSMiB)),
		HeapInuseMiB: round2(ws.Memory.HeapInuseMiB + k*(ws.Memory.HeapInuseMiB-from.HeapInuseMiB)),
		Goroutines:   math.Round(ws.Memory.Goroutines + k*(ws.Memory.Goroutines-from.Goroutines)),
	}
}

func (b *bench) memory(ctx context.Context) (MemorySample, error) {
	m, err := scrapeMetrics(ctx, b.st.WorkerMetricsURL()+"/metrics",
		"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "go_goroutines")
	if err != nil {
		return MemorySample{}, err
	}
	return MemorySample{
		RSSMiB:       round2(m["process_resident_memory_bytes"] / (1 << 20)),
		HeapInuseMiB: round2(m["go_memstats_heap_inuse_bytes"] / (1 << 20)),
		Goroutines:   m["go_goroutines"],
	}, nil
}

func (b *bench) count(ctx context.Context, query string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := b.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: b.st.Namespace(),
		Query:     query,
	})
	if err != nil {
		return 0, err
	}
	return int(resp.GetCount()), nil
}

// terminateWaiting ends the parked tasks on an external server with one batch job (the dev server's data goes
// with its directory).
func (b *bench) terminateWaiting() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.c.WorkflowService().StartBatchOperation(ctx, &workflowservice.StartBatchOperationRequest{
		Namespace:       b.st.Namespace(),
		JobId:           uuid.NewString(),
		Reason:          "captchaflow bench: parked tasks of the memory phase",
		VisibilityQuery: fmt.Sprintf("TaskQueue = %q AND ExecutionStatus = \"Running\"", b.taskQueue),
		Operation: &workflowservice.StartBatchOperationRequest_TerminationOperation{
			TerminationOperation: &batch.BatchOperationTermination{},
		},
	})
	if err != nil {
		log.Printf("memory: batch-terminating the parked tasks: %v (terminate them with: temporal workflow terminate --query 'TaskQueue=%q')", err, b.taskQueue)
		return
	}
	log.Print("memory: batch termination of the parked tasks started")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
