package workflows

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers"
)

// modelSchedules is how many schedules TestSolveCaptchaModel runs; make fuzz raises it with -model.schedules.
var modelSchedules = flag.Int("model.schedules", 1000, "schedules TestSolveCaptchaModel runs")

// modelSeed reruns one schedule: go test ./workflows -run TestSolveCaptchaModel -model.seed=N
var modelSeed = flag.Int64("model.seed", -1, "run only this schedule")

// searchable are the phases CaptchaPhase holds while a task waits in them.
var searchable = map[captchaflow.Phase]bool{captchaflow.PhaseQueued: true, captchaflow.PhaseAwaitingCallback: true,
	captchaflow.PhasePolling: true, captchaflow.PhaseAwaitingBalance: true, captchaflow.PhaseDelivering: true}

// TestSolveCaptchaModel is the model-based test: each seed draws a schedule of one to three tasks on one worker that
// mixes every feature — lost answers (a reset connection or a gateway's 504 after the provider created the task), 5xx,
// no-slot runs of minutes, zero balance, unsolvable answers, CapSolver's instant image answers, outages, pinned and
// reordered providers, duplicate, late, forged, earlier-run and earlier-submission callbacks, untokened hints, slot
// queueing with the semaphore lost mid-wait or checking its holders as a refresh asks, grants a reset reapplied,
// delivery failing until the token expires, cancellation, workflow tasks running up to two minutes behind the worker
// and ingress, clocks that stamp codes ahead — and runs SolveCaptcha with the real Submit, Poll and Deliver
// activities and clients against fake providers of both protocols (model_net_test.go), one breaker and one semaphore
// stand-in across the tasks. After each schedule:
//   - a task ends with a result, a contract failure (captchaflow.Failure*) or the cancellation it was sent, by its
//     deadlines plus its delivery bounds: a panic or an untyped error fails the schedule;
//   - nothing that is not this run's provider code for a submission of the current solve is delivered as fresh;
//   - no in.php or createTask request while a lost submission of the solve may still answer, or after a paid
//     answer of the solve has arrived, or while another of its submissions is open;
//   - while the semaphore runs undisturbed, never more provider tasks being solved than PROVIDER_THREADS, and its
//     holder check never takes back the slot of a task that solves; every grant the task does not take goes back;
//   - a token is offered to notify_url only while it lives, counted from when its answer arrived; one webhook-id
//     per solve, retried until notify_url accepts it;
//   - the result's and every delivery's received_at is within a second of when the worker or the ingress got the
//     code, though workflow tasks run up to two minutes late (a backlog) or the stamping clocks run ahead;
//   - their submitted_at is within a second of when the provider took the task, however long its Submit queued;
//   - every paid code reaches the caller, or is a documented loss (counted in the log line): offered and expired,
//     dead before a backlogged workflow task saw it, its provider given up, its answer too late;
//   - a provider is given up only while it is unreachable, and has been for PROVIDER_GIVE_UP;
//   - a task fails with ProviderConfig only if no provider it may use takes its task type (or its key was refused);
//   - whenever a lone task waits in a searchable phase, CaptchaPhase says the same as the status query;
//   - with providers (PROVIDERS_FILE): the task asks for its own providers, excludes
//     only given-up ones, avoids only ones that found it unsolvable, polls the provider that took the submission,
//     and its result names that provider; a code that came with the Submit result is taken at once (never polled,
//     and via "submit" only then).
//   - every input drawn (reCAPTCHA v2, v3 with an action, images) is taken, and a v3 task's action reaches the
//     provider (in.php's action, the createTask task's pageAction);
//   - with prices: cost_usd covers every paid submission (a lost one at its price); under routing: scored a file
//     leaving a method a provider serves unpriced is refused at start, an explored submission goes only where Submit
//     would (the best next), and a lost submission that never answered is not handed to the model as an open one.
//   - with tracing on (every other schedule): each pingback URL carries its submission's trace, signed by its
//     token, and each refresh of a result is one span of the task's run.
//   - account pacing (model_pace_test.go): a rate refusal (in bursts) never fails a task, never counts as a
//     submission and never pays twice, and pauses its account's queue of its kind; a Submit on an unserved provider
//     queue is no submission and the next goes elsewhere; a Poll not served asks again on the task's own queue;
//     every Submit and its provider request run on the submit queue of the provider it names, every Poll on its
//     provider's results queue.
//
// A failure names each broken invariant, how many schedules broke it and their first seeds, with the first one's
// trace; rerun it with -model.seed=N (tasks that reach a shared provider at the same instant may do so in either
// order, so a several-task schedule can vary). Resets are not replayed here: the test environment records no history
// for worker.NewWorkflowReplayer; the e2e suite (tests/) resets real runs. A reset run to the first workflow task is
// drawn all the same (model_reset_test.go): submissions the reset discarded call back, and the first of their codes to
// arrive before any other is the result (reset-takes-discarded).
func TestSolveCaptchaModel(t *testing.T) {
	first, n := int64(0), int64(*modelSchedules)
	if *modelSeed >= 0 {
		first, n = *modelSeed, 1
	}
	covered, broken, seeds := map[string]int{}, map[string]int{}, map[string][]int64{}
	for seed := first; seed < first+n; seed++ {
		s := newSchedule(t, uint64(seed))
		s.run()
		for _, c := range s.closers {
			c()
		}
		s.cover(covered)
		for i, inv := range s.failed {
			if broken[inv]++; broken[inv] == 1 {
				t.Errorf("invariant %q broken by schedule %d (rerun: go test ./workflows -run '^TestSolveCaptchaModel$' -model.seed=%d): %s\n%s\n%s",
					inv, seed, seed, s.why[i], s.describe(), strings.Join(s.trace, "\n"))
			}
			seeds[inv] = append(seeds[inv], seed)
		}
	}
	for _, inv := range slices.Sorted(maps.Keys(broken)) {
		t.Errorf("invariant %q: %d of %d schedules broke it; seeds %v", inv, broken[inv], n, seeds[inv][:min(len(seeds[inv]), 20)])
	}
	t.Logf("%d schedules; routing: %v", n, covered)
}

// providerTask is one in.php request the model provider took.
type providerTask struct {
	discarded  bool // made by the run a reset discarded (model_reset_test.go)
	id, code   string
	provider   string
	n          int
	lost       bool
	unseen     bool // made by a Submit the task had cancelled: it never learned of it
	unsolvable bool
	gaveUp     bool      // its own pingback said it is unsolvable: nothing more will come
	word       string    // the proxy word it ended with (unsolvable too, but final: model_proxy_test.go)
	wordAt     time.Time // when the word first reached captchaflow
	instant    bool      // solved within the submission's answer (CapSolver's image tasks): the code is in the Submit result
	image      bool      // an image task (method base64): a createTask provider's code is its text
	more       bool      // its kind answers more than its code: a user agent (model_kinds_test.go)
	at         time.Time // when in.php took it
	solveAt    time.Time
	arrived    time.Time // when its answer first reached captchaflow (zero: never)
	polled     time.Time // when a Poll first handed its whole answer to the workflow (zero: never)
}

