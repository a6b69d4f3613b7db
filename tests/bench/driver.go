package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/bench/twin"
)

// taskRun is one task as the driver saw it: from just before the start request to the result in hand.
type taskRun struct {
	ID    string
	Start time.Time
	End   time.Time
	Err   error
}

// drive runs one task per id with c of them in flight at any time; fn starts the task and waits for its result.
// It returns when every task has ended (fn must be bounded, e.g. by ctx).
func drive(ctx context.Context, ids []string, c int, fn func(ctx context.Context, id string) error) []taskRun {
	runs := make([]taskRun, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c, len(ids)) {
		wg.Go(func() {
			for i := range next {
				r := taskRun{ID: ids[i], Start: time.Now()}
				r.Err = fn(ctx, ids[i])
				r.End = time.Now()
				runs[i] = r
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return runs
}

// span is the wall time from the first start to the last result.
func span(runs []taskRun) time.Duration {
	if len(runs) == 0 {
		return 0
	}
	first, last := runs[0].Start, runs[0].End
	for _, r := range runs {
		if r.Start.Before(first) {
			first = r.Start
		}
		if r.End.After(last) {
			last = r.End
		}
	}
	return last.Sub(first)
}

func failures(runs []taskRun) (n int, first error) {
	for _, r := range runs {
		if r.Err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", r.ID, r.Err)
			}
			n++
		}
	}
	return n, first
}

func ids(prefix string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%06d", prefix, i))
	}
	return out
}

// taskTimeout bounds one task in the throughput runs; the callback timer (120 s) fails a lost one first.
const taskTimeout = 3 * time.Minute

// solveInput is a task the simulator solves at once (its SIM_SOLVE_* are 0) with the default timeouts.
func solveInput(extra map[string]string) captchaflow.Input {
	params := captchaflow.Params{"sitekey": "0x4AAAAAAABench", "pageurl": "https://bench.example/login"}
	for k, v := range extra {
		params[k] = v
	}
	return captchaflow.Input{Method: "turnstile", Params: params}
}

// runOurs starts SolveCaptcha for id on the stack's worker and waits for its result.
func (b *bench) runOurs(in captchaflow.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return b.runOursOn(b.taskQueue, in, results)
}

// runOursOn starts SolveCaptcha for id on queue and waits for its result.
func (b *bench) runOursOn(queue string, in captchaflow.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return runOursWith(b.c, queue, in, results)
}

// oursFor starts sc's tasks on its queue, through the codec's client in the encrypted scenarios (their inputs
// encrypted, their results decrypted, as a caller with the key does).
func (b *bench) oursFor(sc scenario, results *sync.Map) func(ctx context.Context, id string) error {
	c := b.c
	if sc.Name == scenarioEncrypted {
		c = b.enc
	}
	return runOursWith(c, sc.Queue, sc.OursInput, results)
}

// runOursWith starts SolveCaptcha for id on queue through c and waits for its result.
func runOursWith(c client.Client, queue string, in captchaflow.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		res, err := captchaflow.Solve(ctx, c, id, in, captchaflow.StartOptions{TaskQueue: queue})
		if err == nil && results != nil {
			results.Store(id, res)
		}
		return err
	}
}

// runTwin starts the twin for id and waits for its result.
func (b *bench) runTwin(in twin.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		run, err := b.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: b.twinQueue},
			twin.WorkflowType, in)
		if err != nil {
			return err
		}
		var res twin.Result
		if err := run.Get(ctx, &res); err != nil {
			return err
		}
		if results != nil {
			results.Store(id, res)
		}
		return nil
	}
}
