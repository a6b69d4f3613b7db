package workflows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// fuzzSeeds is how many seeded interleavings TestSolveCaptchaRandomInterleavings runs (well under 20 s in all).
const fuzzSeeds = 200

// fuzzHistoryBound bounds a run's estimated history length besides signals (max_submits is at most 4 here).
const fuzzHistoryBound = 200

// contractFailures are the ApplicationError types a SolveCaptcha may end with.
var contractFailures = []string{captchaflow.FailureInvalidInput, captchaflow.FailureUnsolvable, captchaflow.FailureDeadlineExceeded,
	captchaflow.FailureDeliveryFailed, captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown}

// statusWords are what a 2captcha-style pingback may carry instead of a solution.
var statusWords = []string{"ERROR_CAPTCHA_UNSOLVABLE", "CAPCHA_NOT_READY", "CAPTCHA_NOT_READY", "ERROR_WRONG_USER_KEY",
	"ERROR_NO_SLOT_AVAILABLE", "ERROR_BAD_DUPLICATES", "ERROR_SOMETHING_NEW", "ERROR: 1001", "MAX_USER_TURN"}

// TestSolveCaptchaRandomInterleavings runs SolveCaptcha on the SDK's test environment under many seeded
// interleavings of authentic, duplicate, stale, forged, error-code, oversized and empty callbacks, the callback
// timer, in.php and res.php answers of every class (including refusals at submit time), slow activities,
// failing deliveries and cancellation. After each run: the workflow finished (nothing stalls), the result is the
// provider's code for the last accepted submission or a typed failure (a contract Failure* ApplicationError, or
// cancellation when one was requested), in.php was asked at most max_submits times (transient retries aside),
// and the history stays under a fixed bound. A failing seed is reported with its trace; rerun it alone with
// -run 'TestSolveCaptchaRandomInterleavings/seed=N$'.
func TestSolveCaptchaRandomInterleavings(t *testing.T) {
	started := time.Now()
	outcomes := map[string]int{}
	for seed := range uint64(fuzzSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			f := newFuzzRun(t, seed)
			outcomes[f.run()]++
			if t.Failed() {
				t.Logf("seed %d input %+v\ntrace:\n%s", seed, f.in, strings.Join(f.trace, "\n"))
			}
		})
	}
	t.Logf("outcomes over %d seeds: %v", fuzzSeeds, outcomes)
	// The mix must reach every way out, or the test proves less than it claims.
	for _, want := range []string{"callback", "poll", captchaflow.FailureUnsolvable, captchaflow.FailureDeadlineExceeded,
		captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, "cancelled"} {
		if outcomes[want] == 0 {
			t.Errorf("no seed ended %s: %v", want, outcomes)
		}
	}
	if elapsed := time.Since(started); elapsed > 20*time.Second {
		t.Errorf("%d seeds took %v; keep the randomised test under 20 s", fuzzSeeds, elapsed)
	}
}

// fuzzRun is one seeded interleaving and the provider it simulates.
type fuzzRun struct {
	t   *testing.T
	rng *rand.Rand // draws the scenario, in the test's goroutine
	env *testsuite.TestWorkflowEnvironment
	in  captchaflow.Input
	// epoch is the workflow's start on the test clock.
	epoch time.Time

	mu        sync.Mutex
	answers   *rand.Rand // draws activity answers, under mu
	accepted  []string   // provider task IDs in.php handed out, in order
	submitIDs map[string]bool
	activitys map[string]string // activity ID -> type: one scheduled activity each, however many attempts
	// pollWeights are res.php's answers: a normal provider, or (some seeds) one that keeps saying not ready.
	pollWeights map[string]int
	timers      int
	signals     int
	cancelled   bool
	trace       []string
}

