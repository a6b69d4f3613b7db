package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
)

// The provider-threads plan is one stated value per task queue, held by the task queue's semaphore: every worker
// of the queue must say the same PROVIDER_THREADS, and only `worker -set-provider-threads N` changes it.

// checkThreadsPlan refuses, before the worker starts, a PROVIDER_THREADS that disagrees with the plan of the task
// queue's running semaphore (read from its memo: no worker needed). Unset disagrees with any plan but a retired one
// (0): its tasks would submit beside the plan.
func checkThreadsPlan(ctx context.Context, c client.Client, taskQueue string, threads int) error {
	plan, running, err := activities.RunningThreadsPlan(ctx, c, taskQueue)
	if err != nil {
		return fmt.Errorf("reading the provider-threads plan of task queue %s: %w", taskQueue, err)
	}
	if !running || plan == threads {
		return nil
	}
	if threads == 0 {
		return configError{fmt.Errorf("PROVIDER_THREADS is unset, but the semaphore %s holds a plan of %d threads: set "+
			"PROVIDER_THREADS=%d like the other workers of task queue %s, or retire admission control with "+
			"`worker -set-provider-threads 0`", activities.ThreadsWorkflowID(taskQueue), plan, plan, taskQueue)}
	}
	return configError{planMismatch(taskQueue, threads, plan)}
}

func planMismatch(taskQueue string, threads, plan int) error {
	return fmt.Errorf("PROVIDER_THREADS=%d disagrees with the plan of %d threads the semaphore %s holds: give every "+
		"worker of task queue %s the same value, or change the plan with `worker -set-provider-threads %d`",
		threads, plan, activities.ThreadsWorkflowID(taskQueue), taskQueue, threads)
}

// ensureThreadsPlan runs once the worker polls (the semaphore needs a worker to answer): it starts the task queue's
// semaphore with this worker's plan, or finds it holds the same one; a disagreement (another worker started it
// meanwhile with another value) is a configError. It also retires the first release's semaphore, whose ID a task
// could take and whose history this release cannot replay: its tasks register with the new one.
func ensureThreadsPlan(ctx context.Context, c client.Client, taskQueue string, threads int, logger *slog.Logger) error {
	if threads == 0 {
		return nil
	}
	plan, err := activities.EnsureThreadsPlan(ctx, c, taskQueue, activities.PlanChange{Threads: threads})
	var refused *temporal.ApplicationError
	if errors.As(err, &refused) {
		return configError{fmt.Errorf("PROVIDER_THREADS: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("checking the provider-threads plan of task queue %s: %w", taskQueue, err)
	}
	logger.Info("provider-threads plan", "task_queue", taskQueue, "threads", plan, "semaphore", activities.ThreadsWorkflowID(taskQueue))
	retireLegacySemaphore(ctx, c, taskQueue, plan, logger)
	return nil
}

// legacySemaphoreState is what the first release's semaphore answers to its slots query.
type legacySemaphoreState struct {
	Threads int                      `json:"threads"`
	Holders []activities.SlotRequest `json:"holders"`
	Queue   []activities.SlotRequest `json:"queue"`
}

// handOverLegacy registers the first release's holders (as held) and queue with the new semaphore, as requests of
// that release (answered by grant signals, which its tasks wait for).
func handOverLegacy(ctx context.Context, c client.Client, taskQueue string, plan int) error {
	v, err := c.QueryWorkflow(ctx, activities.LegacyThreadsWorkflowID(taskQueue), "", activities.SlotsQuery)
	if err != nil {
		return err
	}
	var st legacySemaphoreState
	if err := v.Get(&st); err != nil {
		return err
	}
	reqs := make([]activities.SlotRequest, 0, len(st.Holders)+len(st.Queue))
	for _, h := range st.Holders {
		h.Held, h.Threads = true, max(h.Threads, 1)
		reqs = append(reqs, h)
	}
	for _, q := range st.Queue {
		q.Threads = max(q.Threads, 1)
		reqs = append(reqs, q)
	}
	return activities.HandOver(ctx, c, taskQueue, reqs, plan)
}

func retireLegacySemaphore(ctx context.Context, c client.Client, taskQueue string, plan int, logger *slog.Logger) {
	id := activities.LegacyThreadsWorkflowID(taskQueue)
	desc, err := c.DescribeWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) || (err == nil && desc.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING) {
		return
	}
	if err == nil {
		err = handOverLegacy(ctx, c, taskQueue, plan) // its waiters ask only once: without this they would strand
	}
	if err == nil {
		err = c.TerminateWorkflow(ctx, id, "", "replaced by "+activities.ThreadsWorkflowID(taskQueue)+
			": its tasks register there on their next re-ask")
	}
	if err != nil {
		logger.Warn("could not retire the first release's provider-threads semaphore", "workflow_id", id, "error", err)
		return
	}
	logger.Warn("retired the first release's provider-threads semaphore; its tasks register with the new one",
		"workflow_id", id, "semaphore", activities.ThreadsWorkflowID(taskQueue))
}

// setThreadsPlan is `worker -set-provider-threads N`: it makes N the task queue's plan (0 retires admission control:
// every request is granted at once), starting the semaphore with N > 0 when none runs. Workers must be running to
// answer it; give them PROVIDER_THREADS=N next.
func setThreadsPlan(ctx context.Context, c client.Client, taskQueue string, threads int) (int, error) {
	if threads < 0 {
		return 0, configError{fmt.Errorf("-set-provider-threads: %d is negative", threads)}
	}
	if threads == 0 {
		if _, running, err := activities.RunningThreadsPlan(ctx, c, taskQueue); err == nil && !running {
			return 0, configError{fmt.Errorf("-set-provider-threads 0: no semaphore runs for task queue %s: nothing to retire", taskQueue)}
		}
	}
	return activities.EnsureThreadsPlan(ctx, c, taskQueue, activities.PlanChange{Threads: threads, Set: true})
}

// runSetPlan is the -set-provider-threads command: TASK_QUEUE and Temporal's connection come from the environment, as
// for the worker.
func runSetPlan(logger *slog.Logger, threads int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := dialTemporal(ctx, logger, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	taskQueue := config.WorkerTaskQueue()
	plan, err := setThreadsPlan(ctx, c, taskQueue, threads)
	if err != nil {
		return fmt.Errorf("setting the provider-threads plan of task queue %s (are its workers running?): %w", taskQueue, err)
	}
	fmt.Printf("provider-threads plan of task queue %s: %d threads\n", taskQueue, plan)
	return nil
}

// flagSet tells whether the command line gave the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
