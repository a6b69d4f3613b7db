package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// How many solved tasks the demo reports a verdict for, as a caller would once it knew whether the token worked:
// the first demoReportsGood (in workflow-ID order) as accepted, the next demoReportsBad as refused.
const (
	demoReportsGood = 3
	demoReportsBad  = 2
)

// reportPlan picks the tasks to report and their verdicts from the solved ones, in workflow-ID order.
func reportPlan(results map[string]captchaflow.Result) map[string]captchaflow.Verdict {
	plan := map[string]captchaflow.Verdict{}
	for i, id := range slices.Sorted(maps.Keys(results)) {
		switch {
		case i < demoReportsGood:
			plan[id] = captchaflow.VerdictGood
		case i < demoReportsGood+demoReportsBad:
			plan[id] = captchaflow.VerdictBad
		}
	}
	return plan
}

// reportAudit is what became of the demo's verdicts: sent through captchaflow.SendReport, and recorded by the
// provider (the simulator) for the provider task each result came from.
type reportAudit struct {
	Sent     map[captchaflow.Verdict]int
	Failed   []string
	Recorded map[captchaflow.Verdict]int
	// reported maps the provider task each sent verdict was for to that verdict, for matching the provider's list.
	reported map[string]captchaflow.Verdict
}

// sendReports sends the planned verdicts in parallel and waits for each ReportVerdict workflow's result.
func sendReports(ctx context.Context, c client.Client, plan map[string]captchaflow.Verdict) reportAudit {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	a := reportAudit{Sent: map[captchaflow.Verdict]int{}, reported: map[string]captchaflow.Verdict{}}
	var mu sync.Mutex
	g := errgroup.Group{}
	g.SetLimit(startConcurrency)
	for _, id := range slices.Sorted(maps.Keys(plan)) {
		g.Go(func() error {
			res, err := captchaflow.SendReport(ctx, c, id, plan[id])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				a.Failed = append(a.Failed, fmt.Sprintf("%s (%s): %v", id, plan[id], err))
				return nil
			}
			a.Sent[res.Verdict]++
			a.reported[res.ProviderTaskID] = res.Verdict
			return nil
		})
	}
	_ = g.Wait() // every report records its own error
	slices.Sort(a.Failed)
	return a
}

// countRecorded reads, from the provider's task list, which of the sent verdicts it recorded.
func (a *reportAudit) countRecorded(providerTasks []sim.Task) {
	a.Recorded = map[captchaflow.Verdict]int{}
	for _, t := range providerTasks {
		if _, ok := a.reported[t.ID]; !ok {
			continue
		}
		a.Recorded[captchaflow.VerdictGood] += int(t.ReportsGood)
		a.Recorded[captchaflow.VerdictBad] += int(t.ReportsBad)
	}
}