func newFuzzRun(t *testing.T, seed uint64) *fuzzRun {
	f := &fuzzRun{
		t:         t,
		rng:       rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		answers:   rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d)),
		submitIDs: map[string]bool{},
		activitys: map[string]string{},
	}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	f.env = ts.NewTestWorkflowEnvironment()
	f.env.SetTestTimeout(10 * time.Second) // wall clock: a stalled run fails instead of hanging
	Register(f.env, &activities.Activities{}, Settings{})

	f.in = recaptcha()
	f.in.MaxSubmits = 1 + f.rng.IntN(4)
	f.in.CallbackTimeoutSeconds = 5 + f.rng.IntN(120)
	f.in.PollIntervalSeconds = 1 + f.rng.IntN(10)
	f.in.DeadlineSeconds = 30 + f.rng.IntN(570)
	f.pollWeights = map[string]int{"ok": 20, "not_ready": 50, "transient": 10, "resubmit": 8, "config": 6, "unknown": 6}
	if f.rng.IntN(4) == 0 {
		f.pollWeights = map[string]int{"ok": 3, "not_ready": 90, "transient": 5, "resubmit": 1, "config": 1}
	}
	if f.rng.IntN(2) == 0 {
		f.in.NotifyURL = "https://downstream.example/hook"
		f.in.DeliveryTimeoutSeconds = 10 + f.rng.IntN(300)
	}
	return f
}

func (f *fuzzRun) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trace = append(f.trace, fmt.Sprintf("%9v ", f.env.Now().Sub(f.epoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

// pick draws one of the weighted choices.
func pick(r *rand.Rand, weights map[string]int) string {
	keys := make([]string, 0, len(weights))
	total := 0
	for k, w := range weights {
		keys = append(keys, k)
		total += w
	}
	slices.Sort(keys)
	n := r.IntN(total)
	for _, k := range keys {
		if n < weights[k] {
			return k
		}
		n -= weights[k]
	}
	return keys[len(keys)-1]
}

// providerFailure is an activity failure of the given class, as the activities raise them.
func providerFailure(class string) error {
	switch class {
	case "not_ready":
		return temporal.NewApplicationError("captchaai get: CAPCHA_NOT_READY (not_ready)", activities.FailureNotReady)
	case "transient":
		return temporal.NewApplicationError("captchaai: ERROR_NO_SLOT_AVAILABLE (transient)", activities.FailureProviderTransient)
	case "resubmit":
		return temporal.NewNonRetryableApplicationError("captchaai: ERROR_CAPTCHA_UNSOLVABLE (resubmit)", activities.FailureResubmit, nil)
	case "config":
		return temporal.NewNonRetryableApplicationError("captchaai: ERROR_WRONG_USER_KEY (config)", captchaflow.FailureProviderConfig, nil)
	default:
		return temporal.NewNonRetryableApplicationError("captchaai: ERROR_WHAT (unknown)", captchaflow.FailureProviderUnknown, nil)
	}
}

func (f *fuzzRun) latency() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers.IntN(3) == 0 {
		return time.Duration(f.answers.IntN(4000)) * time.Millisecond
	}
	return 0
}

func (f *fuzzRun) mockActivities() {
	f.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).AfterFn(f.latency).Return(
		func(ctx context.Context, _ activities.SubmitRequest) (activities.SubmitResult, error) {
			f.mu.Lock()
			answer := pick(f.answers, map[string]int{"ok": 60, "transient": 15, "resubmit": 15, "config": 5, "unknown": 5})
			id := ""
			if answer == "ok" {
				id = fmt.Sprintf("P%d", len(f.accepted)+1)
				f.accepted = append(f.accepted, id)
			}
			f.mu.Unlock()
			f.logf("Submit attempt %d -> %s %s", activity.GetInfo(ctx).Attempt, answer, id)
			if answer != "ok" {
				return activities.SubmitResult{}, providerFailure(answer)
			}
			return activities.SubmitResult{ProviderTaskID: id}, nil
		})
	f.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).AfterFn(f.latency).Return(
		func(ctx context.Context, req activities.PollRequest) (activities.PollResult, error) {
			f.mu.Lock()
			answer := pick(f.answers, f.pollWeights)
			f.mu.Unlock()
			f.logf("Poll %s attempt %d -> %s", req.ProviderTaskID, activity.GetInfo(ctx).Attempt, answer)
			if answer != "ok" {
				return activities.PollResult{}, providerFailure(answer)
			}
			return activities.PollResult{Code: "CODE-" + req.ProviderTaskID}, nil
		})
	f.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).AfterFn(f.latency).Return(
		func(context.Context, activities.DeliverRequest) error {
			f.mu.Lock()
			fail := f.answers.IntN(10) < 3
			f.mu.Unlock()
			f.logf("Deliver -> failed=%v", fail)
			if fail {
				return temporal.NewApplicationError("notify_url answered 503", activities.FailureDeliveryRejected)
			}
			return nil
		})
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.activitys[info.ActivityID] = info.ActivityType.Name
		if info.ActivityType.Name == "Submit" {
			f.submitIDs[info.ActivityID] = true
		}
	})
	f.env.SetOnTimerScheduledListener(func(string, time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.timers++
	})
}

