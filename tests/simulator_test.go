package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// simTasks lists the simulator's provider tasks whose pingback path starts with pathPrefix.
func (s *stack) simTasks(ctx context.Context, pathPrefix string) ([]sim.Task, error) {
	return simTasksAt(ctx, s.simURL(), pathPrefix)
}

// simTasksAt lists the tasks of the simulator at base whose pingback path starts with pathPrefix.
func simTasksAt(ctx context.Context, base, pathPrefix string) ([]sim.Task, error) {
	status, body, err := httpGet(ctx, base+"/_sim/tasks?pingback_path_prefix="+url.QueryEscape(pathPrefix))
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /_sim/tasks: %d %s", status, body)
	}
	var list sim.TaskList
	return list.Tasks, json.Unmarshal([]byte(body), &list)
}

// simRules replaces the simulator's fault rules; nil clears them.
func (s *stack) simRules(ctx context.Context, rules []sim.FaultRule) error {
	return simRulesAt(ctx, s.simURL(), rules)
}

// simRulesAt replaces the fault rules of the simulator at base.
func simRulesAt(ctx context.Context, base string, rules []sim.FaultRule) error {
	if rules == nil {
		rules = []sim.FaultRule{}
	}
	body, _ := json.Marshal(sim.FaultRuleList{Rules: rules})
	return simDoAt(ctx, base, http.MethodPut, "/_sim/rules", string(body), http.StatusOK)
}

// simReset makes the simulator forget every task and counter (task IDs keep increasing).
func (s *stack) simReset(ctx context.Context) error {
	return s.simDo(ctx, http.MethodPost, "/_sim/reset", "", http.StatusNoContent)
}

// simDo sends one request to the simulator's control API and fails unless the status is want.
func (s *stack) simDo(ctx context.Context, method, path, body string, want int) error {
	return simDoAt(ctx, s.simURL(), method, path, body, want)
}

// simDoAt sends one request to the control API of the simulator at base and fails unless the status is want.
func simDoAt(ctx context.Context, base, method, path, body string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d", method, path, resp.StatusCode)
	}
	return nil
}

// simTasksByWorkflow groups the scenario's provider tasks by the workflow in their pingback path.
func (sc *scenario) simTasksByWorkflow(ctx context.Context) map[string][]sim.Task {
	sc.t.Helper()
	tasks, err := sc.s.simTasks(ctx, callbackPathPrefix+sc.prefix)
	require.NoError(sc.t, err)
	out := map[string][]sim.Task{}
	for _, t := range tasks {
		id := strings.TrimPrefix(t.PingbackPath, callbackPathPrefix)
		out[id] = append(out[id], t) // the simulator lists tasks by id, i.e. in submission order
	}
	return out
}

// waitSim polls the simulator's view of the scenario until cond returns "".
func (sc *scenario) waitSim(ctx context.Context, what string, timeout time.Duration, cond func(map[string][]sim.Task) string) map[string][]sim.Task {
	sc.t.Helper()
	var last map[string][]sim.Task
	eventually(sc.t, what, timeout, 100*time.Millisecond, func() string {
		last = sc.simTasksByWorkflow(ctx)
		return cond(last)
	})
	return last
}

// lastAttempt is a task's last pingback delivery attempt, if any.
func lastAttempt(t sim.Task) (sim.PingbackAttempt, bool) {
	if len(t.Pingbacks) == 0 {
		return sim.PingbackAttempt{}, false
	}
	return t.Pingbacks[len(t.Pingbacks)-1], true
}

// everyFirstPingbackFailed waits until the first pingback of every task of the scenario (for the given tasks) is
// recorded as failed, and returns the simulator's view.
func (sc *scenario) everyFirstPingbackFailed(ctx context.Context, trs []*taskRun, timeout time.Duration) map[string][]sim.Task {
	return sc.waitSim(ctx, "every pingback recorded as failed", timeout, func(m map[string][]sim.Task) string {
		for _, tr := range trs {
			ts := m[tr.ID]
			if len(ts) == 0 || len(ts[0].Pingbacks) == 0 {
				return tr.ID + " has no recorded pingback yet"
			}
			if p := ts[0].Pingbacks[0]; p.Outcome != sim.OutcomeFailed {
				return fmt.Sprintf("%s: first pingback %s (status %d), want failed", tr.ID, p.Outcome, p.HTTPStatus)
			}
		}
		return ""
	})
}
