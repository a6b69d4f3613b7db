package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
)

// outcome is how one demo task ended; nil in the tracker while it runs.
type outcome struct {
	Result captchaflow.Result
	// FailReason is the failure's type (e.g. Unsolvable) or message; empty on success.
	FailReason string
}

// tracker follows the batch's workflows to their end.
type tracker struct {
	mu       sync.Mutex
	tasks    []demoTask
	outcomes map[string]*outcome
	startErr map[string]error
	wg       sync.WaitGroup
}

func newTracker(tasks []demoTask) *tracker {
	return &tracker{tasks: tasks, outcomes: map[string]*outcome{}, startErr: map[string]error{}}
}

// watch waits (in the background) for run's result.
func (t *tracker) watch(ctx context.Context, task demoTask, run client.WorkflowRun) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		var res captchaflow.Result
		err := run.Get(ctx, &res)
		if ctx.Err() != nil {
			return // stopped watching; the task's end is unknown, not a failure
		}
		o := &outcome{Result: res}
		if err != nil {
			o.FailReason = failReason(err)
		}
		t.mu.Lock()
		t.outcomes[task.ID] = o
		t.mu.Unlock()
	}()
}

// startFailed records tasks that could not be started.
func (t *tracker) startFailed(tasks []demoTask, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, task := range tasks {
		t.startErr[task.ID] = err
	}
}

// awaitFinished waits until every one of tasks has ended (or could not start), or ctx ends.
func (t *tracker) awaitFinished(ctx context.Context, tasks []demoTask) error {
	for {
		t.mu.Lock()
		left := 0
		for _, task := range tasks {
			_, failed := t.startErr[task.ID]
			if t.outcomes[task.ID] == nil && !failed {
				left++
			}
		}
		t.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d tasks still running: %w", left, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// failReason is the typed reason a caller would branch on, else the message.
func failReason(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return appErr.Type()
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return "workflow timeout"
	}
	var canceledErr *temporal.CanceledError
	if errors.As(err, &canceledErr) {
		return "canceled"
	}
	var terminatedErr *temporal.TerminatedError
	if errors.As(err, &terminatedErr) {
		return "terminated"
	}
	return err.Error()
}

// tally counts the batch by state, overall and per scenario.
type tally struct {
	Total, Running, NotStarted          int
	Callback, Poll, Resubmitted, Failed int
}

func (c tally) finished() int { return c.Callback + c.Poll + c.Failed }

func (c *tally) add(o *outcome, notStarted bool) {
	c.Total++
	switch {
	case notStarted:
		c.NotStarted++
	case o == nil:
		c.Running++
	case o.FailReason != "":
		c.Failed++
	case o.Result.Via == captchaflow.ViaCallback:
		c.Callback++
	default:
		c.Poll++
	}
	if o != nil && o.FailReason == "" && o.Result.Submits > 1 {
		c.Resubmitted++
	}
}

// snapshot tallies the batch now: the total and one tally per scenario name.
func (t *tracker) snapshot() (tally, map[string]tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var total tally
	byScenario := map[string]tally{}
	for _, task := range t.tasks {
		o := t.outcomes[task.ID]
		_, notStarted := t.startErr[task.ID]
		total.add(o, notStarted)
		s := byScenario[task.Scenario.Name]
		s.add(o, notStarted)
		byScenario[task.Scenario.Name] = s
	}
	return total, byScenario
}

// results are the finished tasks' results by workflow ID (successful ones only).
func (t *tracker) results() map[string]captchaflow.Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]captchaflow.Result{}
	for id, o := range t.outcomes {
		if o.FailReason == "" {
			out[id] = o.Result
		}
	}
	return out
}

// failures lists failed tasks with their reasons, in batch order.
func (t *tracker) failures() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, task := range t.tasks {
		if err, ok := t.startErr[task.ID]; ok {
			out = append(out, fmt.Sprintf("%s (%s): not started: %v", task.ID, task.Scenario.Name, err))
		} else if o := t.outcomes[task.ID]; o != nil && o.FailReason != "" {
			out = append(out, fmt.Sprintf("%s (%s): %s", task.ID, task.Scenario.Name, o.FailReason))
		}
	}
	return out
}

// progressLine is the one-line state of the batch shown while it runs.
func progressLine(elapsedSeconds int, c tally) string {
	return fmt.Sprintf("  %3ds  running %3d | done %3d (callback %d, poll %d) | failed %d",
		elapsedSeconds, c.Running, c.Callback+c.Poll, c.Callback, c.Poll, c.Failed)
}