// schedule is what the tasks of one seed share: the test environment and its clock, the worker (the real
// activities, one breaker, one semaphore, the settings), the providers, the trace and the verdicts.
type schedule struct {
	t        *testing.T
	closers  []func() // its servers, closed when it has run: thousands of schedules would hold every port meanwhile
	rng      *rand.Rand
	env      *testsuite.TestWorkflowEnvironment
	settings Settings
	epoch    time.Time
	// backlog: the workflow sees a poll's answer or a callback this long after the worker or ingress got it (its
	// tasks run late); ahead: in schedules without one, the clocks that stamp a code run this far ahead.
	backlog, ahead time.Duration

	mu          sync.Mutex
	solves      []*model // the schedule's tasks, each a SolveCaptcha run (children of modelTasks when several)
	nextID      int
	trace       []string
	failed, why []string // the invariants this schedule broke (once each, first one first) and how
	routing     routingModel
	acts        *activities.Activities // the real ones, wired to fakes
	fakes       []*fakeProvider
	breaker     *providers.Breaker
	sem         modelSemaphore
	losses      map[string]int          // paid codes left undelivered, by documented case
	pace        paceModel               // refusal bursts, unserved queues, the Pacer's pauses (model_pace_test.go)
	spans       *tracetest.SpanRecorder // with tracing on (odd seeds): every span the tasks ended
	keys        *keyRing                // payloads encrypted, the key rotated mid-run (model_codec_test.go); nil: plaintext
	// cancelled are the activities (workflow ID/activity ID) the workflow cancelled: the test environment does not
	// cancel a running activity's context, which a real one learns at its next heartbeat, before it writes.
	cancelled map[string]bool
}

// model is one task of a schedule: its input, its provider tasks and what the checks need.
type model struct {
	*schedule
	rng         *rand.Rand // the task's own draws: tasks run concurrently, the schedule's would come in any order
	wid         string
	in          captchaflow.Input
	tasks       []*providerTask
	mayHavePaid float64 // the prices of lost submissions the provider did not create
	runID       string
	searchedAs  captchaflow.Phase
	delivered   []captchaflow.Result // every delivery attempt's body
	hooks       []hook               // every delivery attempt as notify_url saw it, in order
	deliverBad  time.Duration        // delivery fails until this long after the start
	canceled    bool
	discards    int  // submissions the run a reset discarded made (model_reset_test.go)
	discarding  bool // those are being made
	// lostAtDeadline: the next task-creating request's answer is lost (its Submit ends as the deadline comes).
	lostAtDeadline bool
	refused        []string  // providers that refused its task type (ERROR_TASK_NOT_SUPPORTED, ERROR_NO_SUCH_METHOD)
	delivering     bool      // CaptchaPhase is delivering on the server: a delivery began and the task has not asked since
	keyRefused     bool      // a provider refused its key (ERROR_WRONG_USER_KEY): a ProviderConfig failure of its own
	ended          time.Time // when the task ended, with its result or error
	// By submission number: what the providers answered its requests (model_pace_test.go), whether the task
	// cancelled its Submit (unseen), the queue its Submit ran on; Polls whose earlier one was not started, by task ID.
	answers      map[int][]string
	unseenN      map[int]bool
	submitQueues map[int]string
	pollUnserved map[string]bool
	unservedFor  map[string]time.Duration // how long a provider task's result request waited on an unserved queue
	unservedAt   map[string]bool          // providers a Submit of the task was not started at
	submitEnds   map[int]string           // by submission number: how its Submit ended (endOf)
	submitsOut   map[int][2]time.Time     // by submission number: when its Submit was scheduled, and when it ended (zero: not yet)
	result       interface{ Get(any) error }
	err          error
}

// rootResult reads the root workflow's result (the test environment hands children's to the listener).
type rootResult struct {
	env *testsuite.TestWorkflowEnvironment
}

func (r rootResult) Get(v any) error { return r.env.GetWorkflowResult(v) }

// hook is one delivery attempt: its webhook-id, when, and whether notify_url accepted it.
type hook struct {
	id string
	at time.Time
	ok bool
}

func newSchedule(t *testing.T, seed uint64) *schedule {
	s := &schedule{t: t, losses: map[string]int{}, rng: rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(modelLogOut(), nil))))
	s.env = ts.NewTestWorkflowEnvironment()
	s.env.SetTestTimeout(10 * time.Second)
	interceptors := []interceptor.WorkerInterceptor{&unlimitedRetries{}, &resetRuns{s: s}, &unservedQueues{s: s}}
	if seed%2 == 1 { // every other schedule with tracing on: no draw, so a seed's schedule is what it was
		s.spans = tracetest.NewSpanRecorder()
		tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
			Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans)).Tracer("model")})
		require.NoError(t, err)
		interceptors = append(interceptors, tracing)
	}
	s.env.SetWorkerOptions(worker.Options{Interceptors: interceptors})
	if s.rng.IntN(3) == 0 {
		s.settings.ProviderThreads = 1 + s.rng.IntN(2)
	}
	s.drawRouting()
	if draw := s.rng.IntN(8); draw < 2 {
		s.backlog = time.Duration(1+s.rng.IntN(120)) * time.Second
	} else if draw == 2 {
		s.ahead = time.Duration(2+s.rng.IntN(600)) * time.Second
	}
	tasks := 1
	if s.rng.IntN(3) == 0 {
		tasks += 1 + s.rng.IntN(2) // several tasks share the breaker and the semaphore
	}
	for i := range tasks {
		m := &model{schedule: s, wid: fmt.Sprintf("task-%d", i+1), rng: rand.New(rand.NewPCG(seed, uint64(i+1))),
			answers: map[int][]string{}, unseenN: map[int]bool{}, submitQueues: map[int]string{}, pollUnserved: map[string]bool{}, unservedFor: map[string]time.Duration{},
			unservedAt: map[string]bool{}, submitsOut: map[int][2]time.Time{}, submitEnds: map[int]string{}}
		m.drawInput()
		s.solves = append(s.solves, m)
	}
	s.acts = s.newNet()
	s.drawPace(seed)
	s.acts.Pace = s.pacer()
	s.settings.Pacing = s.acts.Pace
	Register(s.env, s.acts, s.settings)
	s.env.RegisterWorkflow(modelTasks)
	s.drawKeys(seed)
	return s
}

