package workflows

// One task's life: admit → submit → await the answer or the callback timeout → poll → resubmit → deliver.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/internal/telemetry"
)

// acts is only used for its method values: ExecuteActivity takes the activity's name and signature from them.
var acts *activities.Activities

// Change IDs, each (but changeProviderThreads) asked only where the new build acts otherwise: other tasks record none.
const (
	// changeProviderThreads never retires: its marker records whether the task takes slots, whatever the replayer's plan.
	changeProviderThreads  = "provider-threads-admission"
	changeQuirks           = "provider-quirks"        // issue 29: which callbacks, answers and refusals a task acts on
	changeProxies          = "proxy-rejected"         // issue 38: a bad params.proxy, a proxy word ending the task
	changeKinds            = "kinds-answer-more"      // a code of a kind that answers more (user agent, cookies) is confirmed
	changeAnswersCompleted = "answers-completed"      // such a code from a lost or other candidate's pingback is completed
	changeInbox            = "reset-inbox"            // a callback for a taskless submission (parked too) is a reset's discarded one's
	changeRoutingObserve   = "scored-routing-observe" // the task hands its solve's submissions to the worker's routing model
	// changeFleetPacing: the task picks each submission's provider (the slot ask's local activity) for Submit to run on
	// its paced queue; recorded only with several providers, one paced (with one, its queue is known; replay ignores queues).
	changeFleetPacing = "provider-queues"
	// changeWhole: a callback's code of a kind that answers more is taken and completed within half its life (once on the
	// task's own queue if its provider's is unserved); a token that expired undelivered gives way to a live paid one the
	// solve holds (a lost or discarded submission's) instead of solving again.
	changeWhole     = "answers-whole"
	changeProxySaid = "proxy-word-no-refresh" // a proxy word heard from a superseded submission bars a refresh
	changeFirstPaid = "parked-before-instant" // a code parked while Submit ran beats the code Submit came back with
)

// changed tells whether this run acts as the build that made change (false: a history recorded before it).
func changed(ctx workflow.Context, change string) bool {
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == 1
}

// checkInput judges the workflow ID (a callback URL segment) and the input as this build does, or as 1.0 did for its
// histories (it took the IDs "." and ".." and always refused params.action). Validate sorts keys, parses URLs: pure.
//
//workflowcheck:ignore
func checkInput(ctx workflow.Context, in captchaflow.Input) error {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	valid := in.Validate()
	if valid != nil && in.ValidBeforeProxies() == nil && !changed(ctx, changeProxies) {
		valid = nil // a build before proxies refused none of the checks since (Validate's last)
	}
	err, old := cmp.Or(captchaflow.ValidateWorkflowID(id), valid), valid
	if id != "." && id != ".." {
		old = err
	}
	for k := range in.Params {
		if strings.EqualFold(k, "action") {
			old = cmp.Or(old, errors.New("params.action: set by captchaflow, must not be passed"))
		}
	}
	if (err == nil) != (old == nil) && !changed(ctx, changeQuirks) {
		return old
	}
	return err
}

// Activity timeouts: the worker requires its provider client timeout (30 s by default) to be shorter.
const (
	ProviderStartToClose     = 45 * time.Second // one attempt of submit, poll, confirm
	DeliverStartToClose      = 30 * time.Second // one attempt of a delivery
	heartbeatTimeout         = 10 * time.Second // notices a dead worker during a slow request
	maxConfirmsPerSubmission = 2                // res.php confirmations (of confirmAttempts requests) callbacks may start
	confirmAttempts          = 3
	firstResubmitBackoff     = 5 * time.Second // doubling up to maxResubmitBackoff after each refused in.php request
	maxResubmitBackoff       = time.Minute
	deliveryExpiryMargin     = 2 * time.Second // a delivery ends this long before expires_at: clocks may differ
)

// Settings are the worker settings that change what SolveCaptcha does.
type Settings struct {
	ProviderThreads int               // PROVIDER_THREADS (0: unset): each submission then holds one of the plan's slots
	Pacing          *activities.Pacer // which accounts the worker paces now (nil: none)
	Providers       []string          // PROVIDERS_FILE's names (nil: CAPTCHAAI_*'s)
}

