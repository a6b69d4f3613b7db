package workflows

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

// Account pacing in the model (issue 31): each provider account's requests run on queues of its own
// (activities.ProviderQueue), the workflow pinning the provider. The fake providers answer rate refusals in bursts
// (in.php MAX_USER_TURN, res.php ERROR_TOO_MUCH_REQUESTS, createTask ERROR_TOO_MUCH_REQUESTS / ERROR_RATE_LIMIT or
// HTTP 429) and the worker's real Pacer pauses the account's queue on a fake server; some provider queues are not
// served (no worker polls them: the activity times out schedule-to-start, as the server would). The invariants:
//   - a rate refusal never fails a task, never counts as a submission (Submits, max_submits) and never pays twice;
//     each refused (provider, kind) had its account's queue of that kind paused, and no other queue was;
//   - a Submit not started is no submission; the next goes to another provider that serves the method (the unserved
//     one is avoided); a Poll not started asks again on the task's own queue;
//   - every Submit runs on the submit queue of the provider it names, and its provider request goes to that provider
//     only; every Poll runs on its provider's results queue (the task's own after one was not served).

// refusalWindow is a burst: the provider refuses every request of one kind from..until (on the schedule's clock).
type refusalWindow struct {
	from, until time.Duration
	word        string // the refusal: a status word, or "429" (HTTP 429 Too Many Requests)
}

// paceModel is what a schedule draws of pacing, and what its Pacer and fakes saw.
type paceModel struct {
	bursts map[string][]refusalWindow // by provider name + "/" + kind (activities.SubmitQueue, ResultsQueue)
	// unservedSubmits: the provider whose submit queue is not served ("-": none); all of its Submits, or only the first.
	unservedSubmits string
	allSubmits      bool
	// unservedPolls: "first" (each task's first Poll on a results queue), a provider (all Polls on its results
	// queue) or "-" (none).
	unservedPolls string
	refused       map[string][]string // the paced queue each refusal should pause → the words answered
	queues        *fakeQueueConfigs
	notStarted    map[string]int             // activities not started, by type
	wentElsewhere int                        // Submits that went to another provider after one was not started
	rates         map[string]providers.Rates // the accounts' configured rates (none: not paced), by provider name
	lanes         bool                       // the worker keeps lanes of its configured submit queues
	laneSubmits   int                        // Submit attempts at a configured account that ran on the task's own queue
}

// drawPace draws from its own stream (the seed's other draws stay what they were): half the schedules draw refusal
// bursts (half of them as the tasks start), a quarter an unserved submit queue, a quarter unserved polls.
func (s *schedule) drawPace(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9ace))
	p := &s.pace
	p.bursts, p.refused, p.notStarted, p.unservedSubmits, p.unservedPolls = map[string][]refusalWindow{}, map[string][]string{}, map[string]int{}, "-", "-"
	p.queues = &fakeQueueConfigs{s: s}
	if rng.IntN(2) == 0 {
		for _, fake := range s.fakes {
			for _, kind := range []string{activities.SubmitQueue, activities.ResultsQueue} {
				if rng.IntN(2) == 0 {
					continue
				}
				for range 1 + rng.IntN(3) {
					from := time.Duration(rng.Int64N(int64(5 * time.Minute)))
					if rng.IntN(2) == 0 { // a burst as the tasks start
						from = time.Duration(rng.IntN(5)) * time.Second
					}
					w := refusalWindow{from: from, until: from + time.Duration(2+rng.IntN(40))*time.Second}
					w.word = map[string]string{activities.SubmitQueue: "MAX_USER_TURN", activities.ResultsQueue: "ERROR_TOO_MUCH_REQUESTS"}[kind]
					if fake.flavor != "" {
						w.word = []string{"ERROR_TOO_MUCH_REQUESTS", "ERROR_RATE_LIMIT", "429"}[rng.IntN(3)]
					}
					p.bursts[fake.name+"/"+kind] = append(p.bursts[fake.name+"/"+kind], w)
				}
			}
		}
	}
	if rng.IntN(4) == 0 {
		p.unservedSubmits, p.allSubmits = s.routing.names[rng.IntN(len(s.routing.names))], rng.IntN(2) == 0
	}
	if rng.IntN(4) == 0 {
		p.unservedPolls = "first"
		if rng.IntN(2) == 0 {
			p.unservedPolls = s.routing.names[rng.IntN(len(s.routing.names))]
		}
	}
	s.drawRates(rng)
	if p.lanes = rng.IntN(2) == 0; p.lanes { // at a rate lanes take a share of
		for name, r := range p.rates {
			if r.Submits > 0 {
				p.rates[name] = providers.Rates{Submits: activities.LaneMinRate, Results: r.Results}
			}
		}
	}
}