// drawInput draws the task's input: bounds, notify_url and its downstream, method, providers.
func (m *model) drawInput() {
	m.in = recaptcha()
	m.in.Params["pageurl"] += "?" + m.wid // each task's params are its own (the Submit mock tells them apart)
	// reCAPTCHA v3, whose action the site checks: it must reach the provider
	if m.rng.IntN(4) == 0 {
		m.in.Params["version"], m.in.Params["action"] = "v3", "login_"+m.wid
	}
	m.in.MaxSubmits = 1 + m.rng.IntN(4)
	m.in.CallbackTimeoutSeconds = 3 + m.rng.IntN(60)
	m.in.PollIntervalSeconds = 1 + m.rng.IntN(10)
	m.in.DeadlineSeconds = 60 + m.rng.IntN(540)
	m.in.LostAnswerWaitSeconds = 10 + m.rng.IntN(200)
	if m.rng.IntN(2) == 0 {
		m.in.NotifyURL = "https://downstream.example/hook" // newNet points it at the fake notify_url
		m.in.DeliveryTimeoutSeconds = 10 + m.rng.IntN(300)
		m.in.TokenTTLSeconds = 10 + m.rng.IntN(120)
		refreshes := m.rng.IntN(3)
		m.in.MaxRefreshes = &refreshes
		if m.rng.IntN(3) == 0 {
			m.deliverBad = time.Duration(m.rng.IntN(400)) * time.Second
		}
	}
	if m.rng.IntN(3) == 0 {
		m.in.Method, m.in.Params = "base64", captchaflow.Params{"body": base64.StdEncoding.EncodeToString([]byte("image of " + m.wid))}
	}
	m.drawProviders()
	m.drawReset()
	m.drawProxy()
	m.drawChallenge()
}

// modelTasks runs several tasks at once, as children, so that they share one worker; the child-completed listener
// records each one's end (the test environment's GetWorkflowResultByID returns the root's result).
func modelTasks(ctx workflow.Context, wids []string, ins []captchaflow.Input) error {
	var runs []workflow.ChildWorkflowFuture
	for i, in := range ins {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: wids[i]})
		runs = append(runs, workflow.ExecuteChildWorkflow(cctx, captchaflow.WorkflowType, in))
	}
	for _, run := range runs {
		_ = run.Get(ctx, nil)
	}
	return nil
}

// solve is the task whose workflow ID is wid.
func (s *schedule) solve(wid string) *model {
	for _, m := range s.solves {
		if m.wid == wid {
			return m
		}
	}
	s.t.Fatalf("no task %q", wid)
	return nil
}

// fail records that the schedule broke invariant inv; the test reports each invariant's count and first seed.
func (s *schedule) fail(inv, format string, args ...any) {
	s.logf("BROKEN %s: "+format, append([]any{inv}, args...)...)
	if !slices.Contains(s.failed, inv) {
		s.failed, s.why = append(s.failed, inv), append(s.why, fmt.Sprintf(format, args...))
	}
}

func (s *schedule) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%8v ", s.env.Now().Sub(s.epoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (s *schedule) run() {
	s.epoch = s.env.Now()
	s.mockProvider()
	s.mockGivenUp()
	s.mockObserved()
	s.mockSlots()
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if sas, ok := args.Get(0).(temporal.SearchAttributes); ok {
			if v, ok := sas.GetKeyword(captchaflow.PhaseKey); ok {
				s.mu.Lock()
				s.solves[0].searchedAs = captchaflow.Phase(v) // checked only when the task is alone
				s.mu.Unlock()
			}
		}
	}).Return(nil)
	var wids []string
	var ins []captchaflow.Input
	for _, m := range s.solves {
		m.scheduleNoise()
		wids, ins = append(wids, m.wid), append(ins, m.in)
	}
	s.startDiscarded()
	s.cancelled = map[string]bool{}
	s.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cancelled[info.WorkflowExecution.ID+"/"+info.ActivityID] = true
	})
	s.env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, result converter.EncodedValue, err error) {
		m := s.solve(info.WorkflowExecution.ID)
		m.ended, m.result, m.err = s.env.Now(), result, err
	})
	if len(s.solves) == 1 {
		s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wids[0]})
		s.env.ExecuteWorkflow(captchaflow.WorkflowType, ins[0])
	} else {
		s.env.ExecuteWorkflow(modelTasks, wids, ins)
	}
	if !s.env.IsWorkflowCompleted() {
		s.fail("ends-in-time", "the schedule did not end")
		return
	}
	s.checkPaused()
	for _, m := range s.solves {
		if m.ended.IsZero() { // the root
			m.ended, m.err = s.env.Now(), s.env.GetWorkflowError()
			m.result = rootResult{s.env}
		}
		result := m.checkEnd()
		m.checkRoundSpans()
		m.checkDeliveries()
		m.checkHooks(result)
		m.checkPaid(result)
		m.checkPriced()
		m.checkDiscardedTaken()
		m.checkRefusalNeverFails()
		if r := (captchaflow.Result{}); m.err == nil && m.result.Get(&r) == nil {
			m.checkSubmits(r.Submits)
		}
		if s.sem.held[modelSlot{m.wid, reappliedSeq}] {
			s.fail("slot-returned", "%s never sent back the grant a reset reapplied: its slot stays taken", m.wid)
		}
	}
}

// mockProvider runs the real Submit and Poll against the fake providers (model_net_test.go), after a latency on
// the test clock, and records what the worker told the task of given-up providers.
func (s *schedule) mockProvider() {
	for _, m := range s.solves { // one mock per task (its params are its own), so each draws from its own rng
		s.env.OnActivity(acts.Submit, mock.Anything, mock.MatchedBy(func(req activities.SubmitRequest) bool {
			return maps.Equal(req.Params, m.in.Params)
		})).AfterFn(m.latency).Return(m.submit)
	}
	// Waiting out the backlog first, Poll then asks the provider as of when the worker ran it (providerNow).
	s.env.OnActivity(acts.Poll, mock.Anything, mock.Anything).AfterFn(func() time.Duration { return s.backlog }).Return(
		func(ctx context.Context, req activities.PollRequest) (activities.PollResult, error) {
			info := activity.GetInfo(ctx)
			m := s.solve(info.WorkflowExecution.ID)
			if s.mu.Lock(); s.cancelled[info.WorkflowExecution.ID+"/"+info.ActivityID] {
				s.mu.Unlock()
				return activities.PollResult{}, temporal.NewCanceledError()
			}
			s.mu.Unlock()
			if !req.SubmittedAt.IsZero() { // Poll holds a first poll by the worker's clock: the test clock's, in real time
				req.SubmittedAt = time.Now().Add(req.SubmittedAt.Sub(s.env.Now()))
			}
			res, err := m.acts.Poll(ctx, req)
			m.mu.Lock()
			defer m.mu.Unlock()
			got := m.providerNow()
			if i := slices.IndexFunc(m.tasks, func(t *providerTask) bool { return t.id == req.ProviderTaskID && t.more }); i >= 0 && m.tasks[i].arrived.After(got) {
				got = m.tasks[i].arrived // a challenge called back is answered after its callback (model_net_test.go's answerResult)
			}
			res.ReceivedAt = s.stamp(res.ReceivedAt, got)
			if i := slices.IndexFunc(m.tasks, func(t *providerTask) bool { return t.id == req.ProviderTaskID }); i >= 0 &&
				err == nil && res.Code != "" && m.tasks[i].polled.IsZero() {
				m.tasks[i].polled = s.env.Now() // no backlog after it: the workflow has it with the Poll's result
			}
			m.logf("%s Poll %s at %q -> %v ua=%q kind=%q", m.wid, req.ProviderTaskID, req.Provider, err, res.UserAgent, req.Kind)
			if app := (*temporal.ApplicationError)(nil); errors.As(err, &app) && app.Type() == activities.FailureProviderGaveUp {
				m.givenUp(req.Provider)
			}
			return res, err
		})
}

