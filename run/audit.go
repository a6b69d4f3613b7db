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

	"github.com/captchaflow/captchaflow/devstack/downstream"
	"github.com/captchaflow/captchaflow/simulator/sim"
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
