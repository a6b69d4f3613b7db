package main

import (
	"context"
	"fmt"
	"slices"
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

// scenarioCycle is repeated over the batch: two well-behaved tasks per eight troubled ones, so every kind of
// trouble shows up even in a batch of ten.
var scenarioCycle = []scenario{
	{Name: "none"},
	{Name: "dropped pingback", Fault: "drop_pingback"},
	{Name: "duplicate pingback", Fault: "duplicate_pingback"},
	{Name: "late pingback", Fault: "late_pingback"},
	{Name: "hanging pingback", Fault: "hang_pingback"},
	{Name: "none"},
	// The first solve is unsolvable and no pingback comes: the poll after the callback wait finds out.
	{Name: "unsolvable, resubmitted", Fault: "unsolvable"},
	// The first solve is unsolvable and its pingback says code=ERROR_CAPTCHA_UNSOLVABLE: a status word, not a
	// result; the workflow resubmits at once.
	{Name: "error-code pingback", Fault: "unsolvable_pingback"},
	// in.php answers ERROR_NO_SLOT_AVAILABLE twice: retried within the submission, not counted as one.
	{Name: "in.php busy twice", Fault: "fail_submit=2,submit_error=transient"},
	// in.php answers ERROR_CAPTCHA_UNSOLVABLE: counted against max_submits, the next request waits
	// (resubmitBackoff, 5 s) and is accepted.
	{Name: "in.php says unsolvable", Fault: "submit_error=resubmit"},
}

// scenarioOrder is the order the summary lists scenarios in.
func scenarioOrder() []string {
	var names []string
	seen := map[string]bool{}
	for _, s := range slices.Concat(scenarioCycle, failoverScenarios) {
		if !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
	}
	return names
}

// Demo timing: solves take 2–5 s and a pingback that has not come 10 s after submission is given up for polling,
// so even a task that needs a resubmission finishes within about 30 s. max_submits must be at least 2: every
// resubmitting scenario (and an in.php refusal, which counts) needs a second submission.
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

// The demo's reCAPTCHA: Google's public test key on a made-up page.
const (
	demoSiteKey = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
	demoPageURL = "https://shop.example/checkout"
)

// demoTask is one workflow of the batch.
type demoTask struct {
	ID       string
	Scenario scenario
	Input    captchaflow.Input
	ViaNexus bool // started by a caller workflow in shop, through the captchaflow endpoint
}

// planBatch builds n tasks with IDs unique to this run (Temporal keeps earlier runs' workflows in .data).
func planBatch(n int, runID, notifyURL string) []demoTask {
	tasks := make([]demoTask, n)
	for i := range tasks {
		sc := scenarioCycle[i%len(scenarioCycle)]
		params := captchaflow.Params{
			"googlekey": demoSiteKey,
			"pageurl":   demoPageURL,
			// A spread of solve times that does not depend on the simulator's random draw.
			"sim_solve_ms": strconv.Itoa(demoSolveMinMS + (i*797)%demoSolveSpreadMS),
		}
		if sc.Fault != "" {
			params["sim_fault"] = sc.Fault
		}
		in := demoInput(notifyURL)
		in.Params = params
		tasks[i] = demoTask{ID: fmt.Sprintf("demo-%s-%03d", runID, i+1), Scenario: sc, Input: in, ViaNexus: i%nexusEvery == nexusEvery-1}
	}
	return tasks
}

// demoInput is every demo task's input but its params.
func demoInput(notifyURL string) captchaflow.Input {
	return captchaflow.Input{
		Method:                 "userrecaptcha",
		CallbackTimeoutSeconds: demoCallbackTimeoutSeconds,
		PollIntervalSeconds:    demoPollIntervalSeconds,
		DeadlineSeconds:        demoDeadlineSeconds,
		MaxSubmits:             demoMaxSubmits,
		NotifyURL:              notifyURL,
		DeliveryTimeoutSeconds: demoDeliveryTimeoutSeconds,
	}
}

// startTask starts one SolveCaptcha workflow the way any Go caller would.
func startTask(ctx context.Context, c client.Client, task demoTask) (client.WorkflowRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return captchaflow.Start(ctx, c, task.ID, task.Input)
}
