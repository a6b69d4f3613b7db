package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

// outcomeKind is what one attempt came to; solve switches on it.
type outcomeKind int

const (
	outSolved   outcomeKind = iota // a code: res
	outResubmit                    // the provider gave up on the submission (or its answer was lost for good)
	outRefused                     // in.php refused it as unsolvable: counted, and the next one backs off
	outBalance                     // nothing submitted (zero balance waited, slot moved, type refused): submit again, uncounted
	outFailed                      // the task fails with err
	outGaveUp                      // its provider was unreachable past PROVIDER_GIVE_UP: submit elsewhere, uncounted
)

// outcome is one attempt's result as a value; reason says why a resubmission, for the log and the Unsolvable message.
type outcome struct {
	kind   outcomeKind
	res    captchaflow.Result
	err    error
	reason string
}

func failed(err error) outcome { return outcome{kind: outFailed, err: err} }

// classify maps a failed provider activity to what the task does next; a timeout or a retryable error is the deadline.
func (s *solver) classify(err error) outcome {
	appErr, _ := errors.AsType[*temporal.ApplicationError](err)
	switch t := captchaflow.FailureType(err); {
	case isTimeout(err) || slices.Contains([]string{activities.FailureNotReady, activities.FailureProviderTransient,
		activities.FailureProviderZeroBalance, activities.FailureProviderUnavailable}, t):
		return failed(deadlineExceeded(s.in.DeadlineSeconds))
	case t == activities.FailureResubmit:
		return outcome{kind: outResubmit, reason: appErr.Message()}
	case t == captchaflow.FailureProxyRejected: // named from the input: a poll's knows no host
		var code string
		_ = appErr.Details(&code)
		return failed(activities.ProxyRejected(code, s.in.Params))
	}
	return failed(err)
}

func isTimeout(err error) bool {
	_, ok := errors.AsType[*temporal.TimeoutError](err)
	return ok
}

// nonRetryable: err is an application error no retry policy retries.
func nonRetryable(err error) bool {
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	return ok && appErr.NonRetryable()
}

func deadlineExceeded(seconds int) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("no result within deadline_seconds=%d", seconds), captchaflow.FailureDeadlineExceeded, nil)
}

// lostSubmitTypes are the Submit failures that may have paid: not retried, the workflow waits for their callback.
var lostSubmitTypes = []string{
	activities.FailureSubmitOutcomeUnknown,
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_START_TO_CLOSE.String(),
	"TemporalTimeout:" + enumspb.TIMEOUT_TYPE_HEARTBEAT.String(),
}

// submitOutcomeUnknown: a failed Submit may have created a provider task (a timeout's cause is an earlier attempt's).
func submitOutcomeUnknown(err error) bool {
	if timeoutErr, ok := errors.AsType[*temporal.TimeoutError](err); ok {
		switch timeoutErr.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_HEARTBEAT:
			actErr, ok := errors.AsType[*temporal.ActivityError](err)
			return ok && actErr.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE
		}
		return false
	}
	return captchaflow.FailureType(err) == activities.FailureSubmitOutcomeUnknown
}

// lostAt files where a lost Submit went in sub: its provider, price and give-up bound (0: nowhere else to go).
func lostAt(sub *submission, err error, chainRun string) {
	var d activities.LostDetails
	if timeout, ok := errors.AsType[*temporal.TimeoutError](err); ok && timeout.HasLastHeartbeatDetails() {
		_ = timeout.LastHeartbeatDetails(&d) // the worker died mid-request: its Submit's last beat says where it went
	} else if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.HasDetails() {
		_ = appErr.Details(&d)
	}
	if d.Alternatives > 0 {
		sub.giveUp = time.Duration(d.GiveUpSeconds) * time.Second
	}
	sub.Provider, sub.price, sub.refunds = d.Provider, d.PriceUSD, d.Refunds // it may have been paid
	sub.urlRun = cmp.Or(d.RunID, chainRun)                                   // before the echo, URLs named the chain's run
}

// balanceWait is the paced wait the zero-balance failure carries (a minute when it carries none).
func balanceWait(err error) time.Duration {
	var code string
	var d time.Duration
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.Details(&code, &d) == nil && d > 0 {
		return d
	}
	return time.Minute
}

// route is what a task learned about its providers; the Submit activity picks one from it (and records the pick).
type route struct {
	exclude []string // given up (unreachable past PROVIDER_GIVE_UP) or lacking the task type: never asked again by this task
	avoid   []string // found this task unsolvable, or their queue unserved: asked last, the latest avoided last
}