// SolveCaptcha solves one CAPTCHA task (callback, else polling; resubmitting up to max_submits) and delivers it.
func SolveCaptcha(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
	return solveCaptcha(ctx, in, Settings{})
}

// RegisterWorkflow registers the workflows under their contract names: a replayer takes this, a worker Register.
func RegisterWorkflow(r worker.WorkflowRegistry) {
	registerWorkflows(r, Settings{})
	r.RegisterWorkflowWithOptions(ProviderThreads, workflow.RegisterOptions{Name: activities.ThreadsWorkflowType}) // for the replayer
}

// registerWorkflows registers every workflow, SolveCaptcha bound to the worker's settings.
func registerWorkflows(r worker.WorkflowRegistry, settings Settings) {
	solve := func(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
		return solveCaptcha(ctx, in, settings)
	}
	r.RegisterWorkflowWithOptions(solve, workflow.RegisterOptions{Name: captchaflow.WorkflowType})
	r.RegisterWorkflowWithOptions(ReportVerdict, workflow.RegisterOptions{Name: captchaflow.ReportWorkflowType})
	r.RegisterWorkflowWithOptions(CheckBalance, workflow.RegisterOptions{Name: captchaflow.BalanceWorkflowType})
	r.RegisterWorkflowWithOptions(PaceKeeper, workflow.RegisterOptions{Name: activities.PaceWorkflowType})
}

// Register registers everything a SolveCaptcha worker runs; every worker registers here, so none can drift.
func Register(r worker.Registry, acts *activities.Activities, settings Settings) {
	registerWorkflows(r, settings)
	r.RegisterActivity(acts)
}

type solver struct {
	settings             Settings
	in                   captchaflow.Input
	status               captchaflow.Status
	deadlineAt           time.Time // when deadline_seconds runs out for the current solve
	logger               log.Logger
	callbacks            workflow.ReceiveChannel // the listener routes them into table
	grants               workflow.ReceiveChannel // and these into admission
	table                table
	route                route
	admission            admission
	pinDecided, pinning  bool                       // the task's choice of pinning, made at its first submission
	laneSpent            bool                       // a lane's Submit found no room: the task's next ones queue
	searched             captchaflow.Phase          // what CaptchaPhase was last set to
	observed             *activities.ObserveRequest // a solved solve's submissions for the model, carried by its delivery
	refusals             int                        // in.php refusals so far: they grow the backoff before the next request
	proxySaid            string                     // a proxy word a superseded submission's callback said: no refresh pays for it
	handovers            int                        // held answers delivered after a token expired (each a webhook-id of its own)
	roundSubmits         int                        // status.Submits when the current solve began: max_submits bounds each solve
	callbackTimeoutUnset bool
}

// solveCaptcha starts the listener and registers the status query and the hint Update before anything can block.
func solveCaptcha(ctx workflow.Context, in captchaflow.Input, settings Settings) (captchaflow.Result, error) {
	info := workflow.GetInfo(ctx)
	s := &solver{settings: settings, in: in.WithDefaults(), logger: workflow.GetLogger(ctx),
		status:               captchaflow.Status{Phase: captchaflow.PhaseSubmitting},
		callbackTimeoutUnset: in.CallbackTimeoutSeconds == 0, // before WithDefaults: the worker's per-method default then
		// Pingback URLs and webhook-ids name the run the reset chain started from: the runs it was reset from are its own.
		table:     table{runID: cmp.Or(info.OriginalRunID, info.WorkflowExecution.RunID)},
		callbacks: workflow.GetSignalChannel(ctx, captchaflow.CallbackSignal),
		grants:    workflow.GetSignalChannel(ctx, activities.SlotGrantedSignal)}
	workflow.Go(ctx, s.listen)
	if err := errors.Join(workflow.SetQueryHandler(ctx, captchaflow.StatusQuery, s.statusNow), s.handleHints(ctx)); err != nil {
		return captchaflow.Result{}, err
	}
	res, err := s.run(ctx)
	_ = workflow.Await(ctx, s.quiet) // late duplicates are routed (and dropped) before the run closes
	return res, err
}

