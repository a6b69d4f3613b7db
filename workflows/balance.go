package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// zeroBalanceWaitDefault is the wait when the failure does not carry one (the activity always does).
const zeroBalanceWaitDefault = time.Minute

// zeroBalance tells whether a Submit failed with in.php's ERROR_ZERO_BALANCE (FailureProviderZeroBalance), which
// the Submit retry policy hands to the workflow instead of retrying.
func zeroBalance(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.FailureProviderZeroBalance
}

// awaitBalance pauses the task's submissions after an ERROR_ZERO_BALANCE answer: the phase becomes
// PhaseAwaitingBalance (searchable once per pause, so the pause costs one upsert, not one per minute), the status
// query and the current details say why and since when, and after the paced wait from the activity (60 s ±20 %)
// attempt submits again (outBalance: not counted against max_submits, nothing was created or paid). Each minute of the pause costs one failed Submit (3 events) and one timer (2 events).
//
// The deadline keeps counting: deadline_seconds is the caller's bound on the whole task, a token solved past it is
// of no use to them, and it bounds the history of a pause that never ends. A task whose deadline runs out while the
// balance is zero fails DeadlineExceeded, and the failure says so.
func (s *solver) awaitBalance(ctx workflow.Context, err error) outcome {
	var appErr *temporal.ApplicationError
	wait := zeroBalanceWaitDefault
	if errors.As(err, &appErr) {
		var code string
		var d time.Duration
		if appErr.Details(&code, &d) == nil && d > 0 {
			wait = d
		}
	}
	first := s.status.Waiting == ""
	if first {
		s.status.Waiting = captchaflow.WaitingZeroBalance
		s.status.WaitingSince = workflow.Now(ctx)
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance)
		s.logger.Warn("provider balance is zero: submissions wait until it is back", "Wait", wait)
	} else {
		s.balancePhase(ctx)
	}
	if d := min(wait, s.remaining(ctx)); d > 0 {
		if err := s.sleep(ctx, d); err != nil {
			return failed(err) // cancelled
		}
	}
	if s.remaining(ctx) <= 0 {
		return failed(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no result within deadline_seconds=%d: the provider balance was zero (ERROR_ZERO_BALANCE) since %s",
				s.in.DeadlineSeconds, s.status.WaitingSince.UTC().Format(time.RFC3339)),
			captchaflow.FailureDeadlineExceeded, nil))
	}
	return outcome{kind: outBalance}
}

// CheckBalance reads the provider account's balance once (FetchBalance, which records it as the
// captchaflow_provider_balance gauge on the worker that ran it) and returns it. The Schedule
// captchaflow.BalanceScheduleID starts it; its input and result hold no secret (the API key stays in the worker).
func CheckBalance(ctx workflow.Context) (activities.BalanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    ProviderStartToClose,
		ScheduleToCloseTimeout: BalanceCheckTimeout,
		HeartbeatTimeout:       heartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        2 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: activities.NonRetryableProviderErrors,
		},
	})
	var res activities.BalanceResult
	err := workflow.ExecuteActivity(ctx, activities.FetchBalanceName).Get(ctx, &res)
	return res, err
}

// BalanceCheckTimeout bounds one CheckBalance run, retries included: less than the schedule's minute, so a run
// never overlaps the next (the schedule skips an overlapping one anyway).
const BalanceCheckTimeout = 50 * time.Second

// registerBalance registers CheckBalance under its contract name (RegisterWorkflow calls it).
func registerBalance(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(CheckBalance, workflow.RegisterOptions{Name: captchaflow.BalanceWorkflowType})
}

// balancePhase sets PhaseAwaitingBalance during a pause that already began. When another searchable phase came
// since (a lost answer's wait between two zero-balance answers), CaptchaPhase is upserted again so that search says
// what the status says.
func (s *solver) balancePhase(ctx workflow.Context) {
	if s.searched != captchaflow.PhaseAwaitingBalance {
		s.setPhaseSearchable(ctx, captchaflow.PhaseAwaitingBalance)
		return
	}
	s.setPhase(ctx, captchaflow.PhaseAwaitingBalance)
}
