package workflows

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

// acts is only used for its method values: workflow.ExecuteActivity takes the activity's name and signature
// from them; the worker runs the registered instance.
var acts *activities.Activities

// Settings are the worker settings that change what SolveCaptcha does. Each reaches a task as recorded data (a
// version marker asked once per task), so replay and a rolling change of a setting agree.
type Settings struct {
	// ProviderThreads is the worker's largest plan (activities.PlannedThreads; 0: none): submissions then hold slots.
	ProviderThreads int
}

// SolveCaptcha submits one CAPTCHA task to the provider and returns its solution: from the provider's callback
// when it arrives in time, else from polling res.php, whichever comes first. Unsolvable answers are resubmitted up
// to max_submits; the result is delivered to notify_url if set.
func SolveCaptcha(ctx workflow.Context, in captchaflow.Input) (captchaflow.Result, error) {
	return solveCaptcha(ctx, in, Settings{})
}

// solveCaptcha is SolveCaptcha on a worker with these settings; Register binds them.
func solveCaptcha(ctx workflow.Context, in captchaflow.Input, settings Settings) (captchaflow.Result, error) {
	s := &solver{
		settings: settings,
		in:       in.WithDefaults(),
		status:   captchaflow.Status{Phase: captchaflow.PhaseSubmitting},
		logger:   workflow.GetLogger(ctx),
		// No timer yet: an answer in Submit's result (via submit) reaches the delivery without one.
		cancelTimer: func() {},
		// Read before WithDefaults fills it in: such a task takes the worker's per-method default (see accepted).
		callbackTimeoutUnset: in.CallbackTimeoutSeconds == 0,
	}
	if err := s.setup(ctx); err != nil {
		return captchaflow.Result{}, err
	}
	res, err := s.run(ctx)
	s.drainSignals(ctx)
	return res, err
}

type solver struct {
	settings Settings
	in       captchaflow.Input
	status   captchaflow.Status
	// deadlineAt is when deadline_seconds runs out for the current solve, fixed once the input is valid.
	deadlineAt time.Time
	logger     log.Logger
	signals    signals
	// table is this run's submissions; every callback is routed into it (see wait).
	table table
	// cancelTimer stops the current submission's timer when more work follows, so that it does not fire into a
	// later phase.
	cancelTimer workflow.CancelFunc
	// refusals counts in.php requests refused as unsolvable; it grows the backoff before the next one.
	refusals int
	// callbackTimeoutUnset tells whether the input left callback_timeout_seconds to the worker's per-method
	// default, which each accepted Submit hands back (SubmitResult.CallbackTimeoutSeconds).
	callbackTimeoutUnset bool
	// roundSubmits is status.Submits when the current solve began: max_submits bounds each solve on its own.
	roundSubmits int
	admission    admission
	// searched is the phase CaptchaPhase was last set to.
	searched captchaflow.Phase
	// route is what this task learned about its providers (PROVIDERS_FILE): whom to avoid or exclude.
	route route
}

// setup registers the status query and the untokened hint's Update before anything can block, so both answer
// from the first workflow task on.
func (s *solver) setup(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	s.table = table{runID: chainRunID(info)}
	s.signals = newSignals(ctx)
	if err := workflow.SetQueryHandler(ctx, captchaflow.StatusQuery, func() (captchaflow.Status, error) {
		return s.statusNow(), nil
	}); err != nil {
		return err
	}
	return s.handleHints(ctx)
}

