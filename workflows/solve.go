package workflows

// One task's life: admit → submit → await the answer or the callback timeout → poll → resubmit → deliver. Every
// callback, hint and grant is routed into the table by the listener (table.go); this file only awaits "an answer
// has arrived" and acts on it.

import (
	"cmp"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// acts is only used for its method values: ExecuteActivity takes the activity's name and signature from them.
var acts *activities.Activities

// Settings are the worker settings that change what SolveCaptcha does.
type Settings struct {
	// ProviderThreads is PROVIDER_THREADS (0: unset): each submission then holds one of the plan's slots.
	ProviderThreads int
}

// SolveCaptcha submits one CAPTCHA task and returns its solution, from the provider's callback or from polling,
// resubmitting unsolvable answers up to max_submits; the result is delivered to notify_url if set.
func SolveCaptcha(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
	return solveCaptcha(ctx, in, Settings{})
}

func solveCaptcha(ctx workflow.Context, in captchaflow.Input, settings Settings) (captchaflow.Result, error) {
	s := &solver{settings: settings, in: in.WithDefaults(), logger: workflow.GetLogger(ctx),
		status: captchaflow.Status{Phase: captchaflow.PhaseSubmitting},
		// Read before WithDefaults fills it in: such a task takes the worker's per-method default.
		callbackTimeoutUnset: in.CallbackTimeoutSeconds == 0}
	if err := s.setup(ctx); err != nil {
		return captchaflow.Result{}, err
	}
	res, err := s.run(ctx)
	_ = workflow.Await(ctx, s.quiet) // late duplicates are routed (and dropped) before the run closes
	return res, err
}

type solver struct {
	settings   Settings
	in         captchaflow.Input
	status     captchaflow.Status
	deadlineAt time.Time // when deadline_seconds runs out for the current solve
	logger     log.Logger
	signals    signals
	table      table
	route      route
	admission  admission
	searched   captchaflow.Phase // what CaptchaPhase was last set to
	refusals   int               // in.php refusals so far: they grow the backoff before the next request
	// roundSubmits is status.Submits when the current solve began: max_submits bounds each solve on its own.
	roundSubmits         int
	callbackTimeoutUnset bool
}

// setup starts the listener and registers the status query and the hint Update before anything can block.
func (s *solver) setup(ctx workflow.Context) error {
	s.table = table{runID: chainRunID(workflow.GetInfo(ctx))}
	s.signals = signals{callbacks: workflow.GetSignalChannel(ctx, captchaflow.CallbackSignal),
		grants: workflow.GetSignalChannel(ctx, activities.SlotGrantedSignal)}
	workflow.Go(ctx, s.listen)
	if err := workflow.SetQueryHandler(ctx, captchaflow.StatusQuery, func() (captchaflow.Status, error) {
		return s.statusNow(), nil
	}); err != nil {
		return err
	}
	return s.handleHints(ctx)
}

// run validates, solves and delivers; every way out goes through fail or PhaseDone, so metrics see the outcome.
func (s *solver) run(ctx workflow.Context) (captchaflow.Result, error) {
	if err := s.validate(ctx); err != nil {
		return captchaflow.Result{}, s.fail(ctx, OutcomeInvalidInput, err)
	}
	s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
	s.setPhase(ctx, captchaflow.PhaseSubmitting)
	res, err := s.solve(ctx)
	if err == nil && s.in.NotifyURL != "" {
		res, err = s.deliverFresh(ctx, res)
	}
	if err != nil {
		return captchaflow.Result{}, s.fail(ctx, failureOutcome(err), err)
	}
	s.setPhase(ctx, captchaflow.PhaseDone)
	countFinished(ctx, successOutcome(res.Via))
	return res, nil
}

// validate refuses an input the task cannot serve; the workflow ID is checked too, as a segment of the callback URL.
func (s *solver) validate(ctx workflow.Context) error {
	err := captchaflow.ValidateWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID)
	if err == nil {
		// Validate sorts a map's keys and parses URLs: pure.
		//workflowcheck:ignore
		err = s.in.Validate()
	}
	if err != nil {
		return temporal.NewNonRetryableApplicationError("invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	return nil
}

// solve attempts until a submission yields a code, resubmitting while the provider answers unsolvable.
func (s *solver) solve(ctx workflow.Context) (captchaflow.Result, error) {
	s.roundSubmits = s.status.Submits
	defer s.releaseKept(ctx, true) // no submission of this solve is waited for any more
	for {
		o := s.attempt(ctx)
		if o.kind != outSolved && !temporal.IsCanceledError(o.err) {
			if answered, ok := s.takeLostAnswer(ctx); ok {
				o = answered // a lost submission answered while this attempt failed: the answer wins
			}
		}
		switch o.kind {
		case outSolved:
			return s.received(ctx, o.res), nil
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
		if err := s.beforeResubmit(ctx, o); err != nil {
			return captchaflow.Result{}, err
		}
	}
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
	if s.status.Waiting == "" {
		s.setPhase(ctx, captchaflow.PhaseSubmitting)
	} else {
		s.balancePhase(ctx) // a paused task stays in PhaseAwaitingBalance until in.php accepts
	}
	remaining := s.remaining(ctx)
	if remaining <= 0 {
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	sub := s.table.add(workflow.Now(ctx))
	submitCtx, cancelSubmit := workflow.WithCancel(ctx)
	f := workflow.ExecuteActivity(submitOptions(submitCtx, remaining), acts.Submit, activities.SubmitRequest{
		Method: s.in.Method, Params: s.in.Params, RunID: s.table.runID, Submission: sub.N,
		Providers: s.in.Providers, Exclude: s.route.exclude, Avoid: s.route.avoid, Provider: s.admission.ticket.Provider})
	if err := s.await(ctx, func() bool { return f.IsReady() || s.table.answered() != nil }); err != nil {
		return failed(err)
	}
	if !f.IsReady() {
		cancelSubmit() // a lost submission answered: no more in.php requests
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
	switch {
	case submitOutcomeUnknown(err) && s.remaining(ctx) <= 0:
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	case submitOutcomeUnknown(err):
		sub.Provider, sub.giveUp = lostAt(err)
		return s.awaitLost(ctx, sub, err)
	case zeroBalance(err):
		return s.awaitBalance(ctx, err)
	case failureType(err) == activities.FailureProviderMoved:
		return outcome{kind: outBalance} // nothing was submitted: admit again, at the provider Submit moves to
	}
	o := s.classify(err)
	if o.kind == outResubmit {
		// A refused request is a submission all the same, and the next one must back off.
		s.status.Submits++
		s.refusals++
		return resubmit(outRefused, "in.php refused the submission: "+o.reason)
	}
	return o
}

// accepted records what in.php answered and awaits the code.
func (s *solver) accepted(ctx workflow.Context, sub *submission, r activities.SubmitResult) outcome {
	if s.callbackTimeoutUnset && r.CallbackTimeoutSeconds > 0 {
		s.in.CallbackTimeoutSeconds = r.CallbackTimeoutSeconds // the worker's default, from history
	}
	s.route.accepted(sub, r, &s.in)
	s.status.Waiting, s.status.WaitingSince = "", time.Time{} // the balance is back
	s.status.ProviderTaskID, s.status.Provider = r.ProviderTaskID, r.Provider
	s.status.Submits++
	s.status.SubmittedAt = workflow.Now(ctx)
	s.learnID(ctx, sub, r.ProviderTaskID)
	if r.Code != "" {
		return s.solvedBy(sub, solution(sub, r.Code, captchaflow.ViaSubmit, workflow.Now(ctx)))
	}
	return s.awaitCode(ctx, sub)
}

// awaitCode waits for the answer: the callback until the callback timeout, then the callback or the poll.
func (s *solver) awaitCode(ctx workflow.Context, sub *submission) outcome {
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	arrived := func() bool { return sub.answer != nil || s.table.answered() != nil }
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
		countFallbackPoll(ctx)
		stop := s.poll(ctx, sub)
		defer stop()
		if err := s.await(ctx, arrived); err != nil {
			return failed(err)
		}
	}
	if sub.answer == nil {
		return s.lostAnswered(ctx, s.table.answered())
	}
	return s.take(ctx, sub)
}

// take acts on sub's answer.
func (s *solver) take(ctx workflow.Context, sub *submission) outcome {
	o := *sub.answer
	switch o.kind {
	case outSolved:
		return s.solvedBy(sub, o.res)
	case outResubmit:
		sub.State = subUnsolvable
		s.route.unsolvable(ctx, sub)
	case outGaveUp:
		return s.giveUp(ctx, sub)
	}
	return o
}

// awaitLost handles a Submit whose outcome is unknown: it may have been paid for, so no other in.php request is
// made until its authenticated callback comes or lost_answer_wait_seconds (cut to the deadline) pass.
func (s *solver) awaitLost(ctx workflow.Context, sub *submission, cause error) outcome {
	s.status.ProviderTaskID, s.status.Provider = "", sub.Provider
	s.status.Submits++
	s.status.SubmittedAt = sub.SubmittedAt
	s.status.Waiting, s.status.WaitingSince = "", time.Time{} // in.php answered something: no zero-balance pause
	s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**phase:** %s · submission %d/%d: in.php's answer was lost, waiting for its callback",
		captchaflow.PhaseAwaitingCallback, s.status.Submits, s.in.MaxSubmits))
	end := workflow.Now(ctx).Add(min(s.in.LostAnswerWait(), s.remaining(ctx)))
	s.logger.Warn("in.php's answer was lost; waiting for the submission's callback before submitting again",
		"Submits", s.status.Submits, "Until", end, "Error", cause)
	s.markLost(sub)
	settled := func() bool { return s.table.answered() != nil || sub.State == subUnsolvable }
	for !settled() && workflow.Now(ctx).Before(end) {
		// A task that may go elsewhere asks every sub.giveUp whether its provider is down for good.
		d := end.Sub(workflow.Now(ctx))
		if sub.giveUp > 0 {
			d = min(d, sub.giveUp)
		}
		if ok, err := s.awaitFor(ctx, d, settled); err != nil {
			return failed(err)
		} else if !ok && workflow.Now(ctx).Before(end) && s.providerGivenUp(ctx, sub.Provider) && !settled() {
			return s.giveUp(ctx, sub)
		}
	}
	return s.lostWaitOver(ctx, sub)
}

// lostWaitOver is what a lost submission's wait came to; unanswered, it stays open: a late answer still counts.
func (s *solver) lostWaitOver(ctx workflow.Context, sub *submission) outcome {
	switch {
	case s.table.answered() != nil:
		o := s.lostAnswered(ctx, s.table.answered())
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingCallback) // CaptchaTaskId: the ID its callback named
		return o
	case sub.State == subUnsolvable:
		countLostSubmit(ctx, LostOutcomeUnsolvable)
		return resubmit(outResubmit, "the submission whose in.php answer was lost called back unsolvable")
	case s.remaining(ctx) <= 0:
		countLostSubmit(ctx, LostOutcomeDeadline)
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	}
	countLostSubmit(ctx, LostOutcomeResubmit)
	return resubmit(outResubmit, "in.php's answer was lost and no callback came in time")
}

// takeLostAnswer is the answer of a lost submission that came while the task did something else.
func (s *solver) takeLostAnswer(ctx workflow.Context) (outcome, bool) {
	if sub := s.table.answered(); sub != nil {
		return s.lostAnswered(ctx, sub), true
	}
	return outcome{}, false
}

// lostAnswered takes a lost submission's answer as the result.
func (s *solver) lostAnswered(ctx workflow.Context, sub *submission) outcome {
	countLostSubmit(ctx, LostOutcomeCallback)
	s.status.ProviderTaskID = sub.ProviderID
	s.logger.Info("a submission whose in.php answer was lost called back", "ProviderTaskID", sub.ProviderID, "Submission", sub.N)
	return s.solvedBy(sub, sub.answer.res)
}

// solvedBy settles the solve with sub's code.
func (s *solver) solvedBy(sub *submission, res captchaflow.Result) outcome {
	s.table.settle(sub)
	res.SubmittedAt, res.Submits = sub.SubmittedAt, s.status.Submits
	return outcome{kind: outSolved, res: res}
}

// awaitBalance pauses submissions after ERROR_ZERO_BALANCE for the activity's paced wait; the deadline keeps
// counting (a token past it is of no use, and it bounds a pause that never ends).
func (s *solver) awaitBalance(ctx workflow.Context, err error) outcome {
	if s.status.Waiting == "" {
		s.status.Waiting, s.status.WaitingSince = captchaflow.WaitingZeroBalance, workflow.Now(ctx)
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance) // once per pause, not once a minute
		s.logger.Warn("provider balance is zero: submissions wait until it is back")
	} else {
		s.balancePhase(ctx)
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

// beforeResubmit counts the resubmission and, after an in.php refusal, backs off.
func (s *solver) beforeResubmit(ctx workflow.Context, o outcome) error {
	s.logger.Info("resubmitting", "ProviderTaskID", s.status.ProviderTaskID, "Submits", s.status.Submits, "Reason", o.reason)
	countResubmit(ctx)
	if o.kind != outRefused {
		return nil
	}
	return s.sleep(ctx, resubmitBackoff(s.refusals))
}

// deliverFresh delivers res while its token lives; expired undelivered, it solves again up to max_refreshes.
func (s *solver) deliverFresh(ctx workflow.Context, res captchaflow.Result) (captchaflow.Result, error) {
	for {
		expired, err := s.deliver(ctx, res)
		if err == nil {
			recordTokenAgeAtDelivery(ctx, workflow.Now(ctx).Sub(res.ReceivedAt))
			return res, nil
		}
		if !expired {
			return res, err
		}
		if s.status.Refreshes >= s.in.Refreshes() || workerConfigFailure(err) {
			return res, tokenExpired(res, s.in.Refreshes(), err)
		}
		s.status.Refreshes++
		countTokenRefresh(ctx)
		s.logger.Warn("the token expired undelivered; solving again", "ProviderTaskID", res.ProviderTaskID,
			"ExpiresAt", res.ExpiresAt, "Refresh", s.status.Refreshes, "Error", err)
		// A refresh is a solve of its own: a fresh deadline and max_submits, no backoff carried over.
		s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
		s.refusals = 0
		s.table.newRound()
		if res, err = s.solve(ctx); err != nil {
			return res, err
		}
	}
}

// received stamps a fresh result with its expiry, records its latency and makes it the status's token.
func (s *solver) received(ctx workflow.Context, res captchaflow.Result) captchaflow.Result {
	res.ExpiresAt = s.in.ExpiresAt(res.ReceivedAt)
	res.Refreshes = s.status.Refreshes
	s.status.ReceivedAt, s.status.ExpiresAt = res.ReceivedAt, res.ExpiresAt
	recordResultLatency(ctx, res.Provider, res.ReceivedAt.Sub(res.SubmittedAt))
	return res
}

func (s *solver) remaining(ctx workflow.Context) time.Duration {
	return s.deadlineAt.Sub(workflow.Now(ctx))
}

// fail records a terminal failure once (phase, outcome metric, log) and returns err.
func (s *solver) fail(ctx workflow.Context, outcome string, err error) error {
	s.setPhase(ctx, captchaflow.PhaseFailed)
	countFinished(ctx, outcome)
	s.logger.Warn("task failed", "Outcome", outcome, "Error", err)
	return err
}

// chainRunID names this run in its pingback URLs: the run its reset chain started from, so callbacks to the runs
// it was reset from are its own.
func chainRunID(info *workflow.Info) string {
	return cmp.Or(info.OriginalRunID, info.WorkflowExecution.RunID)
}
