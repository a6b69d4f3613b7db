package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// Activity timeouts. A provider request is bounded by the worker's own client timeout (30 s by default); these
// leave room for it and let Temporal notice a dead worker quickly.
const (
	// ProviderStartToClose and DeliverStartToClose bound one attempt of a provider activity (submit, poll, confirm)
	// and of a delivery. The worker refuses to start with a CAPTCHAAI_TIMEOUT / NOTIFY_REQUEST_TIMEOUT that is not
	// shorter: the attempt would time out before the client's own, classified error, and every slow request would
	// look like a dead worker.
	ProviderStartToClose = 45 * time.Second
	DeliverStartToClose  = 30 * time.Second
	// heartbeatTimeout detects a dead worker during a slow request (the activities heartbeat while they wait).
	heartbeatTimeout = 10 * time.Second
	confirmAttempts  = 3
	// maxConfirmsPerSubmission bounds the res.php confirmations that callbacks (unauthenticated ones, or ones with
	// a status word) may start for one submission; later ones are ignored and the timer or poll recovers.
	maxConfirmsPerSubmission = 2
	// firstResubmitBackoff, doubling up to maxResubmitBackoff, spaces the in.php requests after a refused one.
	firstResubmitBackoff = 5 * time.Second
	maxResubmitBackoff   = time.Minute
)

// resubmitBackoff is the wait before the in.php request that follows the n-th refused one (n >= 1).
func resubmitBackoff(n int) time.Duration {
	d := firstResubmitBackoff
	for i := 1; i < n && d < maxResubmitBackoff; i++ {
		d *= 2
	}
	return min(d, maxResubmitBackoff)
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
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
		NonRetryableErrorTypes: slices.Concat(activities.NonRetryableProviderErrors, lostSubmitTypes,
			[]string{activities.FailureProviderZeroBalance}),
	})
}

// pollOptions make the retry policy the polling loop: one res.php request per attempt, NotReady retried every
// interval (coefficient 1), so however many polls it takes the history holds one scheduled/started/completed trio.
func pollOptions(ctx workflow.Context, interval, remaining time.Duration) workflow.Context {
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{
		InitialInterval:        interval,
		BackoffCoefficient:     1,
		MaximumInterval:        interval,
		NonRetryableErrorTypes: activities.NonRetryableProviderErrors,
	})
}

// confirmOptions check an unauthenticated callback with a few quick res.php looks; NotReady means the hint was
// wrong (or early) and is not retried.
func confirmOptions(ctx workflow.Context, remaining time.Duration) workflow.Context {
	return providerOptions(ctx, remaining, &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumAttempts:        confirmAttempts,
		NonRetryableErrorTypes: append([]string{activities.FailureNotReady}, activities.NonRetryableProviderErrors...),
	})
}

// deliverOptions retry a failing notify_url with exponential backoff for up to the delivery timeout: this durable
// retry replaces a dead-letter queue, and the pending activity shows in the Web UI with its last error.
func deliverOptions(ctx workflow.Context, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    DeliverStartToClose,
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	})
}

// expiringDeliverOptions end a delivery before its token's expires_at, retries spaced at most an eighth of that.
func expiringDeliverOptions(ctx workflow.Context, untilExpiry time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    min(DeliverStartToClose, untilExpiry),
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: untilExpiry,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    min(time.Minute, max(time.Second, untilExpiry/8)),
		},
	})
}