func (m *model) submit(ctx context.Context, req activities.SubmitRequest) (activities.SubmitResult, error) {
	m.mu.Lock()
	info := activity.GetInfo(ctx)
	if s := m.schedule; s.cancelled[info.WorkflowExecution.ID+"/"+info.ActivityID] {
		m.mu.Unlock()
		return activities.SubmitResult{}, temporal.NewCanceledError()
	}
	m.runID = req.RunID
	m.checkSubmitQueue(info.TaskQueue, req)
	var lacked []string
	if m.routed() {
		m.checkRouteRequest(req)
		lacked = m.lacking(req)
	}
	made, allowed := len(m.tasks), map[string]bool{}
	for _, name := range m.routing.names {
		allowed[name] = m.breaker.Allows(name)
	}
	m.mu.Unlock()
	res, err := m.acts.Submit(ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	res.ReceivedAt, res.AcceptedAt = m.stamp(res.ReceivedAt, m.env.Now()), m.stamp(res.AcceptedAt, m.env.Now())
	m.logf("%s Submit n=%d attempt %d -> %+v %v", m.wid, req.Submission, activity.GetInfo(ctx).Attempt, res, err)
	if err == nil && m.routed() {
		m.checkRoute(req, res, lacked)
		m.checkExplore(req, res, allowed)
	}
	for _, t := range m.tasks[made:] {
		t.unseen = m.schedule.cancelled[info.WorkflowExecution.ID+"/"+info.ActivityID]
	}
	m.unseenN[req.Submission] = m.schedule.cancelled[info.WorkflowExecution.ID+"/"+info.ActivityID]
	var lost activities.LostDetails // a 5xx before anything was created is lost all the same: priced, as it may have been paid
	if app := (*temporal.ApplicationError)(nil); len(m.tasks) == made && errors.As(err, &app) && app.Type() == activities.FailureSubmitOutcomeUnknown && app.Details(&lost) == nil {
		m.mayHavePaid += lost.PriceUSD
	}
	return res, err
}

// latency is how long a provider request takes on the test clock: mostly at once, sometimes up to 40 s (under
// ProviderStartToClose); no-slot answers (busyUntil) make Submit take minutes of retries.
func (m *model) latency() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if left := m.epoch.Add(m.in.SolveBudget()).Sub(m.env.Now()); m.discards > 0 && left > 0 && m.rng.IntN(8) == 0 {
		m.lostAtDeadline = true // a reset run's Submit (queued, then slow) whose answer is lost as the deadline comes
		return left
	}
	if m.rng.IntN(3) == 0 || m.discards > 0 && m.rng.IntN(2) == 0 { // a reset run's discarded callbacks meet its Submits
		return time.Duration(m.rng.IntN(40000)) * time.Millisecond
	}
	return 0
}

// take records a new provider task and schedules its pingbacks to the URL it was given: on time, dropped,
// duplicated or late. An instant task is solved as it is taken (its pingbacks still come, as noise).
func (m *model) take(provider, pingback string, lost, instant, unnamed bool) *providerTask {
	m.nextID++
	id := strconv.Itoa(7300 + m.nextID)
	now := m.env.Now()
	_, runID, n := pingbackOf(pingback)
	m.checkTracedPingback(pingback)
	solve := time.Duration(1+m.rng.IntN(40)) * time.Second
	if m.rng.IntN(5) == 0 {
		solve *= 8 // a slow one outlives the lost-answer wait
	}
	task := &providerTask{id: id, code: "CODE-" + id, n: n, lost: lost, at: now, provider: provider,
		unsolvable: m.rng.IntN(6) == 0, solveAt: now.Add(solve), more: m.answersMore()}
	if instant {
		task.instant, task.unsolvable, task.solveAt = true, false, now
		m.arrive(task, now)
	} else if task.word = m.proxyWordOf(provider); task.word != "" {
		task.unsolvable = true
	}
	m.tasks = append(m.tasks, task)
	m.checkPaysOnce(task)
	code := task.code
	if task.unsolvable {
		code = cmp.Or(task.word, "ERROR_CAPTCHA_UNSOLVABLE")
	}
	cb := captchaflow.Callback{ProviderTaskID: id, Code: code, Authenticated: true, RunID: runID, Submission: n, Provider: provider}
	if unnamed {
		cb.ProviderTaskID = ""
	}
	delays := []time.Duration{task.solveAt.Sub(now)}
	switch pick(m.rng, map[string]int{"on-time": 6, "dropped": 2, "duplicate": 1, "late": 1}) {
	case "dropped":
		delays = nil
	case "duplicate":
		delays = append(delays, delays[0]+time.Duration(m.rng.IntN(30))*time.Second)
	case "late":
		delays[0] += time.Duration(m.rng.IntN(600)) * time.Second
	}
	for _, d := range delays {
		m.env.RegisterDelayedCallback(func() {
			m.mu.Lock()
			down, _ := m.down(provider)
			m.mu.Unlock()
			if down {
				m.logf("pingback of %s not sent: %q is down", id, provider)
				return
			}
			m.mu.Lock()
			if task.gaveUp = task.unsolvable; !task.unsolvable {
				m.arrive(task, m.env.Now()) // signal tells a task by the ID its callback names, and this one may name none
			} else if task.word != "" && task.wordAt.IsZero() {
				task.wordAt = m.env.Now()
			}
			m.mu.Unlock()
			m.signal("pingback", cb)
		}, d)
	}
	return task
}

// arrive records when task's answer first reached captchaflow (at): its pingback, a poll's answer or the Submit result.
func (s *schedule) arrive(task *providerTask, at time.Time) {
	if task.arrived.IsZero() || at.Before(task.arrived) { // a poll that waited out a backlog got it earlier
		task.arrived = at
	}
}

// stamp is an activity's stamp (at) of a code it got at got, by a clock s.ahead ahead; an unstamped result stays so.
func (s *schedule) stamp(at, got time.Time) time.Time {
	if at.IsZero() {
		return at
	}
	return got.Add(s.ahead)
}

// providerNow is the time of the request a provider answers now: Poll waited out the backlog before asking.
func (s *schedule) providerNow() time.Time { return s.env.Now().Add(-s.backlog) }