type fuzzSend struct {
	kind string
	at   time.Duration
}

// scheduleCallbacks sends a random mix of callbacks at random times; each is built when it is sent, from the
// provider's state then (the current and the next submission's IDs).
func (f *fuzzRun) scheduleCallbacks() {
	horizon := time.Duration(f.in.DeadlineSeconds+30) * time.Second
	kinds := map[string]int{"authentic": 20, "authentic-next": 5, "duplicate": 8, "stale": 12, "forged": 15, "flood": 6,
		"status-word": 15, "status-word-unauth": 6, "oversized": 6, "empty": 3, "unknown-id": 5}
	var sends []fuzzSend
	for range f.rng.IntN(14) {
		kind := pick(f.rng, kinds)
		at := time.Duration(f.rng.Int64N(int64(horizon)))
		if kind == "flood" { // untokened callbacks for the current task, one every 1.5 s, while awaiting the callback
			at = time.Duration(f.rng.Int64N(int64(f.in.CallbackTimeout())))
			for i := range 20 {
				sends = append(sends, fuzzSend{"forged", at + time.Duration(i)*1500*time.Millisecond})
			}
			continue
		}
		sends = append(sends, fuzzSend{kind, at})
	}
	for _, send := range sends {
		kind, at := send.kind, send.at
		word := statusWords[f.rng.IntN(len(statusWords))]
		f.env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			current, next, stale := "", fmt.Sprintf("P%d", len(f.accepted)+1), "P0"
			if len(f.accepted) > 0 {
				current = f.accepted[len(f.accepted)-1]
			}
			if len(f.accepted) > 1 {
				stale = f.accepted[len(f.accepted)-2]
			}
			f.mu.Unlock()
			var cbs []captchaflow.Callback
			switch kind {
			case "authentic":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current, Code: "CODE-" + current, Authenticated: true})
			case "authentic-next": // overtakes in.php's answer, or is stale by the time a submission is made
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: next, Code: "CODE-" + next, Authenticated: true})
			case "duplicate":
				cb := captchaflow.Callback{ProviderTaskID: current, Code: "CODE-" + current, Authenticated: true}
				cbs = append(cbs, cb, cb)
			case "stale":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: stale, Code: "CODE-" + stale, Authenticated: true})
			case "forged":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current, Code: "FORGED", Authenticated: false})
			case "status-word":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current, Code: word, Authenticated: true})
			case "status-word-unauth":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current, Code: word, Authenticated: false})
			case "oversized":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current,
					Code: strings.Repeat("Z", captchaflow.MaxCodeBytes+1), Authenticated: f.rng.IntN(2) == 0})
			case "empty":
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: current, Code: "", Authenticated: true})
			default:
				cbs = append(cbs, captchaflow.Callback{ProviderTaskID: "P999", Code: "CODE-P999", Authenticated: true})
			}
			for _, cb := range cbs {
				f.logf("signal %s {%s %.24q auth=%v}", kind, cb.ProviderTaskID, cb.Code, cb.Authenticated)
				f.mu.Lock()
				f.signals++
				f.mu.Unlock()
				f.env.SignalWorkflow(captchaflow.CallbackSignal, cb)
			}
		}, at)
	}
	if f.rng.IntN(100) < 15 {
		at := time.Duration(f.rng.Int64N(int64(horizon)))
		f.env.RegisterDelayedCallback(func() {
			f.logf("cancel")
			f.mu.Lock()
			f.cancelled = true
			f.mu.Unlock()
			f.env.CancelWorkflow()
		}, at)
	}
}