// run validates, solves and delivers; every way out goes through fail or PhaseDone, so metrics see the outcome.
func (s *solver) run(ctx workflow.Context) (captchaflow.Result, error) {
	if err := checkInput(ctx, s.in); err != nil {
		return captchaflow.Result{}, s.fail(ctx, temporal.NewNonRetryableApplicationError(
			"invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil))
	}
	s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
	s.setPhase(ctx, captchaflow.PhaseSubmitting)
	res, err := s.solve(ctx)
	if err == nil && s.in.NotifyURL != "" {
		res, err = s.deliverFresh(ctx, res)
	}
	if err != nil {
		return captchaflow.Result{}, s.fail(ctx, err)
	}
	s.setPhase(ctx, captchaflow.PhaseDone)
	s.finished(ctx, cmp.Or(outcomes[string(res.Via)], "callback"), "completed")
	return res, nil
}

// settle stamps the solve's code with its expiry, as the status's token.
func (s *solver) settle(ctx workflow.Context, res captchaflow.Result) captchaflow.Result {
	res = s.completeAnswer(ctx, res)
	res.ReceivedAt = heldAt(ctx, res.SubmittedAt, res.ReceivedAt)
	res.ExpiresAt, res.Refreshes, res.CostUSD = s.in.ExpiresAt(res.ReceivedAt), s.status.Refreshes, s.table.cost()
	s.status.ReceivedAt, s.status.ExpiresAt = res.ReceivedAt, res.ExpiresAt
	metrics, took := workflow.GetMetricsHandler(ctx), res.ReceivedAt.Sub(res.SubmittedAt)
	metrics.Timer(MetricResultLatency).Record(took)
	if res.Provider != "" {
		metrics.WithTags(map[string]string{"provider": res.Provider}).Timer(MetricProviderSolveSeconds).Record(took)
	}
	return res
}

// solve attempts until a submission yields a code, resubmitting while the provider answers unsolvable.
func (s *solver) solve(ctx workflow.Context) (_ captchaflow.Result, err error) {
	s.roundSubmits = s.status.Submits
	defer s.releaseKept(ctx, true) // no submission of this solve is waited for any more
	defer func() { s.observe(ctx, err == nil && s.in.NotifyURL != "") }()
	for {
		o := s.attempt(ctx)
		if o.kind != outSolved && !temporal.IsCanceledError(o.err) {
			if answered, ok := s.takeLostAnswer(ctx); ok {
				o = answered // a lost submission answered while this attempt failed: the answer wins
			}
		}
		switch o.kind {
		case outSolved:
			return s.settle(ctx, o.res), nil
		case outFailed:
			return captchaflow.Result{}, o.err
		case outBalance:
			continue // nothing was submitted: max_submits is untouched
		case outGaveUp:
			s.roundSubmits++ // the provider failed, not the task
		}
		if n := s.status.Submits - s.roundSubmits; n >= s.in.MaxSubmits {
			return captchaflow.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the provider could not solve the task in %d submission(s); last: %s", n, o.reason),
				captchaflow.FailureUnsolvable, nil)
		}
		s.logger.Info("resubmitting", "ProviderTaskID", s.status.ProviderTaskID, "Submits", s.status.Submits, "Reason", o.reason)
		count(ctx, MetricResubmits)
		if o.kind == outRefused { // after an in.php refusal, back off
			if err := s.sleep(ctx, resubmitBackoff(s.refusals)); err != nil {
				return captchaflow.Result{}, err
			}
		}
	}
}

// heldAt is when the code came: at, stamped by the activity or ingress that got it, held between its submission and
// this workflow task so that a skewed clock cannot move the token's life (asked only then: older histories kept it).
func heldAt(ctx workflow.Context, submitted, at time.Time) time.Time {
	switch now := workflow.Now(ctx); {
	case at.After(now) && changed(ctx, changeQuirks):
		return now
	case at.Before(submitted) && changed(ctx, changeQuirks):
		return submitted
	}
	return at
}

// attempt takes a slot, makes one submission and waits for what it comes to.
func (s *solver) attempt(ctx workflow.Context) outcome {
	if o, ok := s.takeLostAnswer(ctx); ok {
		return o
	}
	release, o, ok := s.admit(ctx)
	if !ok {
		return o
	}
	defer release()
	s.submittingPhase(ctx)
	remaining := s.remaining(ctx)
	if remaining <= 0 {
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	pin, err := s.pin(ctx)
	if err != nil {
		return failed(err)
	}
	sub := &submission{N: len(s.table.subs) + 1, Round: s.table.round, State: subSubmitting, SubmittedAt: workflow.Now(ctx), pin: pin.Provider}
	s.table.subs = append(s.table.subs, sub)
	submitCtx, cancelSubmit := workflow.WithCancel(ctx)
	// Transient trouble is retried until the deadline; a lost answer and a zero balance come to the workflow.
	opts := withRetry(submitCtx, ProviderStartToClose, remaining, backoff(time.Second, 30*time.Second,
		slices.Concat(activities.NonRetryableProviderErrors, lostSubmitTypes, []string{activities.FailureProviderZeroBalance})...))
	queue, lane := s.lane(ctx, pin.Queue)
	f := workflow.ExecuteActivity(s.onQueue(opts, queue, 0), acts.Submit, activities.SubmitRequest{
		Method: s.in.Method, Params: s.in.Params, RunID: urlRun(s.table.runID, workflow.GetInfo(ctx).WorkflowExecution.RunID),
		Submission: sub.N, Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid, Provider: pin.Provider,
		Reason: pin.Reason, Lane: lane})
	if err := s.await(ctx, func() bool { return f.IsReady() || s.table.settled() }); err != nil {
		return failed(err)
	}
	if !f.IsReady() {
		cancelSubmit() // a lost submission answered: no more in.php requests
		s.unpark(ctx, sub, false)
		o, _ := s.takeLostAnswer(ctx)
		return o
	}
	var r activities.SubmitResult
	if err := f.Get(ctx, &r); err != nil {
		return s.submitFailed(ctx, sub, err)
	}
	return s.accepted(ctx, sub, r)
}

// submitFailed decides what a failed Submit means: its answer lost, a zero balance, a refusal, or the task's end.
func (s *solver) submitFailed(ctx workflow.Context, sub *submission, err error) outcome {
	sub.State = subRefused
	lost := submitOutcomeUnknown(err)
	if lost {
		lostAt(sub, err, s.table.runID)
	}
	if !lost || s.remaining(ctx) <= 0 { // no wait for this submission follows: what it parked is routed now
		s.unpark(ctx, sub, lost)
	}
	switch {
	case notStarted(err):
		return s.unserved(ctx, sub)
	case lost && s.remaining(ctx) <= 0:
		s.submitted(sub, "", sub.SubmittedAt) // maybe paid: a submission, whose parked code solve may take
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	case lost:
		return s.awaitLost(ctx, sub, err)
	case captchaflow.FailureType(err) == activities.FailureProviderZeroBalance:
		return s.awaitBalance(ctx, err)
	case captchaflow.FailureType(err) == activities.FailureProviderMoved:
		if sub.pin != "" { // the worker that took it has the pin's circuit open: the next pin goes elsewhere
			s.route.last(sub.pin)
		}
		return outcome{kind: outBalance} // nothing was submitted: admit again, at the provider Submit moves to
	case captchaflow.FailureType(err) == activities.FailureProviderUnsupported:
		return s.unsupported(ctx, err)
	case captchaflow.FailureType(err) == activities.FailureLaneSpent:
		s.laneSpent = true
		return outcome{kind: outBalance} // nothing was sent: submitted again, on the queue
	}
	o := s.classify(err)
	if o.kind == outResubmit { // a refused request is a submission all the same, and the next one must back off
		s.status.Submits++
		s.refusals++
		return outcome{kind: outRefused, reason: "in.php refused the submission: " + o.reason}
	}
	return o
}

// submitted counts sub in the status: in.php answered something, so no zero-balance pause goes on.
func (s *solver) submitted(sub *submission, providerTaskID string, at time.Time) {
	s.status.Waiting, s.status.WaitingSince = "", time.Time{}
	s.status.ProviderTaskID, s.status.Provider = providerTaskID, sub.Provider
	s.status.Submits++
	s.status.SubmittedAt = at
}

// accepted records what in.php answered and awaits the code.
func (s *solver) accepted(ctx workflow.Context, sub *submission, r activities.SubmitResult) outcome {
	if s.callbackTimeoutUnset && r.CallbackTimeoutSeconds > 0 {
		s.in.CallbackTimeoutSeconds = r.CallbackTimeoutSeconds // the worker's default, from history
	}
	sub.Provider, sub.price, sub.refunds, sub.route = r.Provider, r.PriceUSD, r.Refunds, r.Route
	sub.urlRun = cmp.Or(r.RunID, s.table.runID) // what it named, also where a reset replays another run's submission
	if r.Alternatives > 0 {
		sub.giveUp = time.Duration(r.GiveUpSeconds) * time.Second
	}
	s.in.PollIntervalSeconds = max(s.in.PollIntervalSeconds, r.PollIntervalSeconds)
	at := workflow.Now(ctx)
	if !r.AcceptedAt.IsZero() { // the provider took it then: a paced queue's wait before is no solve time (older: none)
		sub.SubmittedAt = heldAt(ctx, sub.SubmittedAt, r.AcceptedAt)
		at = sub.SubmittedAt
	}
	s.submitted(sub, r.ProviderTaskID, at)
	s.learnID(ctx, sub, r.ProviderTaskID, subWaiting)
	if r.Code == "" {
		return s.awaitCode(ctx, sub)
	}
	res := captchaflow.Result{ProviderTaskID: sub.ProviderID, Provider: sub.Provider, Code: r.Code,
		Via: captchaflow.ViaSubmit, ReceivedAt: cmp.Or(r.ReceivedAt, workflow.Now(ctx))}
	if s.table.answered() == nil || !changed(ctx, changeFirstPaid) {
		return s.solvedBy(sub, res)
	}
	o, _ := s.takeLostAnswer(ctx)                                          // the first paid code to arrive is the result
	sub.State, sub.answer = subSolved, &outcome{kind: outSolved, res: res} // held: handed over should that one expire
	return o
}

// awaitCode waits for the answer: the callback until the callback timeout, then the callback or the poll.
func (s *solver) awaitCode(ctx workflow.Context, sub *submission) outcome {
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	arrived := func() bool { return sub.answer != nil || s.table.settled() }
	ok, err := s.awaitFor(ctx, min(s.in.CallbackTimeout(), s.remaining(ctx)), arrived)
	if err != nil {
		return failed(err)
	}
	if !ok {
		if s.remaining(ctx) <= 0 {
			return failed(deadlineExceeded(s.in.DeadlineSeconds))
		}
		s.logger.Info("no callback in time; polling res.php", "ProviderTaskID", sub.ProviderID)
		s.setPhaseSearchable(ctx, captchaflow.PhasePolling)
		count(ctx, MetricFallbackPollsStarts)
		pollCtx, stopPolling := workflow.WithCancel(ctx)
		defer stopPolling()
		s.ask(ctx, pollCtx, sub, captchaflow.ViaPoll, sub.giveUp > 0, s.pollRetry()) // the retry policy is the loop
		if err := s.await(ctx, arrived); err != nil {
			return failed(err)
		}
	}
	if sub.answer == nil { // a lost submission's
		o, _ := s.takeLostAnswer(ctx)
		return o
	}
	o := *sub.answer
	switch o.kind {
	case outSolved:
		return s.solvedBy(sub, o.res)
	case outGaveUp:
		return s.giveUp(ctx, sub)
	case outResubmit:
		sub.State = subUnsolvable
		if sub.Provider != "" { // the next submission asks it last
			count(ctx, MetricProviderUnsolvable, "provider", sub.Provider)
			s.route.last(sub.Provider)
		}
	}
	return o
}

// awaitLost waits up to lost_answer_wait_seconds for a lost (maybe paid) Submit's callback before submitting again.
func (s *solver) awaitLost(ctx workflow.Context, sub *submission, cause error) outcome {
	s.submitted(sub, "", sub.SubmittedAt)
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**phase:** %s · submission %d/%d: in.php's answer was lost, waiting for its callback",
		captchaflow.PhaseAwaitingCallback, s.status.Submits, s.in.MaxSubmits))
	end := workflow.Now(ctx).Add(min(s.in.LostAnswerWait(), s.remaining(ctx)))
	s.logger.Warn("in.php's answer was lost; waiting for the submission's callback before submitting again",
		"Submits", s.status.Submits, "Until", end, "Error", cause)
	s.learnID(ctx, sub, "", subAnswerLost)
	settled := func() bool { return s.table.settled() || sub.State == subUnsolvable }
	for !settled() && workflow.Now(ctx).Before(end) {
		d := end.Sub(workflow.Now(ctx))
		if sub.giveUp > 0 { // a task that may go elsewhere asks this often whether its provider is down for good
			d = min(d, sub.giveUp)
		}
		if ok, err := s.awaitFor(ctx, d, settled); err != nil {
			return failed(err)
		} else if !ok && workflow.Now(ctx).Before(end) && s.providerGivenUp(ctx, sub.Provider) && !settled() {
			return s.giveUp(ctx, sub)
		}
	}
	switch o, answered := s.takeLostAnswer(ctx); { // unanswered, the submission stays open: a late answer still counts
	case answered && o.kind == outFailed: // a proxy word: the user's proxy, no second payment with it
		count(ctx, MetricSubmitsLost, "outcome", "unsolvable")
		return o
	case answered:
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback) // CaptchaTaskId: the ID its callback named
		return o
	case sub.State == subUnsolvable:
		count(ctx, MetricSubmitsLost, "outcome", "unsolvable") // its own pingback said the provider gave up
		return outcome{kind: outResubmit, reason: "the submission whose in.php answer was lost called back unsolvable"}
	case s.remaining(ctx) <= 0:
		count(ctx, MetricSubmitsLost, "outcome", "deadline")
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	count(ctx, MetricSubmitsLost, "outcome", "resubmitted")
	return outcome{kind: outResubmit, reason: "in.php's answer was lost and no callback came in time"}
}

