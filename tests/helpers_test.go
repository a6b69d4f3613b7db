package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/simulator/sim"
)

const callbackPathPrefix = "/callback/"

// taskSpec is what one CAPTCHA task of a scenario goes through and what must come of it.
type taskSpec struct {
	// Kind labels the task in failure messages.
	Kind string
	// Faults are simulator faults (sim_fault syntax) applied by a rule on this task's pingback URL.
	Faults string
	// SolveMS forces the simulator's solve time (sim_solve_ms); 0 keeps its random 100–500 ms.
	SolveMS int
	// CallbackTimeout in seconds; 0 means callbackTimeoutSeconds.
	CallbackTimeout int
	// Submits is the number of intended submissions (0 means 1).
	Submits int
	// Via is the expected path of the result; empty accepts either.
	Via captchaflow.Via
}

func (sp taskSpec) submits() int { return max(sp.Submits, 1) }

// taskRun is one started task.
type taskRun struct {
	taskSpec
	ID     string
	Result captchaflow.Result
	Err    error
}

// scenario is a batch of tasks with distinct workflow IDs, its own simulator rules and its figures.
type scenario struct {
	t       *testing.T
	s       *stack
	name    string
	prefix  string
	tasks   []*taskRun
	byID    map[string]*taskRun
	started time.Time
	ended   time.Time
	// allowCrashRepeats: after a worker SIGKILL an activity attempt may have reached the provider or the receiver
	// and still be lost with the worker; Temporal retries it (at least once). Such repeats are allowed only where
	// the workflow's history proves an attempt was lost (a retry whose last failure is a timeout).
	allowCrashRepeats bool
	simTasks          map[string][]sim.Task
	notes             []string
}

// newScenario resets every fault the harness controls and the simulator's tasks and rules. All earlier
// scenarios' workflows have completed (each scenario waits for its own), so nothing running is disturbed.
func newScenario(t *testing.T, s *stack, name string) *scenario {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.resetChaos(ctx), "restoring the stack before the scenario")
	require.NoError(t, s.simReset(ctx))
	require.NoError(t, s.simRules(ctx, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack logs:\n%s", s.logTails(25))
		}
	})
	return &scenario{t: t, s: s, name: name, prefix: "e2e-" + name + "-" + s.runID + "-", byID: map[string]*taskRun{}}
}

// add appends n tasks of one kind and returns them.
func (sc *scenario) add(n int, spec taskSpec) []*taskRun {
	var out []*taskRun
	for range n {
		tr := &taskRun{taskSpec: spec, ID: fmt.Sprintf("%s%03d", sc.prefix, len(sc.tasks))}
		sc.tasks = append(sc.tasks, tr)
		sc.byID[tr.ID] = tr
		out = append(out, tr)
	}
	return out
}

func (sc *scenario) ids() []string {
	ids := make([]string, len(sc.tasks))
	for i, tr := range sc.tasks {
		ids[i] = tr.ID
	}
	return ids
}

// idPattern matches this scenario's workflow IDs.
func (sc *scenario) idPattern() *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(sc.prefix) + `\d{3}`)
}

func (s *stack) input(spec taskSpec) captchaflow.Input {
	params := captchaflow.Params{"googlekey": "6Le-e2e-site-key", "pageurl": "https://shop.example.test/login"}
	if spec.SolveMS > 0 {
		params["sim_solve_ms"] = strconv.Itoa(spec.SolveMS)
	}
	cb := spec.CallbackTimeout
	if cb == 0 {
		cb = callbackTimeoutSeconds
	}
	return captchaflow.Input{
		Method:                 "userrecaptcha",
		Params:                 params,
		CallbackTimeoutSeconds: cb,
		PollIntervalSeconds:    pollIntervalSeconds,
		DeadlineSeconds:        deadlineSeconds,
		MaxSubmits:             3,
		NotifyURL:              s.notifyURL(),
		DeliveryTimeoutSeconds: deliveryTimeoutSeconds,
	}
}

// rules are one simulator fault rule per fault set, matching the pingback URLs of the tasks that have it.
func (sc *scenario) rules() []sim.FaultRule {
	byFaults := map[string][]string{}
	for _, tr := range sc.tasks {
		if tr.Faults != "" {
			byFaults[tr.Faults] = append(byFaults[tr.Faults], regexp.QuoteMeta(tr.ID))
		}
	}
	var rules []sim.FaultRule
	faultSets := mapsKeys(byFaults)
	sort.Strings(faultSets)
	for _, faults := range faultSets {
		rules = append(rules, sim.FaultRule{
			Pattern: regexp.QuoteMeta(callbackPathPrefix) + "(" + strings.Join(byFaults[faults], "|") + `)\?`,
			Faults:  faults,
		})
	}
	return rules
}

func mapsKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// start installs the scenario's simulator rules and starts every task through captchaflow.Start.
func (sc *scenario) start(ctx context.Context) {
	sc.t.Helper()
	require.NoError(sc.t, sc.s.simRules(ctx, sc.rules()))
	require.NoError(sc.t, sc.startWorkflows(ctx), "starting the workflows")
}

// startWorkflows starts every task (safe to call from another goroutine; the rules must be installed first).
func (sc *scenario) startWorkflows(ctx context.Context) error {
	sc.started = time.Now()
	errs := parallel(len(sc.tasks), 8, func(i int) error {
		tr := sc.tasks[i]
		_, err := captchaflow.Start(ctx, sc.s.c, tr.ID, sc.s.input(tr.taskSpec))
		return err
	})
	return errors.Join(errs...)
}

// await waits for every task's result (a failed workflow is recorded, not retried).
func (sc *scenario) await(ctx context.Context, timeout time.Duration) {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	parallel(len(sc.tasks), 64, func(i int) error {
		tr := sc.tasks[i]
		tr.Result, tr.Err = sc.s.awaitResult(ctx, tr.ID)
		return nil
	})
	sc.ended = time.Now()
	var failed []string
	for _, tr := range sc.tasks {
		if tr.Err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s): %v", tr.ID, tr.Kind, tr.Err))
		}
	}
	require.Empty(sc.t, failed, "tasks without a result within %s", timeout)
}

// awaitResult waits for the workflow's result, riding out transient errors (a restarting server) until ctx ends.
func (s *stack) awaitResult(ctx context.Context, id string) (captchaflow.Result, error) {
	var res captchaflow.Result
	backoff := 100 * time.Millisecond
	for {
		err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &res)
		if err == nil {
			return res, nil
		}
		var execErr *temporal.WorkflowExecutionError
		if errors.As(err, &execErr) {
			return res, err // the workflow itself failed: that is the answer
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// parallel runs fn(0..n-1) with at most width at once and returns the errors.
func parallel(n, width int, fn func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errs
}

// wfState is what Temporal itself (not the worker) says about a workflow.
type wfState struct {
	Status         enumspb.WorkflowExecutionStatus
	Phase          string
	ProviderTaskID string
	Pending        []*workflowpb.PendingActivityInfo
}

func (s *stack) state(ctx context.Context, id string) (wfState, error) {
	resp, err := s.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return wfState{}, err
	}
	info := resp.GetWorkflowExecutionInfo()
	st := wfState{Status: info.GetStatus(), Pending: resp.GetPendingActivities()}
	fields := info.GetSearchAttributes().GetIndexedFields()
	dc := converter.GetDefaultDataConverter()
	if p := fields[captchaflow.PhaseKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &st.Phase)
	}
	if p := fields[captchaflow.TaskIDKey.GetName()]; p != nil {
		_ = dc.FromPayload(p, &st.ProviderTaskID)
	}
	return st, nil
}

// awaitingQuietly: the task waits for its callback and no activity is running on a worker, so a worker or server
// crash now cannot lose an activity attempt.
func awaitingQuietly(st wfState) bool {
	return st.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
		st.Phase == string(captchaflow.PhaseAwaitingCallback) && len(st.Pending) == 0
}

// waitStates polls Temporal until cond holds for every task in ids, and returns their last states.
func (sc *scenario) waitStates(ctx context.Context, ids []string, what string, timeout time.Duration, cond func(wfState) bool) map[string]wfState {
	sc.t.Helper()
	deadline := time.Now().Add(timeout)
	states := map[string]wfState{}
	pending := slices.Clone(ids)
	for {
		var still []string
		for _, id := range pending {
			st, err := sc.s.state(ctx, id)
			if err == nil {
				states[id] = st
			}
			if err != nil || !cond(st) {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			return states
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, id := range pending {
				desc = append(desc, fmt.Sprintf("%s: %+v", id, states[id]))
			}
			sc.t.Fatalf("%s: %d of %d tasks not there within %s:\n%s", what, len(pending), len(ids), timeout, strings.Join(desc, "\n"))
		}
		time.Sleep(150 * time.Millisecond) // poll interval of a bounded wait
	}
}

// eventually polls cond (which says why it is not yet true) every interval until it returns "" or timeout passes.
func eventually(t *testing.T, what string, timeout, interval time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(interval)
	}
}

// --- simulator control API ---

