package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// Activity timeouts: a provider request is bounded by the worker's own client timeout (30 s by default), which the
// worker refuses to start unless shorter than these, so a slow request never looks like a dead worker.
const (
	ProviderStartToClose = 45 * time.Second // one attempt of submit, poll, confirm
	DeliverStartToClose  = 30 * time.Second // one attempt of a delivery
	heartbeatTimeout     = 10 * time.Second // notices a dead worker during a slow request
	confirmAttempts      = 3
	// maxConfirmsPerSubmission bounds the res.php confirmations callbacks may start for one submission.
	maxConfirmsPerSubmission = 2
	firstResubmitBackoff     = 5 * time.Second // doubling up to maxResubmitBackoff after each refused in.php request
	maxResubmitBackoff       = time.Minute
)

// resubmitBackoff is the wait before the in.php request that follows the n-th refused one (n >= 1).
func resubmitBackoff(n int) time.Duration {
	return min(firstResubmitBackoff<<min(max(n-1, 0), 8), maxResubmitBackoff)
}

// providerOptions bound one provider activity (submit, poll, confirm) by the task's remaining deadline; retry is
// what tells them apart.
func providerOptions(ctx workflow.Context, remaining time.Duration, retry *temporal.RetryPolicy) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(ProviderStartToClose, remaining),
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: remaining,
		RetryPolicy:            retry,
	})
}

// submitOptions retry transient provider trouble (no free slot, 5xx, network) with backoff until the deadline; a
// lost answer and a zero balance go to the workflow instead.
func submitOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
		MaximumInterval: 30 * time.Second, NonRetryableErrorTypes: slices.Concat(activities.NonRetryableProviderErrors,
			lostSubmitTypes, []string{activities.FailureProviderZeroBalance})})
}

// pollOptions make the retry policy the polling loop: one res.php request per attempt, NotReady retried every
// interval (coefficient 1), so however many polls it takes the history holds one scheduled/started/completed trio.
func pollOptions(ctx workflow.Context, interval, remaining time.Duration) workflow.Context {
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{InitialInterval: interval, BackoffCoefficient: 1,
		MaximumInterval: interval, NonRetryableErrorTypes: activities.NonRetryableProviderErrors})
}

// confirmOptions check an unauthenticated callback with a few quick res.php looks; NotReady means the hint was
// wrong (or early) and is not retried.
func confirmOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
		MaximumAttempts:        confirmAttempts,
		NonRetryableErrorTypes: append([]string{activities.FailureNotReady}, activities.NonRetryableProviderErrors...)})
}

// deliverOptions retry a failing notify_url with backoff up to maxInterval for timeout: the durable retry is the
// dead-letter queue, and the pending activity shows in the Web UI with its last error.
func deliverOptions(ctx workflow.Context, timeout, maxInterval time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(DeliverStartToClose, timeout),
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: timeout,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: maxInterval},
	})
}