// takeLostAnswer takes the answer of a lost submission, if one came, as the result; its proxy word ends the task.
func (s *solver) takeLostAnswer(ctx workflow.Context) (outcome, bool) {
	sub := s.table.answered()
	if rejected := s.table.rejected(); sub == nil && rejected != nil {
		return failed(activities.ProxyRejected(rejected.rejected, s.in.Params)), true
	} else if sub == nil {
		return outcome{}, false
	}
	count(ctx, MetricSubmitsLost, "outcome", "callback") // solved, nothing paid twice
	s.status.ProviderTaskID = sub.ProviderID
	s.logger.Info("a submission whose in.php answer was lost called back", "ProviderTaskID", sub.ProviderID, "Submission", sub.N)
	return s.solvedBy(sub, sub.answer.res), true
}

// solvedBy settles the solve with sub's code.
func (s *solver) solvedBy(sub *submission, res captchaflow.Result) outcome {
	sub.State = subSolved
	s.table.supersede()
	res.SubmittedAt, res.Submits = sub.SubmittedAt, s.status.Submits
	return outcome{kind: outSolved, res: res}
}

// awaitBalance pauses after ERROR_ZERO_BALANCE for the paced wait; the deadline keeps counting, bounding the pause.
func (s *solver) awaitBalance(ctx workflow.Context, err error) outcome {
	if s.status.Waiting == "" {
		s.status.Waiting, s.status.WaitingSince = captchaflow.WaitingZeroBalance, workflow.Now(ctx)
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance) // once per pause, not once a minute
		s.logger.Warn("provider balance is zero: submissions wait until it is back")
	} else {
		s.submittingPhase(ctx)
	}
	if err := s.sleep(ctx, balanceWait(err)); err != nil {
		return failed(err)
	}
	if s.remaining(ctx) <= 0 {
		return failed(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no result within deadline_seconds=%d: the provider balance was zero (ERROR_ZERO_BALANCE) since %s",
				s.in.DeadlineSeconds, s.status.WaitingSince.UTC().Format(time.RFC3339)),
			captchaflow.FailureDeadlineExceeded, nil))
	}
	return outcome{kind: outBalance}
}

