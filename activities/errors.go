package activities

import (
	"errors"

	"github.com/captchaflow/captchaflow/captchaai"
	"go.temporal.io/sdk/temporal"
)

// Application error types the activities raise; the workflow and retry policies branch on them.
const (
	// ErrProviderConfig: the provider refused the request for a reason retrying cannot fix (key, parameters).
	ErrProviderConfig = "ProviderConfig"
	// ErrProviderTransient: a busy provider, network trouble or a 5xx; retried with backoff.
	ErrProviderTransient = "ProviderTransient"
	// ErrResubmit: the provider gave up on this task (unsolvable); a new submission may succeed.
	ErrResubmit = "ProviderResubmit"
	// ErrNotReady: the task is still being solved; the poll's retry policy spaces the next look.
	ErrNotReady = "NotReady"
	// ErrProviderUnknown: an answer we do not know; not retried, the code is in the message.
	ErrProviderUnknown = "ProviderUnknown"
	// ErrWorkerConfig: the worker itself is misconfigured (e.g. no NOTIFY_SECRET). Retried, so that fixing the
	// configuration and restarting the worker lets the task carry on instead of losing it.
	ErrWorkerConfig = "WorkerConfig"
	// ErrDeliveryRejected: notify_url answered with a non-2xx status; retried.
	ErrDeliveryRejected = "DeliveryRejected"
)

// NonRetryableProviderErrors are the provider error types no retry policy should retry.
var NonRetryableProviderErrors = []string{ErrProviderConfig, ErrProviderUnknown, ErrResubmit}

// providerError turns a captchaai error into a typed Temporal application error. The client has already removed
// the API key from the message.
func providerError(err error) error {
	if err == nil {
		return nil
	}
	var pe *captchaai.Error
	code := ""
	if errors.As(err, &pe) {
		code = pe.Code
	}
	msg := err.Error()
	switch captchaai.ClassOf(err) {
	case captchaai.ClassNotReady:
		return temporal.NewApplicationError(msg, ErrNotReady, code)
	case captchaai.ClassResubmit:
		return temporal.NewNonRetryableApplicationError(msg, ErrResubmit, nil, code)
	case captchaai.ClassConfig:
		return temporal.NewNonRetryableApplicationError(msg, ErrProviderConfig, nil, code)
	case captchaai.ClassUnknown:
		return temporal.NewNonRetryableApplicationError(msg, ErrProviderUnknown, nil, code)
	default:
		return temporal.NewApplicationError(msg, ErrProviderTransient, code)
	}
}
