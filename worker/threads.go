package main

import (
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/workflows"
)

// startThreadsWorker serves the task queue's provider-threads semaphores when this worker has a plan; stop is
// never nil.
func startThreadsWorker(c client.Client, cfg config.Worker, acts *activities.Activities) (stop func(), err error) {
	if activities.PlannedThreads(acts) == 0 {
		return func() {}, nil
	}
	w := worker.New(c, activities.ThreadsTaskQueue(cfg.TaskQueue), worker.Options{WorkerStopTimeout: cfg.ShutdownTimeout})
	workflows.RegisterThreads(w, acts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the provider-threads worker: %w", err)
	}
	return w.Stop, nil
}