// drawRates paces each account's submits and results or not (a third of the schedules pace nothing, as a provider
// that documents no rate): a task pins only among several providers of which one is paced.
func (s *schedule) drawRates(rng *rand.Rand) {
	s.pace.rates = map[string]providers.Rates{}
	for _, name := range s.routing.names {
		r := providers.Rates{Submits: float64(rng.IntN(2) * 13), Results: float64(rng.IntN(2) * 14)}
		if rng.IntN(3) == 0 {
			r = providers.Rates{}
		}
		s.pace.rates[cmp.Or(name, activities.SingleProvider)] = r
	}
	if s.routing.names[0] != "" {
		s.settings.Providers = s.routing.names
	}
}

// queueFor is where a request of kind to provider runs when the worker paces its account: its paced queue.
func (s *schedule) queueFor(provider, kind string) string {
	return activities.ProviderQueue(taskQueueOfTestEnv, provider, kind)
}

// onItsQueue: a request of kind to provider ran on queue as its pacing allows: a configured account's on its paced
// queue (a Submit also on the task's own, through its worker's lane); an unconfigured one's on the task's own, or on
// its paced queue once a refusal made the worker pace it.
func (s *schedule) onItsQueue(provider, kind, queue string) bool {
	if activities.QueueRates(s.pace.rates[cmp.Or(provider, activities.SingleProvider)])[kind] > 0 {
		return queue == s.queueFor(provider, kind) || s.pace.lanes && kind == activities.SubmitQueue && queue == taskQueueOfTestEnv
	}
	return queue == taskQueueOfTestEnv || queue == s.queueFor(provider, kind) && s.settings.Pacing.Queue(provider, kind) != ""
}

// pacer is the worker's Pacer, its queue configs on the fake server; with lanes, its reads that open them done (the
// lane's room is real time's: a schedule's first Submits take it, the others go to their queue).
func (s *schedule) pacer() *activities.Pacer {
	p := &activities.Pacer{Service: s.pace.queues, Namespace: "default", TaskQueue: taskQueueOfTestEnv, Rates: s.pace.rates,
		Identity: "model-worker"}
	read, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		p.Keep(read, time.Hour, func(queue string, err error) { s.fail("lanes-open", "reading %s: %v", queue, err) })
	}
	return p
}

// refusal is the rate refusal p answers now (s.mu held) to a request of kind ("": none, p is not in a burst); it is
// recorded against the paced queue it must pause.
func (s *schedule) refusal(p *fakeProvider, kind string) string {
	now := s.env.Now().Sub(s.epoch)
	i := slices.IndexFunc(s.pace.bursts[p.name+"/"+kind], func(b refusalWindow) bool { return b.from <= now && now < b.until })
	if i < 0 {
		return ""
	}
	word := s.pace.bursts[p.name+"/"+kind][i].word
	queue := activities.ProviderQueue(taskQueueOfTestEnv, p.name, kind)
	if prof, _ := providers.ProfileOf(p.flavor); kind != activities.ResultsQueue || word != prof.TaskRateCode || p.flavor == "" {
		s.pace.refused[queue] = append(s.pace.refused[queue], cmp.Or(map[string]string{"429": "HTTP 429"}[word], word))
	} // else one task's polls refused (CapMonster): that task waits, the account's queue is not paused
	s.logf("%s at %q -> rate refusal %s", kind, p.name, word)
	return word
}

// writeRefusal answers word in p's protocol: HTTP 429, or the status word.
func writeRefusal(w http.ResponseWriter, p *fakeProvider, word string) {
	switch {
	case word == "429":
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
	case p.flavor == "":
		writeJSON(w, map[string]any{"status": 0, "request": word})
	default:
		writeJSON(w, map[string]any{"errorId": 1, "errorCode": word})
	}
}

// fakeQueueConfigs is the server's side of the Pacer: it records every refusal signalled to a queue's keeper (the
// keeper's pause and ramp are workflows/pacekeeper_test.go's).
type fakeQueueConfigs struct {
	workflowservice.WorkflowServiceClient
	s       *schedule
	mu      sync.Mutex
	signals []activities.PaceOrder
}

