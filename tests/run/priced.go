package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// The priced batch: plain tasks on a worker of its own whose PROVIDERS_FILE says `routing: scored`, a priced like
// 2captcha's reCAPTCHA and b like CapSolver's; both simulators solve as fast, so most tasks go to b. The static
// order would have sent every one to a.
var pricedPrices = map[string]float64{"a": 2.99, "b": 0.8}

const pricedQueue = "captcha-solve-scored"

// pricedSplit is what the priced batch came to.
type pricedSplit struct {
	ByProvider   map[string]int
	Cost, Static float64 // what the tasks cost (their cost_usd), and what always using a would have
	Failed       int
}

// runPriced starts the scored worker, runs n plain tasks on it and stops it.
func runPriced(ctx context.Context, c client.Client, stack *devstack.Stack, n int, runID string) (pricedSplit, error) {
	split := pricedSplit{ByProvider: map[string]int{}}
	env, err := stack.WriteProvidersFile("providers-scored.yaml", providers.File{Routing: providers.RoutingScored}, pricedPrices)
	if err != nil {
		return split, err
	}
	env["TASK_QUEUE"] = pricedQueue
	w, err := stack.StartExtraWorker(ctx, "worker-scored", env)
	if err != nil {
		return split, err
	}
	defer func() { _ = w.Stop() }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var runs []client.WorkflowRun
	for i := range n {
		in := demoInput("") // no notify_url: the batch's receiver counts only the first batch's deliveries
		in.Params = captchaflow.Params{"googlekey": demoSiteKey, "pageurl": demoPageURL}
		run, err := captchaflow.Start(ctx, c, fmt.Sprintf("priced-%s-%03d", runID, i+1), in, captchaflow.StartOptions{TaskQueue: pricedQueue})
		if err != nil {
			return split, err
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		var res captchaflow.Result
		if err := run.Get(ctx, &res); err != nil {
			split.Failed++
			continue
		}
		split.ByProvider[res.Provider]++
		split.Cost += res.CostUSD
	}
	split.Static = float64(n) * pricedPrices[demoProviders[0].Name] / 1000
	return split, nil
}

func (p pricedSplit) write(out io.Writer) {
	fmt.Fprintf(out, "\npriced batch (routing: scored; a $%.2f, b $%.2f per 1 000, equally fast):\n", pricedPrices["a"], pricedPrices["b"])
	for _, name := range slices.Sorted(maps.Keys(p.ByProvider)) {
		fmt.Fprintf(out, "  %-3s %d tasks\n", name, p.ByProvider[name])
	}
	saved := p.Static - p.Cost
	fmt.Fprintf(out, "  cost $%.4f; always a (the file's order) $%.4f; saved $%.4f (%.0f%%)", p.Cost, p.Static, saved, 100*saved/max(p.Static, 1e-12))
	if p.Failed > 0 {
		fmt.Fprintf(out, "; %d FAILED", p.Failed)
	}
	fmt.Fprintln(out)
}
