package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/captchaai"
)

// Application error types the activities raise besides the contract's FailureProviderConfig and
// FailureProviderUnknown; the workflow and retry policies branch on them, callers never see them.
const (
	// FailureProviderTransient: a busy provider, network trouble or a 5xx; retried with backoff.
	FailureProviderTransient = "ProviderTransient"
	// FailureResubmit: the provider gave up on this task (unsolvable); a new submission may succeed.
	FailureResubmit = "ProviderResubmit"
	// FailureNotReady: the task is still being solved; the poll's retry policy spaces the next look.
	FailureNotReady = "NotReady"
	// FailureWorkerConfig: the worker itself is misconfigured (e.g. no NOTIFY_SECRET). Retried, so that fixing the
	// configuration and restarting the worker lets the task carry on instead of losing it.
	FailureWorkerConfig = "WorkerConfig"
	// FailureDeliveryRejected: notify_url answered with a non-2xx status; retried.
	FailureDeliveryRejected = "DeliveryRejected"
)

// NonRetryableProviderErrors are the provider error types no retry policy should retry.
var NonRetryableProviderErrors = []string{captchaflow.FailureProviderConfig, captchaflow.FailureProviderUnknown, FailureResubmit}

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
		return temporal.NewApplicationError(msg, FailureNotReady, code)
	case captchaai.ClassResubmit:
		return temporal.NewNonRetryableApplicationError(msg, FailureResubmit, nil, code)
	case captchaai.ClassConfig:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderConfig, nil, code)
	case captchaai.ClassUnknown:
		return temporal.NewNonRetryableApplicationError(msg, captchaflow.FailureProviderUnknown, nil, code)
	default:
		return temporal.NewApplicationError(msg, FailureProviderTransient, code)
	}
}

// maxQuotedCode bounds how much of a refused answer goes into an error message.
const maxQuotedCode = 64

// solutionError refuses a res.php answer that arrived as a success but cannot be a solution:
//
//   - a provider status word (CAPCHA_NOT_READY, ERROR_CAPTCHA_UNSOLVABLE, any ERROR_…) is treated as what it says,
//     exactly as if res.php had answered it as an error: NotReady is polled again, unsolvable means resubmit, a
//     configuration code fails, an unknown ERROR_ word is ProviderUnknown;
//   - an answer longer than captchaflow.MaxCodeBytes is a non-retryable ProviderUnknown failure naming its size:
//     res.php keeps answering the same for the task, so retrying it would only poll until the deadline, and a code
//     that size is never stored in workflow history.
func solutionError(code string) error {
	if len(code) > captchaflow.MaxCodeBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("captchaai get: the answer is %d bytes, over the %d-byte bound on a code", len(code), captchaflow.MaxCodeBytes),
			captchaflow.FailureProviderUnknown, nil)
	}
	if !captchaai.IsStatusWord(code) {
		return nil
	}
	quoted := code
	if len(quoted) > maxQuotedCode { // a status word is ASCII: cutting bytes cuts no rune
		quoted = quoted[:maxQuotedCode] + "..."
	}
	return providerError(&captchaai.Error{Op: "get", Code: quoted, Class: captchaai.ClassifyCode(code),
		Err: errors.New("answered as a solution")})
}