// DescribeTaskQueue answers no limit and, with lanes, the one worker polling.
func (f *fakeQueueConfigs) DescribeTaskQueue(context.Context, *workflowservice.DescribeTaskQueueRequest, ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	if !f.s.pace.lanes {
		return &workflowservice.DescribeTaskQueueResponse{}, nil
	}
	return &workflowservice.DescribeTaskQueueResponse{Pollers: []*taskqueuepb.PollerInfo{{Identity: "model-worker"}}}, nil
}

func (f *fakeQueueConfigs) SignalWithStartWorkflowExecution(_ context.Context, r *workflowservice.SignalWithStartWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.SignalWithStartWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var order activities.PaceOrder
	if err := converter.GetDefaultDataConverter().FromPayloads(r.GetSignalInput(), &order); err != nil || r.GetWorkflowId() != activities.PaceKeeperID(order.Queue) {
		f.s.fail("refusal-pauses-its-queue", "a refusal signalled %s: %v %+v", r.GetWorkflowId(), err, order)
	}
	f.signals = append(f.signals, order)
	return &workflowservice.SignalWithStartWorkflowExecutionResponse{}, nil
}

// checkPaused: every refused (provider, kind) had its account's queue of that kind's keeper told (naming a refusal
// it answered), and no other queue's was.
func (s *schedule) checkPaused() {
	s.pace.queues.mu.Lock()
	defer s.pace.queues.mu.Unlock()
	paused := map[string]bool{}
	for _, r := range s.pace.queues.signals {
		words, refused := s.pace.refused[r.Queue]
		if !refused || !slices.Contains(words, r.What) {
			s.fail("refusal-pauses-its-queue", "%s's keeper told of %q; refusals there: %v", r.Queue, r.What, words)
		}
		paused[r.Queue] = true
	}
	for queue, words := range s.pace.refused {
		if !paused[queue] {
			s.fail("refusal-pauses-its-queue", "%s refused %v and was never paused (paused: %v)", queue, words, paused)
		}
	}
}

// checkRefusalNeverFails: a task that met rate refusals does not fail for them (a refusal is retried, never final).
func (m *model) checkRefusalNeverFails() {
	if m.err == nil || len(m.pace.refused) == 0 {
		return
	}
	for _, word := range []string{"MAX_USER_TURN", "TOO_MUCH_REQUESTS", "RATE_LIMIT", "HTTP 429", "Too Many Requests"} {
		if strings.Contains(m.err.Error(), word) {
			m.fail("refusal-never-fails", "%s failed over a rate refusal: %v", m.wid, m.err)
		}
	}
}

// counts is what a task-creating answer makes of a submission: taken, lost (maybe taken) or refused as unsolvable.
var counts = map[string]bool{"ok": true, "reset": true, "504": true, "500": true, "unsolvable": true}

// checkSubmits: the result's Submits are this run's submissions the provider answered as one (taken, lost or found
// unsolvable) and the task saw: no rate refusal, no unserved Submit, no no-slot or zero-balance answer is one.
func (m *model) checkSubmits(submits int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	made := 0
	for n, answers := range m.answers {
		if !m.unseenN[n] && slices.ContainsFunc(answers, func(a string) bool { return counts[a] }) {
			made++
		}
	}
	if submits != made {
		m.fail("refusal-not-a-submission", "%s: the result says %d submission(s); the providers answered %d as one (%v, unseen %v)",
			m.wid, submits, made, m.answers, m.unseenN)
	}
}

// checkPaysOnce: one submission (of this run) creates one provider task at most, however often it was refused first.
func (m *model) checkPaysOnce(task *providerTask) {
	for _, t := range m.tasks {
		if t != task && !t.discarded && !task.discarded && t.n == task.n {
			m.fail("refusal-pays-once", "%s: submission %d created %s and %s", m.wid, task.n, t.id, task.id)
		}
	}
}