// run validates the input, solves, and delivers the code to notify_url when one is set. Every way out goes
// through fail or ends in PhaseDone, so the metrics and the status query always see the outcome.
func (s *solver) run(ctx workflow.Context) (captchaflow.Result, error) {
	if err := s.validate(ctx); err != nil {
		return captchaflow.Result{}, s.fail(ctx, OutcomeInvalidInput, err)
	}
	s.deadlineAt = workflow.Now(ctx).Add(s.in.SolveBudget())
	s.setPhase(ctx, captchaflow.PhaseSubmitting)

	res, err := s.solve(ctx)
	if err != nil {
		return captchaflow.Result{}, s.fail(ctx, failureOutcome(err), err)
	}
	if s.in.NotifyURL != "" {
		s.cancelTimer()
		if res, err = s.deliverFresh(ctx, res); err != nil {
			return captchaflow.Result{}, s.fail(ctx, failureOutcome(err), err)
		}
	}
	s.setPhase(ctx, captchaflow.PhaseDone)
	countFinished(ctx, successOutcome(res.Via))
	return res, nil
}

// validate refuses an input the task cannot serve, as a typed InvalidInput naming the field. The workflow ID is
// one segment of the callback URL: an ID the ingress refuses would send every pingback to a 400, and a start from
// the CLI or another SDK is checked by nothing else.
func (s *solver) validate(ctx workflow.Context) error {
	invalid := func(err error) error {
		return temporal.NewNonRetryableApplicationError("invalid input: "+err.Error(), captchaflow.FailureInvalidInput, nil)
	}
	if err := captchaflow.ValidateWorkflowID(workflow.GetInfo(ctx).WorkflowExecution.ID); err != nil {
		return invalid(err)
	}
	// Validate iterates a map only to sort its keys and parses URLs; both are pure.
	//workflowcheck:ignore
	if err := s.in.Validate(); err != nil {
		return invalid(err)
	}
	return nil
}

// solve submits and waits until a submission yields a code, resubmitting while the provider answers unsolvable,
// up to max_submits in.php requests for this solve. Its failures are ready to return (failureOutcome names them).
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
			res := s.received(ctx, o.res)
			recordResultLatency(ctx, res.ReceivedAt.Sub(res.SubmittedAt))
			if res.Provider != "" {
				workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": res.Provider}).
					Timer(MetricProviderSolveSeconds).Record(res.ReceivedAt.Sub(res.SubmittedAt))
			}
			return res, nil
		case outFailed:
			return captchaflow.Result{}, o.err
		case outBalance:
			continue // no submission was made: max_submits is untouched
		case outGaveUp:
			s.roundSubmits++ // the provider failed, not the task: a given-up submission leaves max_submits untouched
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

// beforeResubmit ends the last submission's timer and, after an in.php refusal, backs off.
func (s *solver) beforeResubmit(ctx workflow.Context, o outcome) error {
	s.logger.Info("resubmitting", "ProviderTaskID", s.status.ProviderTaskID, "Submits", s.status.Submits, "Reason", o.reason)
	s.cancelTimer()
	countResubmit(ctx)
	if o.kind != outRefused {
		return nil
	}
	d := min(resubmitBackoff(s.refusals), s.remaining(ctx))
	if d <= 0 {
		return nil
	}
	s.logger.Info("in.php refused the submission; backing off", "Backoff", d, "Submits", s.status.Submits)
	return s.sleep(ctx, d)
}

func (s *solver) remaining(ctx workflow.Context) time.Duration {
	return s.deadlineAt.Sub(workflow.Now(ctx))
}

// fail records a terminal failure once (phase, outcome metric, log) and returns err for the workflow to return.
func (s *solver) fail(ctx workflow.Context, outcome string, err error) error {
	s.setPhase(ctx, captchaflow.PhaseFailed)
	countFinished(ctx, outcome)
	s.logger.Warn("task failed", "Outcome", outcome, "Error", err)
	return err
}

// chainRunID names this run in its pingback URLs: the run a reset chain started from (a reset copies it with the
// history), so the callbacks of the runs a run was reset from are its own, and an unrelated earlier run's are not.
func chainRunID(info *workflow.Info) string {
	return cmp.Or(info.OriginalRunID, info.WorkflowExecution.RunID)
}

func deadlineExceeded(seconds int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no result within deadline_seconds=%d", seconds), captchaflow.FailureDeadlineExceeded, nil)
}