// seen is when the workflow could know that task's answer arrived: a backlog later, or with a Poll's result if sooner.
func (m *model) seen(task *providerTask) time.Time {
	at := task.arrived.Add(m.backlog)
	if !task.polled.IsZero() && task.polled.Before(at) {
		at = task.polled
	}
	if task.discarded { // a discarded one's callback waits for the end of the Submit of its number
		at = m.parkedUntil(task, at)
	}
	return at
}

// deadWhenSeen tells whether task's token (with notify_url) died before the workflow could see it: a backlog longer
// than its life, so the task solves again without offering it.
func (m *model) deadWhenSeen(task *providerTask) bool {
	life := time.Duration(m.in.TokenTTLSeconds)*time.Second - deliveryExpiryMargin
	return m.in.NotifyURL != "" && !task.arrived.IsZero() && !task.unsolvable && !m.usable(task).Before(task.arrived.Add(life))
}

// usable is when the workflow can have task's whole answer: a challenge's pingback lacks its user agent, which one more
// request (one more backlog, after its wait on an unserved queue) fetches; a Poll's result has it.
func (m *model) usable(task *providerTask) time.Time {
	seen := m.seen(task)
	if task.more && !seen.Equal(task.polled) {
		return seen.Add(m.unservedFor[task.id] + m.backlog)
	}
	return seen
}

// diedUnseen tells whether, by now, a token of the task died before the workflow saw it: a refresh may have begun.
func (m *model) diedUnseen(now time.Time) bool {
	return slices.ContainsFunc(m.tasks, func(task *providerTask) bool { return m.deadWhenSeen(task) && !now.Before(m.seen(task)) })
}

// checkNoSubmitWhileLostMayAnswer: before the first delivery (a refresh starts a new solve), an in.php request
// comes only once every lost submission's wait is over or its answer came.
func (m *model) checkNoSubmitWhileLostMayAnswer() {
	if len(m.delivered) > 0 || m.diedUnseen(m.env.Now()) {
		return
	}
	now := m.env.Now()
	for _, task := range m.tasks {
		end := task.at.Add(m.in.LostAnswerWait())
		if deadline := m.epoch.Add(m.in.SolveBudget()); deadline.Before(end) {
			end = deadline
		}
		answered := !task.unsolvable && !task.solveAt.After(now)
		if task.lost && now.Before(end) && !answered && !task.gaveUp && !m.abandoned(task, now) {
			m.fail("no-submit-while-lost-may-answer", "a provider request at %v while lost submission %d (%s) may still answer until %v",
				now.Sub(m.epoch), task.n, task.id, end.Sub(m.epoch))
		}
	}
}

// modelSemaphore is the in-process stand-in for the task queue's modelSemaphore: at most ProviderThreads requests hold a
// slot (granted, or granted with the grant still on its way), the rest queue in order. A lost one (a third of the
// schedules) never answers the first ask of a request, so only the re-ask gets it.
type modelSemaphore struct {
	lost  bool
	held  map[modelSlot]bool
	queue []slotAsk
	asked map[modelSlot]int
}

// modelSlot names one slot request: the task and its request's sequence number.
type modelSlot struct {
	wid string
	seq int
}

type slotAsk struct {
	key   modelSlot
	runID string
}

func (s *schedule) mockSlots() {
	if s.settings.ProviderThreads == 0 {
		return
	}
	s.sem = modelSemaphore{lost: s.rng.IntN(3) == 0, held: map[modelSlot]bool{}, asked: map[modelSlot]int{}}
	s.env.OnActivity(acts.AcquireSlot, mock.Anything, mock.Anything).Return(func(ctx context.Context, ask activities.SlotAsk) (activities.SlotTicket, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := s.solve(activity.GetInfo(ctx).WorkflowExecution.ID)
		key := modelSlot{m.wid, ask.Seq}
		ticket := activities.SlotTicket{Semaphore: "sem", Run: "r1", RunID: ask.RunID, Provider: s.slotProvider(ask)}
		if ticket.Provider != "" || s.acts.Providers == nil { // as AcquireSlot: Submit runs on the paced provider's queue
			ticket.Queue = s.acts.Pace.Queue(ticket.Provider, activities.SubmitQueue)
		}
		s.sem.asked[key]++
		if s.sem.lost && s.sem.asked[key] == 1 {
			s.logf("AcquireSlot %v: the semaphore is lost", key)
			return ticket, nil
		}
		switch {
		case s.sem.held[key]:
			s.grantAfter(slotAsk{key, ask.RunID}, 0) // its grant again, for the run asking
		case slices.ContainsFunc(s.sem.queue, func(q slotAsk) bool { return q.key == key }):
		case len(s.sem.held) < s.settings.ProviderThreads && len(s.sem.queue) == 0 && m.rng.IntN(3) == 0:
			s.sem.held[key] = true
			s.grantAfter(slotAsk{key, ask.RunID}, 0)
		default:
			s.sem.queue = append(s.sem.queue, slotAsk{key, ask.RunID})
			s.grantNext(time.Duration(m.rng.IntN(40)) * time.Second)
		}
		if s.sem.held[key] && m.delivering { // a refresh's ask, granted at once: the holder check may land now
			s.checkHolder(m, key)
		}
		m.delivering = false // the asking workflow task commits the queued upsert
		s.logf("AcquireSlot %v ask %d: held %v, queued %d", key, s.sem.asked[key], s.sem.held, len(s.sem.queue))
		return ticket, nil
	})
	s.env.OnActivity(acts.ReleaseSlot, mock.Anything, mock.Anything).Return(
		func(_ context.Context, rel activities.SlotRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			key := modelSlot{rel.WorkflowID, rel.Seq}
			delete(s.sem.held, key)
			s.sem.queue = slices.DeleteFunc(s.sem.queue, func(q slotAsk) bool { return q.key == key })
			s.logf("release %v", key)
			s.grantNext(0)
			return nil
		})
}

// checkHolder is the semaphore's holder check (the real decision) landing while m's workflow task asks for key: the
// server shows the phase m's last completed workflow task upserted, delivering, and this one under way. A slot
// taken back from a task that solves is granted again to another.
func (s *schedule) checkHolder(m *model, key modelSlot) {
	desc := &client.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{
		PendingWorkflowTask: &workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED}}}
	desc.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	desc.TypedSearchAttributes = temporal.NewSearchAttributes(captchaflow.PhaseKey.ValueSet(string(captchaflow.PhaseDelivering)))
	if activities.SolveEnded(desc) {
		s.fail("slot-kept", "%s: the holder check took back slot %v, granted to its refresh's ask, while it solves", m.wid, key)
		delete(s.sem.held, key)
		s.grantNext(0)
	}
}

// reappliedSeq is the request of an earlier run of a task's reset chain, granted after the reset point.
const reappliedSeq = 99

