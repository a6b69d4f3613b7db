package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
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
	// The token age at delivery with the default timeouts (tokenage.go, about two minutes) runs alongside.
	wg.Go(func() { b.tokenAge(ctx) })
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

func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
