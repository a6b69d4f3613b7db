package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow/callbackauth"
)

// SubmitRequest is the input of Submit. It holds no secret: the pingback URL and its token are built here.
type SubmitRequest struct {
	Method string            `json:"method"`
	Params map[string]string `json:"params"`
}

// SubmitResult is the provider's task ID for the new submission.
type SubmitResult struct {
	ProviderTaskID string `json:"provider_task_id"`
}

// Submit sends the task to in.php with this workflow's callback URL as pingback.
func (a *Activities) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	workflowID := activity.GetInfo(ctx).WorkflowExecution.ID
	pingback, err := callbackauth.URL(a.CallbackBaseURL, workflowID, a.CallbackSecret)
	if err != nil {
		return SubmitResult{}, temporal.NewApplicationError("building the callback URL: "+err.Error(), FailureWorkerConfig)
	}
	defer keepAlive(ctx)()
	id, err := a.Provider.Submit(ctx, req.Method, req.Params, pingback)
	if err != nil {
		return SubmitResult{}, providerError(err)
	}
	activity.GetLogger(ctx).Info("submitted to provider", "ProviderTaskID", id)
	return SubmitResult{ProviderTaskID: id}, nil
}

// PollRequest names the provider task to look up.
type PollRequest struct {
	ProviderTaskID string `json:"provider_task_id"`
}

// PollResult is the solved code.
type PollResult struct {
	Code string `json:"code"`
}

// Poll makes exactly one res.php action=get request. A task still being solved is a retryable NotReady error, so
// the caller's retry policy (not a loop in here) spaces the requests: the polling phase then costs a constant
// number of history events however long it lasts. A "solved" answer that cannot be a solution is refused (see
// solutionError): a provider status word is taken for what it says, an answer over captchaflow.MaxCodeBytes fails
// the poll, so neither ever becomes a result.
func (a *Activities) Poll(ctx context.Context, req PollRequest) (PollResult, error) {
	defer keepAlive(ctx)()
	code, err := a.Provider.Get(ctx, req.ProviderTaskID)
	if err != nil {
		return PollResult{}, providerError(err)
	}
	if err := solutionError(code); err != nil {
		return PollResult{}, err
	}
	return PollResult{Code: code}, nil
}
