package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack/downstream"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// callbackPathPrefix is the ingress route the worker puts in every pingback URL: /callback/<workflow ID>.
const callbackPathPrefix = "/callback/"

// audit compares what the provider solved with what reached the customer.
type audit struct {
	// Solved counts tasks (workflows) the provider solved at least once.
	Solved int
	// Lost are the workflow IDs of solved tasks whose code never reached the receiver (nothing delivered, or a
	// delivered code the provider never produced for that task).
	Lost []string
	// Resubmits says what the workflows made of the provider's "unsolvable" answers.
	Resubmits resubmitAudit
	// Reports says which verdicts the demo sent and the provider recorded.
	Reports reportAudit
	// Routing is nil on a one-provider stack.
	Routing *routingAudit
}

// resubmitAudit sorts the provider's "unsolvable" answers that reach a workflow other than through res.php: a
// pingback carrying an error code instead of a solution, and an in.php refusal.
type resubmitAudit struct {
	// ErrorPingbacks counts unsolvable provider tasks whose pingback was sent (with code=ERROR_CAPTCHA_UNSOLVABLE).
	ErrorPingbacks int
	// TakenAsResubmit of them were followed by another submission for the same workflow after the pingback and
	// before the callback wait ran out: on the pingback's word, not on a later poll's.
	TakenAsResubmit int
	// TakenAsResult lists the workflows whose result names an unsolvable task: its "code" was the error word.
	TakenAsResult []string
	// Neither lists the workflows of the other error-code pingbacks (resubmitted only after polling, failed, or
	// still running).
	Neither []string
	// RefusalsCounted is how many in.php refusals the results count as submissions: for each result, its submits
	// beyond the provider tasks (accepted submissions) its workflow has.
	RefusalsCounted int
}

// fetchProviderTasks lists the simulator's tasks whose pingback goes to a workflow whose ID starts with idPrefix.
func fetchProviderTasks(ctx context.Context, simulatorURL, idPrefix string) ([]sim.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := simulatorURL + "/_sim/tasks?pingback_path_prefix=" + url.QueryEscape(callbackPathPrefix+idPrefix)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list the simulator's tasks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list the simulator's tasks: status %d", resp.StatusCode)
	}
	var list sim.TaskList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode the simulator's tasks: %w", err)
	}
	return list.Tasks, nil
}

// auditDeliveries finds the solved tasks whose code did not reach the receiver. A workflow may have several
// provider tasks (a resubmission after "unsolvable"); delivering the code of any solved one is what counts.
func auditDeliveries(providerTasks []sim.Task, receiver *downstream.Receiver) audit {
	solvedCodes := map[string][]string{} // workflow ID -> codes the provider produced for it
	var order []string
	for _, t := range providerTasks {
		if t.Code == "" || (t.Status != sim.StatusSolved && t.Status != sim.StatusExpired) {
			continue
		}
		id, ok := strings.CutPrefix(t.PingbackPath, callbackPathPrefix)
		if !ok || id == "" {
			continue
		}
		if _, seen := solvedCodes[id]; !seen {
			order = append(order, id)
		}
		solvedCodes[id] = append(solvedCodes[id], t.Code)
	}
	a := audit{Solved: len(order)}
	for _, id := range order {
		d, ok := receiver.Delivery(id)
		if !ok || !slices.Contains(solvedCodes[id], d.Payload.Code) {
			a.Lost = append(a.Lost, id)
		}
	}
	return a
}

// auditResubmits compares the provider's tasks with the workflows' results (by workflow ID; finished tasks only)
// to tell what became of error-code pingbacks and in.php refusals. callbackWait is the workflows'
// callback_timeout_seconds: a resubmission later than that after the unsolvable submission followed a poll.
func auditResubmits(providerTasks []sim.Task, results map[string]captchaflow.Result, callbackWait time.Duration) resubmitAudit {
	byWorkflow := map[string][]sim.Task{}
	for _, t := range providerTasks {
		if id, ok := strings.CutPrefix(t.PingbackPath, callbackPathPrefix); ok && id != "" {
			byWorkflow[id] = append(byWorkflow[id], t)
		}
	}
	var a resubmitAudit
	for _, t := range providerTasks {
		id, ok := strings.CutPrefix(t.PingbackPath, callbackPathPrefix)
		if !ok || id == "" || t.Status != sim.StatusUnsolvable {
			continue
		}
		sentAt, sent := firstSent(t)
		if !sent {
			continue // no pingback (plain unsolvable), or one that never made a request
		}
		a.ErrorPingbacks++
		res, finished := results[id]
		switch {
		case finished && (res.ProviderTaskID == t.ID || res.Code == sim.ErrorCaptchaUnsolvable):
			a.TakenAsResult = append(a.TakenAsResult, id)
		case slices.ContainsFunc(byWorkflow[id], func(next sim.Task) bool {
			return next.ID != t.ID && !next.SubmittedAt.Before(sentAt) && next.SubmittedAt.Before(t.SubmittedAt.Add(callbackWait))
		}):
			a.TakenAsResubmit++
		default:
			a.Neither = append(a.Neither, id)
		}
	}
	for id, res := range results {
		if refused := res.Submits - len(byWorkflow[id]); refused > 0 {
			a.RefusalsCounted += refused
		}
	}
	return a
}

// firstSent is when t's first pingback request was made; false when none was (dropped, hung, or none planned).
func firstSent(t sim.Task) (time.Time, bool) {
	for _, p := range t.Pingbacks {
		if p.Outcome == sim.OutcomeSucceeded || p.Outcome == sim.OutcomeFailed {
			return p.At, true
		}
	}
	return time.Time{}, false
}