// giveUp abandons sub: its provider has been unreachable past PROVIDER_GIVE_UP (at most one extra payment).
func (s *solver) giveUp(ctx workflow.Context, sub *submission) outcome {
	sub.State = subAbandoned
	if !slices.Contains(s.route.exclude, sub.Provider) {
		s.route.exclude = append(s.route.exclude, sub.Provider)
	}
	count(ctx, MetricProviderGaveUp, "provider", sub.Provider)
	s.logger.Warn("provider unreachable past PROVIDER_GIVE_UP: submission abandoned, submitting elsewhere",
		"Provider", sub.Provider, "Submission", sub.N, "ProviderTaskID", sub.ProviderID)
	return outcome{kind: outGaveUp, reason: fmt.Sprintf("provider %s unreachable past PROVIDER_GIVE_UP", sub.Provider)}
}

// unsupported moves the task on from a provider that lacks its task type, uncounted (nothing was created or paid);
// with no other provider left it fails, as it did before the change (the gate is asked only where it moves on).
func (s *solver) unsupported(ctx workflow.Context, err error) outcome {
	var d activities.LostDetails
	appErr, _ := errors.AsType[*temporal.ApplicationError](err)
	if _ = appErr.Details(&d); d.Provider == "" || d.Alternatives == 0 || !changed(ctx, changeQuirks) {
		return failed(temporal.NewNonRetryableApplicationError("no provider this task may use takes its task type; "+
			cmp.Or(d.Provider, "the provider")+" refused it: "+appErr.Message(), captchaflow.FailureProviderConfig, err))
	}
	s.route.exclude = append(s.route.exclude, d.Provider)
	s.logger.Warn("the provider lacks the task type: submitting elsewhere", "Provider", d.Provider, "Error", err)
	return outcome{kind: outBalance}
}

// providerGivenUp asks the worker (a local activity: one marker) whether provider is down past PROVIDER_GIVE_UP.
func (s *solver) providerGivenUp(ctx workflow.Context, provider string) bool {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	f := workflow.ExecuteLocalActivity(lctx, acts.ProviderGivenUp, provider)
	s.waitFor(ctx, f)
	var down bool
	if err := f.Get(ctx, &down); err != nil {
		s.logger.Warn("could not ask whether the provider is given up; still waiting", "Provider", provider, "Error", err)
		return false
	}
	return down
}

// observe counts what this solve's submissions cost (no event) and, under routing: scored, teaches the worker's model
// what they took (one still open: longer), carried by the next delivery, else best effort in a local activity (one marker).
func (s *solver) observe(ctx workflow.Context, carried bool) {
	var obs []activities.Observation
	scored := false
	for _, sub := range s.table.subs {
		if sub.Round != s.table.round || sub.Provider == "" || slices.Contains([]subState{subRefused, subAnswerLost, subSubmitting}, sub.State) {
			continue
		}
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": sub.Provider}).Counter(MetricProviderSpend).
			Inc(int64(math.Round(sub.cost() * 1e6)))
		scored = scored || sub.route != nil
		o := activities.Observation{Provider: sub.Provider, Outcome: providers.ObservedOpen, Seconds: workflow.Now(ctx).Sub(sub.SubmittedAt).Seconds(),
			Probe: sub.route != nil && sub.route.Reason == captchaflow.RouteProbe}
		switch {
		case sub.State == subSolved && sub.answer != nil:
			o.Outcome, o.Seconds = providers.ObservedSolved, sub.answer.res.ReceivedAt.Sub(sub.SubmittedAt).Seconds()
		case sub.State == subSolved: // the submission's answer held the code
			o.Outcome = providers.ObservedSolved
		case sub.State == subUnsolvable:
			o.Outcome = providers.ObservedUnsolvable
		case sub.ProviderID == "": // lost and never answered: it says nothing of a solve time, nor that it was made
			continue
		}
		obs = append(obs, o)
	}
	req := &activities.ObserveRequest{Method: s.in.Method, Observations: obs}
	if s.observed = nil; scored && carried {
		s.observed = req
	}
	if scored && !carried && ctx.Err() == nil && changed(ctx, changeRoutingObserve) {
		s.observeNow(ctx, *req)
	}
}

// observeNow hands req to the worker's model in the Observe local activity (one marker).
func (s *solver) observeNow(ctx workflow.Context, req activities.ObserveRequest) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	if err := workflow.ExecuteLocalActivity(lctx, acts.Observe, req).Get(ctx, nil); err != nil {
		s.logger.Warn("the routing model did not take the solve's observations", "Error", err)
	}
}
