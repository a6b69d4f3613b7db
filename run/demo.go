package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

// scenario is one kind of trouble the demo asks the simulator to cause (through the per-task sim_fault
// parameter), and what captchaflow is expected to do about it.
type scenario struct {
	Name  string
	Fault string // sim_fault value; empty for a well-behaved task
}

// scenarioCycle is repeated over the batch: four well-behaved tasks per six troubled ones, so every kind of
// trouble shows up even in a batch of ten.
var scenarioCycle = []scenario{
	{Name: "none"},
	{Name: "dropped pingback", Fault: "drop_pingback"},
	{Name: "duplicate pingback", Fault: "duplicate_pingback"},
	{Name: "none"},
	{Name: "late pingback", Fault: "late_pingback"},
	{Name: "hanging pingback", Fault: "hang_pingback"},
	{Name: "none"},
	{Name: "unsolvable, resubmitted", Fault: "unsolvable"},
	{Name: "in.php busy twice", Fault: "fail_submit=2"},
	{Name: "none"},
}

// scenarioOrder is the order the summary lists scenarios in.
func scenarioOrder() []string {
	var names []string
	seen := map[string]bool{}
	for _, s := range scenarioCycle {
		if !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
	}
	return names
}

// Demo timing: solves take 2–5 s and a pingback that has not come 10 s after submission is given up for polling,
// so even a task that needs a resubmission finishes within about 30 s.
const (
	demoCallbackTimeoutSeconds = 10
	demoPollIntervalSeconds    = 2
	demoDeadlineSeconds        = 180
	demoMaxSubmits             = 2
	demoDeliveryTimeoutSeconds = 300
	demoSolveMinMS             = 2000
	demoSolveSpreadMS          = 3000
)

// demoSimulatorEnv makes the simulator's timed faults fit the demo: a late pingback comes well after the task
// was solved by polling, and a hung pingback is held longer than the ingress's read timeout.
var demoSimulatorEnv = map[string]string{
	"SIM_LATE_DELAY": "20s",
	"SIM_HANG_FOR":   "15s",
	"SIM_SOLVE_MIN":  "2s",
	"SIM_SOLVE_MAX":  "5s",
}

// demoTask is one workflow of the batch.
type demoTask struct {
	ID       string
	Scenario scenario
	Input    captchaflow.Input
}

// planBatch builds n tasks with IDs unique to this run (Temporal keeps earlier runs' workflows in .data).
func planBatch(n int, runID, notifyURL string) []demoTask {
	tasks := make([]demoTask, n)
	for i := range tasks {
		sc := scenarioCycle[i%len(scenarioCycle)]
		params := captchaflow.Params{
			"googlekey": "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI",
			"pageurl":   "https://shop.example/checkout",
			// A spread of solve times that does not depend on the simulator's random draw.
			"sim_solve_ms": strconv.Itoa(demoSolveMinMS + (i*797)%demoSolveSpreadMS),
		}
		if sc.Fault != "" {
			params["sim_fault"] = sc.Fault
		}
		tasks[i] = demoTask{
			ID:       fmt.Sprintf("demo-%s-%03d", runID, i+1),
			Scenario: sc,
			Input: captchaflow.Input{
				Method:                 "userrecaptcha",
				Params:                 params,
				CallbackTimeoutSeconds: demoCallbackTimeoutSeconds,
				PollIntervalSeconds:    demoPollIntervalSeconds,
				DeadlineSeconds:        demoDeadlineSeconds,
				MaxSubmits:             demoMaxSubmits,
				NotifyURL:              notifyURL,
				DeliveryTimeoutSeconds: demoDeliveryTimeoutSeconds,
			},
		}
	}
	return tasks
}

// startTask starts one SolveCaptcha workflow the way any Go caller would.
func startTask(ctx context.Context, c client.Client, task demoTask) (client.WorkflowRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return captchaflow.Start(ctx, c, task.ID, task.Input)
}