// notification is the body POSTed to notify_url.
type notification struct {
	TaskID string `json:"task_id"`
	captchaflow.Result
}

// deliver POSTs res to notify_url, retried (the Web UI's dead-letter queue) up to delivery_timeout_seconds or expiry.
func (s *solver) deliver(ctx workflow.Context, res captchaflow.Result) (expired bool, err error) {
	s.setPhaseSearchable(ctx, captchaflow.PhaseDelivering)
	// Marshalling a struct is deterministic; workflowcheck cannot see through encoding/json's type cache.
	//workflowcheck:ignore
	body, err := json.Marshal(notification{TaskID: workflow.GetInfo(ctx).WorkflowExecution.ID, Result: res})
	if err != nil {
		return false, err
	}
	timeout, maxInterval, byExpiry, observed := s.in.DeliveryTimeout(), time.Minute, false, s.observed
	s.observed = nil // carried once
	if !res.ExpiresAt.IsZero() {
		left := res.ExpiresAt.Sub(workflow.Now(ctx)) - deliveryExpiryMargin
		if left <= 0 {
			if observed != nil && changed(ctx, changeQuirks) { // the delivery that would carry them never starts
				s.observeNow(ctx, *observed)
			}
			return true, errors.New("the token expired before its delivery began")
		}
		// Expiring first, retries are spaced at most an eighth of the token's life: notify_url is tried close to its end.
		if byExpiry = left < timeout; byExpiry {
			timeout, maxInterval = left, min(time.Minute, max(time.Second, left/8))
		}
	}
	f := workflow.ExecuteActivity(withRetry(ctx, DeliverStartToClose, timeout, backoff(time.Second, maxInterval)), acts.Deliver,
		activities.DeliverRequest{NotifyURL: s.in.NotifyURL, Body: body, Refresh: res.Refreshes + s.handovers, RunID: s.table.runID, Observed: observed})
	s.waitFor(ctx, f)
	switch err = f.Get(ctx, nil); {
	case err == nil:
		return false, nil
	case temporal.IsCanceledError(err) && ctx.Err() != nil:
		return false, temporal.NewCanceledError(res) // cancelled as asked, the result in the details
	case byExpiry && (isTimeout(err) || !nonRetryable(err)): // time ran out, not a final refusal a fresh token would meet
		return true, fmt.Errorf("the token expired while notify_url kept failing: %w", err)
	}
	// The result stays in the failure's details: a failed delivery never loses it.
	return false, temporal.NewNonRetryableApplicationError("delivering the result to notify_url failed: "+err.Error(),
		captchaflow.FailureDeliveryFailed, err, res)
}