func (s *stack) simTasks(ctx context.Context, pathPrefix string) ([]sim.Task, error) {
	status, body, err := httpGet(ctx, s.simURL()+"/_sim/tasks?pingback_path_prefix="+url.QueryEscape(pathPrefix))
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /_sim/tasks: %d %s", status, body)
	}
	var list sim.TaskList
	return list.Tasks, json.Unmarshal([]byte(body), &list)
}

func (s *stack) simRules(ctx context.Context, rules []sim.FaultRule) error {
	if rules == nil {
		rules = []sim.FaultRule{}
	}
	body, _ := json.Marshal(sim.FaultRuleList{Rules: rules})
	return s.simDo(ctx, http.MethodPut, "/_sim/rules", string(body), http.StatusOK)
}

func (s *stack) simReset(ctx context.Context) error {
	return s.simDo(ctx, http.MethodPost, "/_sim/reset", "", http.StatusNoContent)
}

func (s *stack) simDo(ctx context.Context, method, path, body string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.simURL()+path, strings.NewReader(body))
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

// --- callbacks sent by the test itself ---

// sendCallback GETs the ingress (through the callback proxy, as the provider would) and returns the status.
func (s *stack) sendCallback(ctx context.Context, path string, q url.Values) (int, string) {
	status, body, err := httpGet(ctx, s.callbackBaseURL()+path+"?"+q.Encode())
	if err != nil {
		return 0, err.Error()
	}
	return status, body
}

// sendTokened sends a callback on the tokened route /callback/<workflow ID>?t=token.
func (s *stack) sendTokened(ctx context.Context, workflowID, providerID, code, token string) (int, string) {
	return s.sendCallback(ctx, callbackPathPrefix+url.PathEscape(workflowID),
		url.Values{"t": {token}, "id": {providerID}, "code": {code}})
}

// sendUntokened sends a callback on the bare route /callback?id=&code=.
func (s *stack) sendUntokened(ctx context.Context, providerID, code string) (int, string) {
	return s.sendCallback(ctx, "/callback", url.Values{"id": {providerID}, "code": {code}})
}

// --- history ---

func (s *stack) history(ctx context.Context, id string) (*historypb.History, error) {
	iter := s.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}

// lostAttempts counts, per activity type, the attempts a worker crash lost: for each activity whose recorded
// start is a retry after a timeout, attempt-1 earlier attempts may have done their side effect.
func lostAttempts(h *historypb.History) map[string]int {
	types := map[int64]string{}
	lost := map[string]int{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 &&
			a.GetLastFailure().GetTimeoutFailureInfo() != nil {
			lost[types[a.GetScheduledEventId()]] += int(a.GetAttempt()) - 1
		}
	}
	return lost
}

// activityAttempts is the highest recorded attempt of each activity type.
func activityAttempts(h *historypb.History) map[string]int32 {
	types := map[int64]string{}
	out := map[string]int32{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			name := types[a.GetScheduledEventId()]
			out[name] = max(out[name], a.GetAttempt())
		}
	}
	return out
}

// signals are the callbacks the workflow received, in order.
func signals(t *testing.T, h *historypb.History) []captchaflow.Callback {
	var out []captchaflow.Callback
	dc := converter.GetDefaultDataConverter()
	for _, ev := range h.GetEvents() {
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a == nil || a.GetSignalName() != captchaflow.CallbackSignal {
			continue
		}
		var cb captchaflow.Callback
		require.NoError(t, dc.FromPayloads(a.GetInput(), &cb))
		out = append(out, cb)
	}
	return out
}

// --- verification ---