// reappliedGrant is a grant that an earlier run of the task's reset chain received after the reset point (reset of
// a reset: the middle run's), reapplied by the server: the semaphore holds that request's slot until it comes back.
func (m *model) reappliedGrant() {
	if !m.ended.IsZero() || m.env.IsWorkflowCompleted() {
		return
	}
	m.mu.Lock()
	m.sem.held[modelSlot{m.wid, reappliedSeq}] = true
	m.mu.Unlock()
	m.logf("reapplied grant %s/%d of an earlier run", m.wid, reappliedSeq)
	g := activities.SlotRequest{Seq: reappliedSeq, RunID: "a-middle-run", Semaphore: "sem"}
	if m.env.SignalWorkflowByID(m.wid, activities.SlotGrantedSignal, g) != nil {
		m.mu.Lock()
		delete(m.sem.held, modelSlot{m.wid, reappliedSeq})
		m.mu.Unlock()
	}
}

// grantNext grants the first queued request after d when a slot is free.
func (s *schedule) grantNext(d time.Duration) {
	if len(s.sem.queue) == 0 || len(s.sem.held) >= s.settings.ProviderThreads {
		return
	}
	ask := s.sem.queue[0]
	s.sem.queue, s.sem.held[ask.key] = s.sem.queue[1:], true
	s.grantAfter(ask, d)
}

func (s *schedule) grantAfter(ask slotAsk, d time.Duration) {
	s.env.RegisterDelayedCallback(func() {
		_ = s.env.SignalWorkflowByID(ask.key.wid, activities.SlotGrantedSignal, activities.SlotRequest{Seq: ask.key.seq, RunID: ask.runID, Semaphore: "sem"})
	}, d)
}

// checkPlan: while the semaphore runs undisturbed, the provider tasks still being solved (lost ones included;
// not given-up ones nor those of a task that ended) never outnumber PROVIDER_THREADS.
func (s *schedule) checkPlan() {
	// A reset run's adopted answer supersedes its own open submission, whose thread the provider keeps until it is
	// solved: a reset disturbs the plan as losing the semaphore does.
	if s.settings.ProviderThreads == 0 || s.sem.lost || slices.ContainsFunc(s.solves, func(m *model) bool { return m.discards > 0 }) {
		return
	}
	now, open := s.env.Now(), 0
	for _, m := range s.solves {
		for _, task := range m.tasks {
			if now.Before(task.solveAt) && !s.abandoned(task, now) && m.ended.IsZero() && !task.discarded {
				open++
			}
		}
	}
	if open > s.settings.ProviderThreads {
		s.fail("plan", "%d provider tasks being solved at %v, PROVIDER_THREADS=%d", open, now.Sub(s.epoch), s.settings.ProviderThreads)
	}
}

// checkNoSubmitAfterAnswer: before the first delivery, no in.php or createTask request is made once a paid answer
// of the solve has reached captchaflow, unless its provider was given up first or it is a discarded submission's
// whose token died while parked (worthless: solved again).
func (m *model) checkNoSubmitAfterAnswer() {
	if len(m.delivered) > 0 || m.diedUnseen(m.env.Now()) {
		return
	}
	now := m.env.Now()
	for _, task := range m.tasks {
		if !task.arrived.IsZero() && !now.Before(m.seen(task)) && !task.unsolvable && !m.abandoned(task, now) &&
			!(task.discarded && m.expiredWhenSeen(task)) {
			m.fail("no-submit-after-answer", "a provider request at %v, after the answer of %s arrived at %v",
				now.Sub(m.epoch), task.id, task.arrived.Sub(m.epoch))
		}
	}
}

// delivery is notify_url's side of one attempt: it records it, checks the token lives, and refuses it while
// the schedule's downstream is down.
func (m *model) delivery(id string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var r captchaflow.Result
	if err := json.Unmarshal(body, &r); err != nil {
		m.fail("fresh-result", "delivery body: %v", err)
	}
	now, r := m.env.Now(), m.named(r)
	m.delivered, m.delivering = append(m.delivered, r), true
	m.hooks = append(m.hooks, hook{id: id, at: now, ok: now.Sub(m.epoch) >= m.deliverBad})
	m.checkLive(r, now)
	if !m.hooks[len(m.hooks)-1].ok {
		return errors.New("notify_url answered 503")
	}
	return nil
}

// named is r naming the provider task its code is: a lost submission answered by a callback that names no task
// (Anti-Captcha's, CapMonster's) cannot say which, and a code is its task's alone.
func (m *model) named(r captchaflow.Result) captchaflow.Result {
	for _, task := range m.tasks {
		if r.ProviderTaskID == "" && r.Code == task.code && (task.lost || task.discarded) {
			r.ProviderTaskID = task.id
		}
	}
	return r
}

// checkLive: a token is offered only while it lives, counted from when its answer arrived, and says so.
func (m *model) checkLive(r captchaflow.Result, now time.Time) {
	ttl := time.Duration(m.in.TokenTTLSeconds) * time.Second
	for _, task := range m.tasks {
		if task.id != r.ProviderTaskID || task.arrived.IsZero() {
			continue
		}
		if !now.Before(task.arrived.Add(ttl)) {
			m.fail("live-token", "%s offered %v after its answer arrived, past its %v life", task.id, now.Sub(task.arrived), ttl)
		}
	}
}

// scheduleNoise sends what no provider task of this run said: forged hints, earlier-run callbacks, repeats of
// earlier submissions' callbacks, untokened hints by Update, and sometimes a cancellation.
func (m *model) scheduleNoise() {
	horizon := int64(m.in.SolveBudget() + time.Minute)
	for range m.rng.IntN(10) {
		at := time.Duration(m.rng.Int64N(horizon))
		kind := pick(m.rng, map[string]int{"forged": 3, "earlier-run": 3, "earlier-run-unnamed": 2, "earlier-submission": 3, "hint": 3})
		m.env.RegisterDelayedCallback(func() { m.sendNoise(kind) }, at)
	}
	if m.settings.ProviderThreads > 0 && m.rng.IntN(3) == 0 {
		m.env.RegisterDelayedCallback(m.reappliedGrant, time.Duration(m.rng.Int64N(horizon)))
	}
	if m.rng.IntN(10) == 0 && len(m.solves) == 1 { // the test environment cancels only its root workflow
		m.env.RegisterDelayedCallback(func() { m.logf("cancel"); m.canceled = true; m.env.CancelWorkflow() }, time.Duration(m.rng.Int64N(horizon)))
	}
	// Probes between the events, for a task alone (CaptchaPhase upserts do not say whose they are); several tasks'
	// probes would also overflow the test environment's callback queue before it starts.
	for at := 1500 * time.Millisecond; at < time.Duration(horizon) && len(m.solves) == 1; at += 1500 * time.Millisecond {
		m.env.RegisterDelayedCallback(m.checkPhases, at)
	}
}