// checkSubmitQueue: a Submit runs on the paced submit queue of the provider it names, or of the one provider (a
// task choosing among several, or at an unpaced account: its own queue, where Submit says why no provider serves it).
func (m *model) checkSubmitQueue(queue string, req activities.SubmitRequest) {
	want, ok := m.queueFor(req.Provider, activities.SubmitQueue), m.onItsQueue(req.Provider, activities.SubmitQueue, queue)
	if m.routed() && req.Provider == "" && len(m.settings.Providers) > 1 {
		want, ok = taskQueueOfTestEnv, queue == taskQueueOfTestEnv
	}
	if !ok {
		m.fail("submit-pinned-to-its-queue", "%s: Submit %d naming provider %q ran on %s, not %s", m.wid, req.Submission, req.Provider, queue, want)
	}
	m.submitQueues[req.Submission] = queue
	if queue == taskQueueOfTestEnv && activities.QueueRates(m.pace.rates[cmp.Or(req.Provider, activities.SingleProvider)])[activities.SubmitQueue] > 0 {
		m.pace.laneSubmits++
	}
}

// checkRequestQueue: a task-creating request to a paced account runs on its submit queue: never on another's.
func (m *model) checkRequestQueue(provider string, n int) {
	queue, ok := m.submitQueues[n]
	if ok && !m.onItsQueue(provider, activities.SubmitQueue, queue) {
		m.fail("submit-pinned-to-its-queue", "%s: submission %d's request went to %q from queue %s", m.wid, n, cmp.Or(provider, activities.SingleProvider), queue)
	}
}

// checkPollQueue: a Poll runs on its paced provider's results queue, or on the task's own once one was not served.
func (m *model) checkPollQueue(queue string, req activities.PollRequest, retry *temporal.RetryPolicy) {
	want, ok := m.queueFor(req.Provider, activities.ResultsQueue), m.onItsQueue(req.Provider, activities.ResultsQueue, queue)
	if m.pollUnserved[req.ProviderTaskID] { // the next one, once, on the task's own queue: outside the budget
		want, ok = taskQueueOfTestEnv, queue == taskQueueOfTestEnv
		delete(m.pollUnserved, req.ProviderTaskID)
		if retry == nil || retry.MaximumAttempts != 1 {
			m.fail("poll-once-off-its-queue", "%s: Poll of %s on the task's own queue may make more than one request (%+v)", m.wid, req.ProviderTaskID, retry)
		}
	}
	if !ok {
		m.fail("poll-on-its-queue", "%s: Poll of %s at %q ran on %s, not %s (an earlier one not served: %v)",
			m.wid, req.ProviderTaskID, req.Provider, queue, want, m.pollUnserved[req.ProviderTaskID])
	}
}

// checkWentElsewhere: after a Submit at unserved was not started, the next one avoids it and goes to another
// provider the task may use that serves the method (whose circuit is not open, and that the task does not avoid
// for an unsolvable answer), when there is one.
func (m *model) checkWentElsewhere(unserved string, req activities.SubmitRequest) {
	if !m.routed() {
		return
	}
	if !slices.Contains(req.Avoid, unserved) {
		m.fail("unserved-goes-elsewhere", "%s: Submit %d does not avoid %s, whose queue did not serve the last one (avoid %v)", m.wid, req.Submission, unserved, req.Avoid)
	}
	others := slices.DeleteFunc(m.acts.Providers.Candidates(req.Providers, req.Exclude, nil), func(p *providers.Provider) bool {
		return p.Name == unserved || !m.serves(p.Name) || m.breaker.Lacks(p.Name, req.Method, req.Params) || m.breaker.IsOpen(p.Name)
	}) // one avoided before (it found the task unsolvable) counts: the latest avoided goes last
	if req.Provider == unserved && len(others) > 0 {
		m.fail("unserved-goes-elsewhere", "%s: Submit %d went to %s again, whose queue did not serve the last one, though %s serves", m.wid, req.Submission, unserved, others[0].Name)
	}
	if req.Provider != unserved {
		m.pace.wentElsewhere++
	}
}

// unservedQueues is the worker interceptor that leaves some provider queues unpolled: an activity scheduled there
// ends with a schedule-to-start timeout once its ScheduleToStart passes, as the server ends it, and never runs.
type unservedQueues struct {
	interceptor.WorkerInterceptorBase
	s *schedule
}

type unservedInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	s *schedule
}

type unservedOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	s        *schedule
	polls    int    // Polls scheduled on a results queue by this run
	submits  int    // Submits scheduled on the unserved provider's queue
	unserved string // the provider of the last Submit not started, until the next Submit
}

func (u *unservedQueues) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &unservedInbound{interceptor.WorkflowInboundInterceptorBase{Next: next}, u.s}
}

func (i *unservedInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&unservedOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, s: i.s})
}