// run executes the workflow, checks it and names how it ended.
func (f *fuzzRun) run() (outcome string) {
	t := f.t
	f.mockActivities()
	f.scheduleCallbacks()
	f.epoch = f.env.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("panic: %v", r)
			}
		}()
		f.env.ExecuteWorkflow(SolveCaptcha, f.in)
	}()
	if !f.env.IsWorkflowCompleted() {
		t.Fatalf("the workflow did not complete (stalled)")
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	requests := len(f.submitIDs)
	if requests > f.in.MaxSubmits {
		t.Errorf("in.php asked %d times (transient retries aside), max_submits is %d", requests, f.in.MaxSubmits)
	}
	if err := f.env.GetWorkflowError(); err != nil {
		outcome = f.checkFailure(err)
	} else {
		var r captchaflow.Result
		if err := f.env.GetWorkflowResult(&r); err != nil {
			t.Fatalf("result: %v", err)
		}
		if len(f.accepted) == 0 || r.ProviderTaskID != f.accepted[len(f.accepted)-1] {
			t.Errorf("result for provider task %q, but the last accepted submission is %v", r.ProviderTaskID, f.accepted)
		}
		if r.Code != "CODE-"+r.ProviderTaskID {
			t.Errorf("result code %.40q is not the provider's code for %s", r.Code, r.ProviderTaskID)
		}
		if r.Via != captchaflow.ViaCallback && r.Via != captchaflow.ViaPoll {
			t.Errorf("via %q", r.Via)
		}
		if r.Submits != requests {
			t.Errorf("result says %d submissions, in.php was asked %d times", r.Submits, requests)
		}
		outcome = string(r.Via)
	}

	// The history stays bounded whatever arrives: per submission one Submit, one Poll (its retries add no events),
	// maxConfirmsPerSubmission confirmations and one callback timer, one backoff timer per refusal, one delivery.
	perType := map[string]int{}
	for _, typ := range f.activitys {
		perType[typ]++
	}
	if max := f.in.MaxSubmits * (1 + maxConfirmsPerSubmission); perType["Poll"] > max {
		t.Errorf("%d Poll activities scheduled, bound %d", perType["Poll"], max)
	}
	if perType["Deliver"] > 1 {
		t.Errorf("%d deliveries scheduled", perType["Deliver"])
	}
	if max := 2 * f.in.MaxSubmits; f.timers > max {
		t.Errorf("%d timers, bound %d", f.timers, max)
	}
	// Estimated history length without the signals (each adds its own event and at most one workflow task):
	// start and end, 3 events per activity and 2 per timer (retries add none), a marker and an upsert per change ID,
	// the phase upserts, and a workflow task (3 events) per completion. It must stay under a fixed bound.
	events := 2 + 3*len(f.activitys) + 2*f.timers + 2*5 + (2*f.in.MaxSubmits + 1) + 3*(len(f.activitys)+f.timers+1)
	if events > fuzzHistoryBound {
		t.Errorf("about %d history events besides the %d signals, bound %d", events, f.signals, fuzzHistoryBound)
	}
	return outcome
}

func (f *fuzzRun) checkFailure(err error) (outcome string) {
	t := f.t
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			t.Errorf("cancellation wrapped in an application error: %v", err)
		}
		if !f.cancelled {
			t.Errorf("cancelled without a cancellation request: %v", err)
		}
		return "cancelled"
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Errorf("failure is not an application error: %v", err)
		return "untyped"
	}
	if !slices.Contains(contractFailures, appErr.Type()) {
		t.Errorf("failure type %q is not a contract failure: %v", appErr.Type(), err)
	}
	if appErr.Type() == captchaflow.FailureInvalidInput {
		t.Errorf("valid input refused: %v", err)
	}
	if appErr.Type() == captchaflow.FailureDeliveryFailed {
		var kept captchaflow.Result
		if err := appErr.Details(&kept); err != nil || kept.Code != "CODE-"+kept.ProviderTaskID {
			t.Errorf("a failed delivery lost or corrupted the result: %+v, %v", kept, err)
		}
	}
	return appErr.Type()
}