// deliverFresh delivers res while its token lives; expired undelivered, it solves again up to max_refreshes.
func (s *solver) deliverFresh(ctx workflow.Context, res captchaflow.Result) (captchaflow.Result, error) {
	for {
		expired, err := s.deliver(ctx, res)
		if err == nil {
			workflow.GetMetricsHandler(ctx).Timer(MetricTokenAgeAtDelivery).Record(workflow.Now(ctx).Sub(res.ReceivedAt))
			return res, nil
		}
		if !expired {
			return res, err
		}
		if held := s.table.heldLive(s.in, workflow.Now(ctx), res.Code); held != nil && changed(ctx, changeWhole) {
			s.logger.Warn("the token expired undelivered; delivering another paid answer the solve holds", "ProviderTaskID", res.ProviderTaskID,
				"Next", held.answer.res.ProviderTaskID)
			s.handovers++ // another token: a webhook-id of its own
			s.status.ProviderTaskID, s.status.Provider = held.ProviderID, held.Provider
			res = s.settle(ctx, s.solvedBy(held, held.answer.res).res)
			continue
		}
		// A worker that cannot sign (NOTIFY_SECRET unset) would meet a paid refresh the same way.
		rejected := s.proxySaid != "" && changed(ctx, changeProxySaid)
		if s.status.Refreshes >= s.in.Refreshes() || captchaflow.FailureType(err) == activities.FailureWorkerConfig || rejected {
			refreshes := " (max_refreshes=0: no refresh)"
			if rejected {
				refreshes = " (no refresh: the provider called back " + s.proxySaid + " for the task's proxy)"
			} else if s.in.Refreshes() > 0 {
				refreshes = fmt.Sprintf(", after %d refresh(es) (max_refreshes=%d)", res.Refreshes, s.in.Refreshes())
			}
			return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the token expired at %s before notify_url accepted it%s: %v",
				res.ExpiresAt.UTC().Format(time.RFC3339), refreshes, err), captchaflow.FailureTokenExpired, err, res)
		}
		s.status.Refreshes++
		count(ctx, MetricTokenRefreshes)
		s.logger.Warn("the token expired undelivered; solving again", "ProviderTaskID", res.ProviderTaskID,
			"ExpiresAt", res.ExpiresAt, "Refresh", s.status.Refreshes, "Error", err)
		started := workflow.Now(ctx) // a refresh is a solve of its own: a fresh deadline and max_submits, no backoff carried over
		s.deadlineAt = started.Add(s.in.SolveBudget())
		s.refusals = 0
		s.table.round++ // nothing an earlier submission says is fresh any more
		s.table.supersede()
		res, err = s.solve(ctx)
		telemetry.Round(ctx, s.status.Refreshes, started, err)
		if err != nil {
			return res, err
		}
	}
}