func (o *unservedOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	queue, s := workflow.GetActivityOptions(ctx).TaskQueue, o.s
	m := s.solveOrNil(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if m == nil || len(args) != 1 {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	var notServed func() // what the model learns when the activity times out unstarted (nil: it is served)
	switch req := args[0].(type) {
	case activities.SubmitRequest:
		if o.unserved != "" {
			s.mu.Lock()
			m.checkWentElsewhere(o.unserved, req)
			s.mu.Unlock()
			o.unserved = ""
		}
		if pin := s.pace.unservedSubmits; queue == activities.ProviderQueue(taskQueueOfTestEnv, pin, activities.SubmitQueue) {
			if o.submits++; o.submits == 1 || s.pace.allSubmits {
				notServed = func() { o.unserved, m.unservedAt[pin] = pin, true }
			}
		}
	case activities.PollRequest:
		s.mu.Lock()
		m.checkPollQueue(cmp.Or(queue, taskQueueOfTestEnv), req, workflow.GetActivityOptions(ctx).RetryPolicy)
		s.mu.Unlock()
		if strings.HasSuffix(queue, "/"+activities.ResultsQueue) {
			o.polls++
			if s.pace.unservedPolls == "first" && o.polls == 1 ||
				queue == activities.ProviderQueue(taskQueueOfTestEnv, s.pace.unservedPolls, activities.ResultsQueue) {
				notServed = func() {
					m.pollUnserved[req.ProviderTaskID], m.unservedFor[req.ProviderTaskID] = true, unservedWait(ctx)
				}
			}
		}
	}
	if notServed == nil {
		return o.submitOut(ctx, m, args[0], o.movedOn(ctx, m, activityType, args...))
	}
	// A request not served within the task's deadline times out schedule-to-start.
	wait := unservedWait(ctx)
	s.mu.Lock()
	s.logf("%s %s on %s: no worker polls it; it times out schedule-to-start in %v", m.wid, activityType, queue, wait)
	s.pace.notStarted[activityType]++
	s.mu.Unlock()
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := workflow.Sleep(ctx, wait); err != nil {
			set.SetError(temporal.NewCanceledError())
			return
		}
		s.mu.Lock()
		notServed()
		s.mu.Unlock()
		set.SetError(notStartedErr())
	})
	return o.submitOut(ctx, m, args[0], f)
}

// unservedWait is how long an activity waits on a queue no worker polls: the server bounds ScheduleToStart by
// ScheduleToClose, and at a tie fires ScheduleToStart first (its timer sequence orders equal deadlines by timeout type).
func unservedWait(ctx workflow.Context) time.Duration {
	opts := workflow.GetActivityOptions(ctx)
	return min(opts.ScheduleToStartTimeout, opts.ScheduleToCloseTimeout)
}

// solveOrNil is the task whose workflow ID is wid (nil: the root of several tasks).
func (s *schedule) solveOrNil(wid string) *model {
	for _, m := range s.solves {
		if m.wid == wid {
			return m
		}
	}
	return nil
}

// coverPace counts what the schedule exercised of pacing.
func (s *schedule) coverPace(covered map[string]int) {
	for queue, words := range s.pace.refused {
		kind := queue[strings.LastIndex(queue, "/")+1:]
		for _, w := range words {
			covered["rate-refused:"+kind+":"+w]++
		}
	}
	if len(s.pace.refused) > 0 {
		covered["schedules-rate-refused"]++
	}
	for typ, n := range s.pace.notStarted {
		covered["not-started:"+typ] += n
	}
	covered["unserved-went-elsewhere"] += s.pace.wentElsewhere
	covered["lane-submits"] += s.pace.laneSubmits
}

// movedOn runs the activity; a pinned Submit the worker turned away (ProviderMoved: its circuit for the pin is open)
// teaches the model that the task may avoid the pin from then on.
func (o *unservedOutbound) movedOn(ctx workflow.Context, m *model, activityType string, args ...any) workflow.Future {
	f := o.Next.ExecuteActivity(ctx, activityType, args...)
	req, ok := args[0].(activities.SubmitRequest)
	if !ok || req.Provider == "" {
		return f
	}
	out, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if captchaflow.FailureType(f.Get(ctx, nil)) == activities.FailureProviderMoved {
			o.s.mu.Lock()
			m.unservedAt[req.Provider] = true
			o.s.mu.Unlock()
		}
		set.Chain(f)
	})
	return out
}