// verify checks the invariants every scenario must keep, then records its figures:
//   - every task completed with the code the provider produced for its final submission;
//   - the downstream got exactly one accepted, signed delivery per task (webhook-id = workflow ID), with that code;
//   - the provider saw exactly the intended submissions per task (no duplicate submission);
//   - nothing is lost: every workflow the provider saw a submission for is one of ours and was delivered.
func (sc *scenario) verify(ctx context.Context) figures {
	t := sc.t
	t.Helper()
	sc.simTasks = sc.simTasksByWorkflow(ctx)
	f := figures{Scenario: sc.name, Tasks: len(sc.tasks), Temporal: "dev server"}
	if sc.s.external() {
		f.Temporal = "external " + sc.s.temporalAddr
	}
	for _, tr := range sc.tasks {
		res := tr.Result
		label := fmt.Sprintf("%s (%s)", tr.ID, tr.Kind)
		if !assert.NoError(t, tr.Err, label) {
			continue
		}
		assert.Equal(t, sim.CodeFor(res.ProviderTaskID), res.Code, "%s: wrong code", label)
		if tr.Via != "" {
			assert.Equal(t, tr.Via, res.Via, "%s: result path", label)
		}
		switch res.Via {
		case captchaflow.ViaCallback:
			f.ViaCallback++
		case captchaflow.ViaPoll:
			f.ViaPoll++
		}

		lost := map[string]int{}
		if sc.allowCrashRepeats {
			h, err := sc.s.history(ctx, tr.ID)
			require.NoError(t, err)
			lost = lostAttempts(h)
			f.RepeatsAfterKill += lost[activities.SubmitName] + lost[activities.DeliverName]
		}
		// A Submit attempt lost with a killed worker may have been the one the provider called unsolvable; its
		// retry is then the (solvable) second submission and the workflow counts one fewer.
		assert.LessOrEqual(t, res.Submits, tr.submits(), "%s: submissions the workflow made", label)
		assert.GreaterOrEqual(t, res.Submits, tr.submits()-lost[activities.SubmitName], "%s: submissions the workflow made", label)
		provider := sc.simTasks[tr.ID]
		f.Submissions += len(provider)
		assert.GreaterOrEqual(t, len(provider), tr.submits(), "%s: provider submissions", label)
		assert.LessOrEqual(t, len(provider), tr.submits()+lost[activities.SubmitName],
			"%s: provider submissions (at most %d repeated by a lost Submit attempt)", label, lost[activities.SubmitName])
		if len(provider) > 0 {
			final := provider[len(provider)-1]
			assert.Equal(t, final.ID, res.ProviderTaskID, "%s: the result must come from the last submission", label)
			if lost[activities.SubmitName] == 0 {
				for _, earlier := range provider[:len(provider)-1] {
					assert.Equal(t, sim.StatusUnsolvable, earlier.Status, "%s: a resubmission must follow an unsolvable answer", label)
				}
			}
		}
		for _, pt := range provider {
			for _, p := range pt.Pingbacks {
				f.PingbacksSent++
				if p.Outcome != sim.OutcomeSucceeded {
					f.PingbacksFailed++
				}
			}
		}

		d, ok := sc.s.down.Delivery(tr.ID)
		if !assert.True(t, ok, "%s: nothing delivered to notify_url", label) {
			continue
		}
		assert.Equal(t, tr.ID, d.WebhookID)
		assert.Equal(t, tr.ID, d.Payload.TaskID, "%s: task_id in the delivered body", label)
		assert.Equal(t, res.Code, d.Payload.Code, "%s: delivered code", label)
		assert.Equal(t, res.ProviderTaskID, d.Payload.ProviderTaskID, "%s: delivered provider task", label)
		assert.GreaterOrEqual(t, d.Count, 1)
		assert.LessOrEqual(t, d.Count, 1+lost[activities.DeliverName],
			"%s: accepted deliveries (at most %d repeated by a lost Deliver attempt)", label, lost[activities.DeliverName])
		f.Delivered++
	}
	for id := range sc.simTasks {
		assert.Contains(t, sc.byID, id, "the provider saw a submission for a workflow this scenario did not start")
	}
	assert.Zero(t, sc.s.down.Stats().Conflicts, "a webhook-id was delivered twice with different codes")
	f.WallSeconds = sc.ended.Sub(sc.started).Seconds()
	f.Notes = sc.notes
	recordFigures(t, f)
	return f
}

// note adds a line to the scenario's figures (what the chaos did).
func (sc *scenario) note(format string, args ...any) {
	sc.notes = append(sc.notes, fmt.Sprintf(format, args...))
	sc.t.Logf(format, args...)
}

// --- metrics ---

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// metricSum adds up the samples of name whose labels include want.
func metricSum(text, name string, want map[string]string) (sum float64, found bool) {
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[lp[1]] = lp[2]
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

type metricWant struct {
	url     string
	name    string
	labels  map[string]string
	atLeast float64
}

func (w metricWant) String() string {
	keys := mapsKeys(w.labels)
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+`="`+w.labels[k]+`"`)
	}
	return w.name + "{" + strings.Join(parts, ",") + "}"
}

func scrape(ctx context.Context, url string) (string, error) {
	status, body, err := httpGet(ctx, url)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", url, status)
	}
	return body, nil
}

// metricsSnapshot reads every wanted series now.
func metricsSnapshot(ctx context.Context, wants []metricWant) (map[string]float64, error) {
	texts := map[string]string{}
	out := map[string]float64{}
	for _, w := range wants {
		text, ok := texts[w.url]
		if !ok {
			var err error
			if text, err = scrape(ctx, w.url); err != nil {
				return nil, err
			}
			texts[w.url] = text
		}
		v, _ := metricSum(text, w.name, w.labels)
		out[w.url+" "+w.String()] = v
	}
	return out, nil
}