func (s *solver) remaining(ctx workflow.Context) time.Duration {
	return s.deadlineAt.Sub(workflow.Now(ctx))
}

// fail records a terminal failure once (phase, outcome metric, log) and returns err.
func (s *solver) fail(ctx workflow.Context, err error) error {
	outcome := cmp.Or(outcomes[captchaflow.FailureType(err)], "error")
	if temporal.IsCanceledError(err) {
		outcome = "cancelled"
	}
	s.setPhase(ctx, captchaflow.PhaseFailed)
	s.finished(ctx, outcome, cmp.Or(captchaflow.FailureType(err), outcome)) // by type, as the handler counts failures
	s.logger.Warn("task failed", "Outcome", outcome, "Error", err)
	return err
}

// finished counts the task's outcome and, for a task a solve operation started, the operation's end.
func (s *solver) finished(ctx workflow.Context, outcome, nexusOutcome string) {
	count(ctx, MetricTasksFinished, "outcome", outcome)
	if _, ok := workflow.GetInfo(ctx).Memo.GetFields()[captchaflow.NexusMemo]; ok {
		count(ctx, captchaflow.MetricNexusSolvesFinished, "outcome", nexusOutcome)
	}
}

// resubmitBackoff is the wait before the in.php request that follows the n-th refused one (n >= 1).
func resubmitBackoff(n int) time.Duration {
	return min(firstResubmitBackoff<<min(max(n-1, 0), 8), maxResubmitBackoff)
}

// withRetry bounds an activity by timeout (each attempt by attempt at most), heartbeats it and retries it by retry.
func withRetry(ctx workflow.Context, attempt, timeout time.Duration, retry *temporal.RetryPolicy) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: min(attempt, timeout),
		HeartbeatTimeout: heartbeatTimeout, ScheduleToCloseTimeout: timeout, RetryPolicy: retry})
}

// backoff retries from first, doubling up to maxInterval (0: the server's default), never retrying final.
func backoff(first, maxInterval time.Duration, final ...string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: first, BackoffCoefficient: 2, MaximumInterval: maxInterval,
		NonRetryableErrorTypes: final}
}
