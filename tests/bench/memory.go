package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/batch/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
	workerconfig "github.com/captchaflow/captchaflow/internal/config"
)

// waitingMemory parks tasks waiting for their callback (solve and callback timeout far beyond the run) at each
// level and reads the worker's memory. The worker is restarted first so the figures do not carry the heap of the
// throughput runs.
func (b *bench) waitingMemory(ctx context.Context) (*WaitingResult, error) {
	wr := &WaitingResult{StickyCacheSize: fmt.Sprintf("worker default (%d)", workerconfig.DefaultStickyCacheSize)}
	if v, ok := b.cfg.workerEnv["WORKER_STICKY_CACHE_SIZE"]; ok {
		wr.StickyCacheSize = v
	}
	var err error
	if wr.Baseline, err = b.idleMemory(ctx); err != nil {
		return nil, err
	}
	if b.cfg.temporalAddress != "" {
		defer b.terminateWaiting()
	}
	phase := b.newWaitingPhase()
	started := 0
	for _, level := range b.cfg.waiting {
		ws, err := b.waitingLevel(ctx, phase, wr, started, level)
		if err != nil {
			return nil, err
		}
		started = level
		wr.Sizes = append(wr.Sizes, ws)
		if time.Now().After(phase.deadline) {
			break
		}
	}
	return wr, nil
}

// idleMemory restarts the worker for a clean heap and reads its memory once it has settled.
func (b *bench) idleMemory(ctx context.Context) (MemorySample, error) {
	log.Print("memory: restarting the worker for a clean heap")
	if err := b.st.RestartWorker(ctx); err != nil {
		return MemorySample{}, err
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return MemorySample{}, err
	}
	m, err := b.memory(ctx)
	if err != nil {
		return MemorySample{}, err
	}
	log.Printf("memory: idle worker RSS %.0f MiB, heap in use %.0f MiB", m.RSSMiB, m.HeapInuseMiB)
	return m, nil
}

// waitingPhase is what every level of the memory phase shares.
type waitingPhase struct {
	in       captchaflow.Input
	prefix   string // of the parked tasks' workflow IDs
	query    string // counts the tasks waiting for their callback
	deadline time.Time
}

func (b *bench) newWaitingPhase() waitingPhase {
	in := solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(int((3 * time.Hour).Milliseconds()))})
	in.CallbackTimeoutSeconds = 2 * 60 * 60
	in.DeadlineSeconds = 3 * 60 * 60
	return waitingPhase{
		in:     in,
		prefix: fmt.Sprintf("bench-%s-waiting-", b.runID),
		query: fmt.Sprintf("TaskQueue = %q AND %s = %q AND ExecutionStatus = \"Running\"",
			b.taskQueue, captchaflow.PhaseKey.GetName(), captchaflow.PhaseAwaitingCallback),
		deadline: time.Now().Add(b.cfg.waitBudget),
	}
}

// waitingLevel starts tasks from started up to level, waits until they all wait for their callback (or the
// phase's budget runs out) and reads the worker's memory.
func (b *bench) waitingLevel(ctx context.Context, phase waitingPhase, wr *WaitingResult, started, level int) (WaitingSize, error) {
	ws := WaitingSize{Tasks: level}
	t0 := time.Now()
	ws.Failed = b.startWaiting(ctx, phase, started, level)
	want := level - totalFailed(wr.Sizes) - ws.Failed
	log.Printf("memory: %d tasks started in %.0fs (%d not started); waiting until they all wait for their callback",
		level-ws.Failed, time.Since(t0).Seconds(), ws.Failed)
	var err error
	if ws.Reached, err = b.awaitWaiting(ctx, phase, want, level); err != nil {
		return ws, err
	}
	ws.StartSeconds = round2(time.Since(t0).Seconds())
	ws.StartRate = round2(float64(ws.Reached-prevReached(wr.Sizes)) / ws.StartSeconds)
	if ws.Reached < level {
		log.Printf("memory: %d of %d tasks waiting when the phase's budget (-waiting-budget %s) ran out", ws.Reached, level, b.cfg.waitBudget)
	}
	// Let the last workflow tasks and GC settle before reading.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return ws, err
	}
	if ws.Memory, err = b.memory(ctx); err != nil {
		return ws, err
	}
	log.Printf("memory: %d waiting: worker RSS %.0f MiB, heap in use %.0f MiB, %0.f goroutines (%.0f tasks/s to park)",
		ws.Reached, ws.Memory.RSSMiB, ws.Memory.HeapInuseMiB, ws.Memory.Goroutines, ws.StartRate)
	if ws.Reached < level {
		ws.Extrapolated = extrapolate(wr.Baseline, wr.Sizes, ws)
	}
	return ws, nil
}

// startWaiting starts the tasks numbered from up to to and returns how many failed to start.
func (b *bench) startWaiting(ctx context.Context, phase waitingPhase, from, to int) int {
	// Starts stop at the phase's deadline; the level is then measured where it got to.
	startCtx, cancelStarts := context.WithDeadline(ctx, phase.deadline)
	defer cancelStarts()
	runs := drive(startCtx, ids(phase.prefix, from, to), b.cfg.startConcurrency, func(ctx context.Context, id string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := captchaflow.Start(ctx, b.c, id, phase.in, captchaflow.StartOptions{TaskQueue: b.taskQueue})
		return err
	})
	failed, _ := failures(runs)
	return failed
}

// awaitWaiting polls the count of tasks waiting for their callback until it reaches want or the phase's
// deadline passes, and returns the last count.
func (b *bench) awaitWaiting(ctx context.Context, phase waitingPhase, want, level int) (int, error) {
	lastLog := time.Now()
	for {
		n, err := b.count(ctx, phase.query)
		if err != nil {
			log.Printf("memory: counting waiting tasks: %v", err)
		}
		if n >= want || time.Now().After(phase.deadline) {
			return n, nil
		}
		if time.Since(lastLog) > 15*time.Second {
			log.Printf("memory: %d/%d waiting", n, level)
			lastLog = time.Now()
		}
		if err := sleep(ctx, time.Second); err != nil {
			return n, err
		}
	}
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
