package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// The demo's two providers, in the worker's order of preference: a speaks in.php, b createTask as CapSolver does.
// The troubled tasks carry sim_* parameters, which no createTask provider takes: only a serves them.
var demoProviders = []devstack.SimProvider{
	{Name: "a", Protocol: providers.ProtocolInPHP},
	{Name: "b", Protocol: providers.ProtocolCreateTask, Flavor: "capsolver", Env: demoSimulatorEnv},
}

// The failover part of the batch: plain tasks (no sim_* parameter, so either provider serves them). Provider a runs
// out of money once the first third of them are accepted there; the rest must go to b at once.
var (
	failoverBefore = scenario{Name: "plain, before a ran dry"}
	failoverAfter  = scenario{Name: "plain, after a ran dry"}

	failoverScenarios = []scenario{failoverBefore, failoverAfter}
)

// demoBalance is the balance a gets back after the demo, so the stack kept up for browsing is whole again.
const demoBalance = 100

// planFailover builds n plain tasks numbered after the first `after` tasks of the run.
func planFailover(n, after int, runID, notifyURL string) []demoTask {
	tasks := make([]demoTask, n)
	for i := range tasks {
		sc := failoverAfter
		if i < failoverSplit(n) {
			sc = failoverBefore
		}
		in := demoInput(notifyURL)
		in.Params = captchaflow.Params{"googlekey": demoSiteKey, "pageurl": demoPageURL}
		tasks[i] = demoTask{ID: fmt.Sprintf("demo-%s-%03d", runID, after+i+1), Scenario: sc, Input: in}
	}
	return tasks
}

// failoverSplit is how many of n failover tasks are started before a runs dry: a third, at least one.
func failoverSplit(n int) int { return max(1, n/3) }

// waves orders the batch: the troubled tasks (on a alone); once they have all finished, the first failover tasks;
// once those are accepted at a, a's balance goes to zero and the rest start.
func waves(stack *devstack.Stack, troubled, failover []demoTask, runID string) []wave {
	if len(failover) == 0 {
		return []wave{{tasks: troubled}}
	}
	split := failoverSplit(len(failover))
	urlA := stack.ProviderSimulatorURL(demoProviders[0].Name)
	return []wave{
		{tasks: troubled},
		{tasks: failover[:split], before: func(ctx context.Context, t *tracker) error { return t.awaitFinished(ctx, troubled) }},
		{tasks: failover[split:], before: func(ctx context.Context, _ *tracker) error {
			if err := awaitAccepted(ctx, urlA, "demo-"+runID+"-", failover[:split]); err != nil {
				return err
			}
			return setBalance(ctx, urlA, 0)
		}},
	}
}

// awaitAccepted waits until every one of tasks has a task at the simulator at simURL.
func awaitAccepted(ctx context.Context, simURL, idPrefix string, tasks []demoTask) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		list, err := fetchProviderTasks(ctx, simURL, idPrefix)
		if err == nil && allAt(list, tasks) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d tasks to be accepted at %s: %w", len(tasks), simURL, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func allAt(list []sim.Task, tasks []demoTask) bool {
	at := map[string]bool{}
	for _, t := range list {
		at[strings.TrimPrefix(t.PingbackPath, callbackPathPrefix)] = true
	}
	for _, t := range tasks {
		if !at[t.ID] {
			return false
		}
	}
	return true
}

// setBalance sets the account balance of the simulator at simURL (zero: it refuses new tasks ERROR_ZERO_BALANCE).
func setBalance(ctx context.Context, simURL string, balance float64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, simURL+"/_sim/balance", strings.NewReader(fmt.Sprintf(`{"balance":%g}`, balance)))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("set the simulator's balance: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("set the simulator's balance: status %d", resp.StatusCode)
	}
	return nil
}

// demoProvidersFor is the demo's providers when the stack runs the simulators (neither a real provider's key nor
// its URL given), else none.
func demoProvidersFor(apiKey, baseURL string) []devstack.SimProvider {
	if apiKey != "" || baseURL != "" {
		return nil
	}
	return slices.Clone(demoProviders)
}

// fetchAllProviderTasks lists each simulated provider's tasks for the batch (the one simulator's on a stack
// without Providers), by provider name.
func fetchAllProviderTasks(ctx context.Context, stack *devstack.Stack, idPrefix string) (map[string][]sim.Task, error) {
	if len(stack.Providers()) == 0 {
		list, err := fetchProviderTasks(ctx, stack.SimulatorURL(), idPrefix)
		return map[string][]sim.Task{"": list}, err
	}
	out := map[string][]sim.Task{}
	for _, p := range stack.Providers() {
		list, err := fetchProviderTasks(ctx, stack.ProviderSimulatorURL(p.Name), idPrefix)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		out[p.Name] = list
	}
	return out, nil
}

// routingAudit is what the providers' own task lists and the results say of the routing.
type routingAudit struct {
	// Providers are the simulated providers, in the worker's order of preference, each with its protocol.
	Providers []devstack.SimProvider
	// ByProvider counts finished tasks by the provider named in their result.
	ByProvider map[string]int
	// After counts the plain tasks started once a ran dry; AtOthers of them were solved by another provider,
	// FirstSubmit of those on their first submission (no wait, no resubmission).
	After, AtOthers, FirstSubmit int
	// PaidTwice lists the workflows with a task at more than one provider.
	PaidTwice []string
}

// auditRouting counts the results by provider and checks the failover tasks against the providers' task lists.
func auditRouting(perProvider map[string][]sim.Task, track *tracker) *routingAudit {
	r := &routingAudit{Providers: demoProviders, ByProvider: map[string]int{}}
	at := map[string]map[string]bool{} // workflow ID -> providers holding a task of it
	for name, list := range perProvider {
		for _, t := range list {
			id := strings.TrimPrefix(t.PingbackPath, callbackPathPrefix)
			if at[id] == nil {
				at[id] = map[string]bool{}
			}
			at[id][name] = true
		}
	}
	results := track.results()
	for _, task := range track.tasks {
		res, done := results[task.ID]
		if done {
			r.ByProvider[res.Provider]++
		}
		if len(at[task.ID]) > 1 {
			r.PaidTwice = append(r.PaidTwice, task.ID)
		}
		if task.Scenario != failoverAfter {
			continue
		}
		r.After++
		if done && res.Provider != demoProviders[0].Name {
			r.AtOthers++
			if res.Submits == 1 {
				r.FirstSubmit++
			}
		}
	}
	return r
}