func (m *model) sendNoise(kind string) {
	m.mu.Lock()
	var last *providerTask
	if len(m.tasks) > 0 {
		last = m.tasks[len(m.tasks)-1]
	}
	first := slices.DeleteFunc(slices.Clone(m.tasks), func(t *providerTask) bool { return t.discarded }) // this run's
	m.mu.Unlock()
	switch {
	case kind == "forged" && last != nil:
		m.signal("forged", captchaflow.Callback{ProviderTaskID: last.id, Code: "FORGED"})
	case kind == "earlier-run":
		m.signal("earlier-run", captchaflow.Callback{ProviderTaskID: "P1", Code: "EARLIER-RUN", Authenticated: true,
			RunID: "an-earlier-run", Submission: 1})
	case kind == "earlier-run-unnamed": // a pingback URL of a run from before URLs named their run and submission
		m.signal("earlier-run", captchaflow.Callback{ProviderTaskID: "P99", Code: "EARLIER-RUN", Authenticated: true})
	case kind == "earlier-submission" && len(first) > 1 && !m.env.Now().Before(first[0].solveAt):
		old := first[0] // a repeat of what the provider said about it
		code := old.code
		if old.unsolvable {
			code = "ERROR_CAPTCHA_UNSOLVABLE"
		}
		m.signal("earlier-submission", captchaflow.Callback{ProviderTaskID: old.id, Code: code, Authenticated: true,
			RunID: m.runID, Submission: old.n})
	case kind == "hint" && last != nil:
		m.logf("untokened hint %s", last.id)
		_ = m.env.UpdateWorkflowByID(m.wid, captchaflow.UntokenedUpdate, fmt.Sprint(m.env.Now().UnixNano()), &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}},
			captchaflow.UntokenedHint{ProviderTaskID: last.id})
	}
}

// signal sends cb, checking first that the task's searchable phase is what its status says.
func (m *model) signal(kind string, cb captchaflow.Callback) {
	m.checkPhases()
	m.mu.Lock()
	for _, task := range m.tasks {
		if kind == "pingback" && task.id == cb.ProviderTaskID && task.unsolvable {
			task.gaveUp = true
		}
		if task.id == cb.ProviderTaskID && cb.Code == task.code && cb.Authenticated {
			m.arrive(task, m.env.Now())
		}
	}
	cb.ReceivedAt = m.env.Now().Add(m.ahead) // the ingress's stamp, by its clock
	m.logf("signal %s %s {%s %.24q auth=%v n=%d}", m.wid, kind, cb.ProviderTaskID, cb.Code, cb.Authenticated, cb.Submission)
	m.mu.Unlock() // the trace is shared with the activities' goroutines
	if m.backlog == 0 {
		_ = m.env.SignalWorkflowByID(m.wid, captchaflow.CallbackSignal, cb)
		return
	}
	m.env.RegisterDelayedCallback(func() { _ = m.env.SignalWorkflowByID(m.wid, captchaflow.CallbackSignal, cb) }, m.backlog)
}

// checkPhases compares the status query's phase with the last CaptchaPhase upsert while the task waits.
func (m *model) checkPhases() {
	if m.env.IsWorkflowCompleted() || len(m.solves) > 1 {
		return
	}
	v, err := m.env.QueryWorkflow(captchaflow.StatusQuery)
	if err != nil {
		return // not started yet
	}
	var st captchaflow.Status
	if err := v.Get(&st); err != nil {
		m.fail("phase-matches-status", "status: %v", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if searchable[st.Phase] && st.Phase != m.searchedAs {
		m.fail("phase-matches-status", "status phase %s, CaptchaPhase %s", st.Phase, m.searchedAs)
	}
}

// checkEnd: the schedule ended by its deadlines and delivery bounds, with a result or a contract failure.
func (m *model) checkEnd() (result string) {
	refreshes := 0
	if m.in.MaxRefreshes != nil {
		refreshes = *m.in.MaxRefreshes
	}
	solves := time.Duration(1+refreshes) * (m.in.SolveBudget() + m.in.DeliveryTimeout() + time.Minute + m.backlog)
	if took := m.ended.Sub(m.epoch); took > solves {
		m.fail("ends-in-time", "took %v, bound %v", took, solves)
	}
	if m.err != nil {
		m.logf("%s ended at %v: %v", m.wid, m.ended.Sub(m.epoch), m.err)
		m.checkTypedFailure(m.err)
		m.checkUnsupported(m.err)
		m.checkProxyRejected(m.err)
		return ""
	}
	var r captchaflow.Result
	if err := m.result.Get(&r); err != nil {
		m.fail("fresh-result", "result: %v", err)
	}
	m.mu.Lock()
	r = m.named(r)
	m.mu.Unlock()
	m.checkFresh(r, "the result")
	m.checkCost(r)
	return r.ProviderTaskID
}

// checkTracedPingback: with tracing on, a pingback URL carries its submission's trace, signed by its token.
func (m *model) checkTracedPingback(pingback string) {
	u, err := url.Parse(pingback)
	if m.spans == nil || err != nil || m.discarding {
		return
	}
	q := u.Query()
	n, _ := strconv.Atoi(q.Get(callbackauth.SubmissionParam))
	sub := callbackauth.Submission{RunID: q.Get(callbackauth.RunParam), N: n, Provider: q.Get(callbackauth.ProviderParam),
		Trace: q.Get(callbackauth.TraceParam)}
	if sub.Trace == "" || !callbackauth.ValidFor(q.Get(callbackauth.TokenParam), m.wid, sub, m.acts.CallbackSecret) {
		m.fail("traced-pingback", "%s: pingback %s has no signed trace", m.wid, pingback)
	}
}

// checkRoundSpans: with tracing on, a result's every refresh is a span of the task's run.
func (m *model) checkRoundSpans() {
	var r captchaflow.Result
	if m.spans == nil || m.err != nil || m.result.Get(&r) != nil {
		return
	}
	rounds := 0
	for _, sp := range m.spans.Ended() {
		if strings.HasPrefix(sp.Name(), "refresh ") && slices.Contains(sp.Attributes(), attribute.String("captchaflow.workflow_id", m.wid)) {
			rounds++
		}
	}
	if rounds != r.Refreshes {
		m.fail("round-spans", "%s: %d refresh(es), %d refresh span(s)", m.wid, r.Refreshes, rounds)
	}
}

// checkHooks: every attempt of one token's delivery carries one webhook-id and another token's (a refresh's, a held
// answer's) another, and a task that ended with a result had it accepted by notify_url (retried until accepted).
func (m *model) checkHooks(result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := map[string]string{}
	for i, h := range m.hooks {
		code := m.delivered[i].Code
		if id, ok := ids[code]; ok && id != h.id {
			m.fail("one-webhook-id", "token %s delivered under webhook-ids %q and %q", code, id, h.id)
		}
		ids[code] = h.id
	}
	if len(slices.Compact(slices.Sorted(maps.Values(ids)))) != len(ids) {
		m.fail("one-webhook-id", "two tokens delivered under one webhook-id: %v", ids)
	}
	if result != "" && m.in.NotifyURL != "" && !slices.ContainsFunc(m.hooks, func(h hook) bool { return h.ok }) {
		m.fail("one-webhook-id", "the task ended with %s, which notify_url never accepted", result)
	}
}

// checkPaid: every paid provider code (a task created and not found unsolvable) reached the caller (accepted by
// notify_url, or the result without one) or is one of the documented losses, each counted: offered but expired
// and refreshed (or delivery given up), a discarded submission's token dead before its parked callback could be
// taken, its provider given up, its answer too late (after the task moved on to
// another paid task or ended), or the task cancelled.
func (m *model) checkPaid(result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	end, offered, taken := m.ended, map[string]bool{}, map[string]bool{result: m.in.NotifyURL == ""}
	for i, h := range m.hooks {
		offered[m.delivered[i].ProviderTaskID] = true
		taken[m.delivered[i].ProviderTaskID] = taken[m.delivered[i].ProviderTaskID] || h.ok
	}
	for _, task := range m.tasks {
		late := task.arrived.IsZero() || !m.seen(task).Before(m.ended) || slices.ContainsFunc(m.tasks, func(u *providerTask) bool {
			return u.at.After(task.at) && !u.at.After(m.seen(task))
		})
		// Another submission's answer came first (or with it, its token dying with the other's) and was the one
		// offered: this one was paid after a lost-answer wait ended without the answer that came later (the
		// documented cost of that wait).
		beaten := slices.ContainsFunc(m.tasks, func(u *providerTask) bool {
			return u != task && !u.arrived.IsZero() && !u.arrived.After(task.arrived) && (offered[u.id] || taken[u.id])
		})
		switch {
		case task.unsolvable || taken[task.id]:
		case offered[task.id]:
			m.losses["expired-or-undeliverable"]++
		case m.deadWhenSeen(task):
			m.losses["expired-in-backlog"]++
		case task.discarded && m.expiredWhenSeen(task): // parked behind its number's Submit past its token's life
			m.losses["expired-while-parked"]++
		case beaten:
			m.losses["superseded"]++
		case m.abandoned(task, end):
			m.losses["given-up"]++
		case late:
			m.losses["too-late"]++
		case m.canceled:
			m.losses["canceled"]++
		default:
			m.fail("paid-delivered", "the code of %s arrived at %v and never reached the caller", task.id, task.arrived.Sub(m.epoch))
		}
	}
}

// solveFailures are the contract's failure types of SolveCaptcha: a task ends in one of them, a result, or the
// cancellation it was sent; a panic or an untyped error is a bug.
var solveFailures = []string{captchaflow.FailureInvalidInput, captchaflow.FailureUnsolvable, captchaflow.FailureDeadlineExceeded,
	captchaflow.FailureDeliveryFailed, captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, captchaflow.FailureTokenExpired,
	captchaflow.FailureProxyRejected}

func (m *model) checkTypedFailure(err error) {
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled) && m.canceled:
	case errors.As(err, &app) && app.Type() == captchaflow.FailureInvalidInput: // the model draws valid inputs only
		m.fail("valid-input-taken", "%v", err)
	case errors.As(err, &app) && slices.Contains(solveFailures, app.Type()):
	default:
		var panicked *temporal.PanicError
		if errors.As(err, &panicked) { // name the line that panicked
			err = fmt.Errorf("%w at %s", err, regexp.MustCompile(`workflows/\w+\.go:\d+`).FindString(panicked.StackTrace()))
		}
		m.fail("typed-failure", "the task ended in %v, not a contract failure", err)
	}
}

