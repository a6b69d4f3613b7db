package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// nexusEvery: every nexusEvery-th demo task is a caller team's, solved through the endpoint from namespace shop.
const nexusEvery = 4

// shopQueue is where the launcher hosts the caller team's workflow (captchaflow.SolveViaNexus).
const shopQueue = "shop-callers"

// connect dials captchaflow's namespace and shop; launch starts a ViaNexus task from shop, the rest with Start.
func connect(ctx context.Context, stack *devstack.Stack) (c client.Client, launch startFunc, closeAll func(), err error) {
	c, closeClient, err := dialTraced(ctx, stack)
	if err != nil {
		return nil, nil, nil, err
	}
	shop, stopShop, err := startShop(ctx, stack)
	if err != nil {
		closeClient()
		return nil, nil, nil, err
	}
	launch = func(ctx context.Context, task demoTask) (client.WorkflowRun, error) {
		if task.ViaNexus {
			return startViaNexus(ctx, shop, task)
		}
		return startTask(ctx, c, task)
	}
	return c, launch, func() { stopShop(); closeClient() }, nil
}

// startShop connects to the caller namespace and runs the caller team's worker, as that team would.
func startShop(ctx context.Context, stack *devstack.Stack) (client.Client, func(), error) {
	shop, err := stack.DialNamespace(ctx, devstack.CallerNamespace) // with the keys: the operation's result is encrypted
	if err != nil {
		return nil, nil, fmt.Errorf("connect to namespace %s: %w", devstack.CallerNamespace, err)
	}
	w := worker.New(shop, shopQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
	if err := w.Start(); err != nil {
		shop.Close()
		return nil, nil, err
	}
	return shop, func() { w.Stop(); shop.Close() }, nil
}

// startViaNexus starts the caller's workflow for task; its result is the task's Result.
func startViaNexus(ctx context.Context, shop client.Client, task demoTask) (client.WorkflowRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return shop.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "shop-" + task.ID, TaskQueue: shopQueue},
		captchaflow.NexusCallerWorkflowType, captchaflow.NexusCall{SolveRequest: captchaflow.SolveRequest{TaskID: task.ID, Input: task.Input}})
}

// nexusAudit: the tasks called from shop, those solved, and those whose caller's result is the task's own.
type nexusAudit struct{ Called, Solved, Equal int }

// auditNexus compares each solved ViaNexus task's caller result with its own workflow's result.
func auditNexus(ctx context.Context, c client.Client, track *tracker) (a nexusAudit) {
	results := track.results()
	for _, task := range track.tasks {
		if !task.ViaNexus {
			continue
		}
		a.Called++
		if res, ok := results[task.ID]; ok {
			a.Solved++
			var own captchaflow.Result
			if c.GetWorkflow(ctx, task.ID, "").Get(ctx, &own) == nil && own == res {
				a.Equal++
			}
		}
	}
	return a
}
