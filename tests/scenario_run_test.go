package tests

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

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
	// redelivered: deliveries a reset repeats under the first run's webhook-id, which the receiver drops.
	redelivered int
	// paidAgainByReset: submissions a reset run made again, any of whose codes may be the result.
	paidAgainByReset int
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

// input is a task's workflow input: the harness's short timings, so fallbacks run in seconds, and the receiver
// as notify_url.
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
		LostAnswerWaitSeconds:  lostAnswerWaitSeconds,
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

// mapsKeys lists m's keys in no particular order; callers sort them.
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

// awaitAll waits up to timeout for every task's result or failure, recording each, and stamps the batch's end.
func (sc *scenario) awaitAll(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	parallel(len(sc.tasks), 64, func(i int) error {
		tr := sc.tasks[i]
		tr.Result, tr.Err = sc.s.awaitResult(ctx, tr.ID)
		return nil
	})
	sc.ended = time.Now()
}

// await waits for every task's result (a failed workflow is recorded, not retried).
func (sc *scenario) await(ctx context.Context, timeout time.Duration) {
	sc.t.Helper()
	sc.awaitAll(ctx, timeout)
	var failed []string
	for _, tr := range sc.tasks {
		if tr.Err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s): %v", tr.ID, tr.Kind, tr.Err))
		}
	}
	require.Empty(sc.t, failed, "tasks without a result within %s", timeout)
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