// checkDeliveries: every delivery attempt carries this run's code of a submission of the solve it belongs to.
func (m *model) checkDeliveries() {
	m.mu.Lock()
	delivered := append([]captchaflow.Result(nil), m.delivered...)
	m.mu.Unlock()
	seen := map[string]int{} // provider task -> the refresh it was first delivered in
	for _, r := range delivered {
		m.checkFresh(r, "a delivery")
		if round, ok := seen[r.ProviderTaskID]; ok && round != r.Refreshes {
			m.fail("fresh-result", "provider task %s delivered in refresh %d after it expired in refresh %d", r.ProviderTaskID, r.Refreshes, round)
		}
		if _, ok := seen[r.ProviderTaskID]; !ok {
			seen[r.ProviderTaskID] = r.Refreshes
		}
	}
}

func (m *model) checkFresh(r captchaflow.Result, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, task := range m.tasks {
		if task.id == r.ProviderTaskID {
			if r.Code != task.code || task.unsolvable {
				m.fail("fresh-result", "%s carries %.30q for %s, whose code is %s", what, r.Code, task.id, task.code)
			}
			if r.Provider != task.provider {
				m.fail("fresh-result", "%s names provider %q for %s, which %q took", what, r.Provider, task.id, task.provider)
			}
			if r.ReceivedAt.Before(task.solveAt) {
				m.fail("fresh-result", "%s was received before %s was solved", what, task.id)
			}
			if d := r.ReceivedAt.Sub(task.arrived); d > time.Second || d < -time.Second {
				m.fail("received-at", "%s says received_at %v; the worker or ingress got %s at %v (workflow tasks %v late, clocks %v ahead)",
					what, r.ReceivedAt.Sub(m.epoch), task.id, task.arrived.Sub(m.epoch), m.backlog, m.ahead)
			}
			if d := r.SubmittedAt.Sub(task.at); !task.lost && !task.discarded && (d > time.Second || d < -time.Second) {
				m.fail("submitted-at", "%s says submitted_at %v; the provider took %s at %v (clocks %v ahead)",
					what, r.SubmittedAt.Sub(m.epoch), task.id, task.at.Sub(m.epoch), m.ahead)
			}
			m.checkAnswerWhole(r, task, what)
			if (r.Via == captchaflow.ViaSubmit) != task.instant && r.Via != captchaflow.ViaCallback {
				m.fail("fresh-result", "%s came via %s for %s (code in the Submit result: %v)", what, r.Via, task.id, task.instant)
			}
			return
		}
	}
	m.fail("fresh-result", "%s names provider task %q, which this run never submitted (code %.30q)", what, r.ProviderTaskID, r.Code)
}

// unlimitedRetries undoes the test environment's cap of 10 attempts on a retry policy without one (it would end a
// poll or a no-slot run of Submit as if the deadline had come): such activities get a bound no schedule reaches,
// and ScheduleToClose (the task's deadline) ends them, as on a real server.
type unlimitedRetries struct {
	interceptor.WorkerInterceptorBase
}

func (*unlimitedRetries) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &unlimitedInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type unlimitedInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *unlimitedInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&unlimitedOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}})
}

type unlimitedOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *unlimitedOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if opts := workflow.GetActivityOptions(ctx); opts.RetryPolicy != nil && opts.RetryPolicy.MaximumAttempts == 0 {
		policy := *opts.RetryPolicy
		policy.MaximumAttempts = 100000
		opts.RetryPolicy = &policy
		ctx = workflow.WithActivityOptions(ctx, opts)
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
