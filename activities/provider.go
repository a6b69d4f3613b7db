package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/captchaai"
)

// SubmitRequest is the input of Submit. It holds no secret: the pingback URL and its token are built here.
type SubmitRequest struct {
	Method string            `json:"method"`
	Params map[string]string `json:"params"`
	// RunID and Submission name the submission in its pingback URL (signed), so its callback is known for its own
	// even when in.php's answer is lost. Requests scheduled before they existed leave them empty.
	RunID      string `json:"run_id,omitempty"`
	Submission int    `json:"submission,omitempty"`
	// Providers restricts and orders the providers this task may use (Input.providers; empty: the worker's file
	// order), Exclude are those it gave up on, Avoid those that found it unsolvable (tried last). A worker without
	// PROVIDERS_FILE ignores all three.
	Providers []string `json:"providers,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	Avoid     []string `json:"avoid,omitempty"`
}

// SubmitResult is the provider's task ID for the new submission.
type SubmitResult struct {
	ProviderTaskID string `json:"provider_task_id"`
	// CallbackTimeoutSeconds is this worker's callback timeout for the method (CALLBACK_TIMEOUT_BY_METHOD), 0 when
	// it has none. A task that left callback_timeout_seconds unset waits this long: carried in the activity's
	// result, the value is in history, so the task keeps it on replay and on any worker, at no extra event.
	CallbackTimeoutSeconds int `json:"callback_timeout_seconds,omitempty"`
	// Named tells that the pingback URL named the run and the submission: the task's callbacks then all do, and a
	// callback that names none comes from an earlier run's URL. Absent in results recorded before URLs named them.
	Named bool `json:"named,omitempty"`
	// Provider is the provider that took the submission, chosen here (circuits, Providers, Exclude, Avoid): the
	// route is in history with the result, at no extra event. Empty on a worker without PROVIDERS_FILE.
	Provider string `json:"provider,omitempty"`
	// Alternatives counts the other providers the task could have used: with none, it never gives up its provider.
	Alternatives int `json:"alternatives,omitempty"`
	// GiveUpSeconds is the worker's PROVIDER_GIVE_UP: past it unreachable, the provider's submissions are given up.
	GiveUpSeconds int `json:"give_up_seconds,omitempty"`
	// PollIntervalSeconds is the provider's least poll spacing (0: none).
	PollIntervalSeconds int `json:"poll_interval_seconds,omitempty"`
	// Code is the solution when the provider answered the submission with it (createTask: CapSolver's image
	// tasks): the workflow takes it at once, with no callback wait and no poll. Empty otherwise.
	Code string `json:"code,omitempty"`
}

// Submit sends the task to in.php with this workflow's callback URL as pingback. Its answer is counted in
// MetricProviderAnswers; a busy or rate-limit answer asks Temporal for the provider's documented wait before the next
// attempt (transientError). A request that failed after it was written (timeout, reset, EOF, a gateway's 5xx: the
// provider may have created the task) is a FailureSubmitOutcomeUnknown error, which the workflow's retry policy does not retry.
func (a *Activities) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	pingback, err := a.pingbackURL(activity.GetInfo(ctx).WorkflowExecution.ID, req)
	if err != nil {
		return SubmitResult{}, temporal.NewApplicationError("building the callback URL: "+err.Error(), FailureWorkerConfig)
	}
	defer keepAlive(ctx)()
	if a.set().Routed {
		return a.submitRouted(ctx, req, pingback)
	}
	id, err := a.Provider.Submit(ctx, req.Method, req.Params, pingback)
	countAnswer(ctx, AnswerOpSubmit, answerCode(err))
	if err != nil {
		if captchaai.OutcomeUnknown(err) {
			return SubmitResult{}, submitOutcomeUnknown(ctx, err)
		}
		if answerCode(err) == codeZeroBalance {
			return SubmitResult{}, zeroBalanceError(ctx, err.Error())
		}
		return SubmitResult{}, providerError(ctx, err)
	}
	activity.GetLogger(ctx).Info("submitted to provider", "ProviderTaskID", id)
	return SubmitResult{ProviderTaskID: id, CallbackTimeoutSeconds: int(a.CallbackTimeoutByMethod[req.Method] / time.Second),
		Named: req.Submission > 0}, nil
}

// pingbackURL names the submission when the request does, else only the workflow.
func (a *Activities) pingbackURL(workflowID string, req SubmitRequest) (string, error) {
	if req.Submission > 0 {
		return callbackauth.URLFor(a.CallbackBaseURL, workflowID, a.CallbackSecret,
			callbackauth.Submission{RunID: req.RunID, N: req.Submission})
	}
	return callbackauth.URL(a.CallbackBaseURL, workflowID, a.CallbackSecret)
}

// PollRequest names the provider task to look up.
type PollRequest struct {
	ProviderTaskID string `json:"provider_task_id"`
	// Provider took the submission ("": the worker's only or first provider). GiveUp lets a poll the provider did
	// not answer give the submission up once its requests have failed for PROVIDER_GIVE_UP (the task has somewhere
	// else to go).
	Provider string `json:"provider,omitempty"`
	GiveUp   bool   `json:"give_up,omitempty"`
}

// PollResult is the solved code.
type PollResult struct {
	Code string `json:"code"`
}

// Poll makes exactly one res.php action=get request. A task still being solved is a retryable NotReady error, so
// the caller's retry policy (not a loop in here) spaces the requests: the polling phase then costs a constant
// number of history events however long it lasts. A "solved" answer that cannot be a solution is refused (see
// solutionError): a provider status word is taken for what it says, an answer over captchaflow.MaxCodeBytes fails
// the poll, so neither ever becomes a result. Every answer is counted in MetricProviderAnswers, and a busy or
// rate-limit answer is paced like Submit's.
func (a *Activities) Poll(ctx context.Context, req PollRequest) (PollResult, error) {
	defer keepAlive(ctx)()
	set := a.set()
	p, ok := set.Get(req.Provider)
	if !ok {
		return PollResult{}, temporal.NewApplicationError(fmt.Sprintf("provider %.40q is not in this worker's PROVIDERS_FILE", req.Provider), FailureWorkerConfig)
	}
	count := func(code string) { countAnswer(ctx, AnswerOpGet, code) }
	if set.Routed {
		count = func(code string) { countAnswerAt(ctx, p.Name, AnswerOpGet, code) }
	}
	code, err := p.Client.Get(ctx, req.ProviderTaskID)
	a.recordPoll(ctx, p.Name, err)
	if err != nil {
		count(answerCode(err))
		if req.GiveUp && set.Breaker.GivenUp(p.Name) { // always asked first: the provider holds the paid code
			countSubmission(ctx, p.Name, SubmissionAbandon)
			return PollResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("provider %s unreachable for %v (PROVIDER_GIVE_UP): submission given up",
				p.Name, set.Breaker.DownFor(p.Name).Round(time.Second)), FailureProviderGaveUp, nil, p.Name)
		}
		return PollResult{}, providerError(ctx, err)
	}
	if err := solutionError(ctx, code); err != nil {
		count(refusedSolutionCode(code))
		return PollResult{}, err
	}
	count(AnswerOK)
	return PollResult{Code: code}, nil
}

// MetricProviderAnswers counts the provider's answers to the Submit (op="submit", in.php) and Poll (op="get", res.php
// action=get) activities, one per request, by code: AnswerOK, a documented provider code (captchaai.KnownCode:
// ERROR_NO_SLOT_AVAILABLE, CAPCHA_NOT_READY, …), AnswerNetwork when no answer came (captchaai.IsTransportError), or
// AnswerOther (an HTTP error status, a malformed or invalid answer, an undocumented code). The label values are a
// fixed set whatever the provider answers.
const MetricProviderAnswers = "captchaflow_provider_answers_total"

// Label values of MetricProviderAnswers.
const (
	AnswerOpSubmit = "submit"
	AnswerOpGet    = "get"
	AnswerOK       = "OK"
	AnswerNetwork  = "network"
	AnswerOther    = "other"
)

// answerCode is the code label of a provider request that ended with err (nil: AnswerOK).
func answerCode(err error) string {
	if err == nil {
		return AnswerOK
	}
	if captchaai.IsTransportError(err) {
		return AnswerNetwork
	}
	var pe *captchaai.Error
	if errors.As(err, &pe) {
		if code, ok := captchaai.KnownCode(pe.Code); ok {
			return code
		}
	}
	return AnswerOther
}

// refusedSolutionCode is the code label of a res.php "solution" that solutionError refused: a documented status word
// answered as a solution counts as that code, anything else (an undocumented ERROR_ word, an oversized answer) as
// AnswerOther.
func refusedSolutionCode(solution string) string {
	if len(solution) <= captchaflow.MaxCodeBytes {
		if code, ok := captchaai.KnownCode(solution); ok {
			return code
		}
	}
	return AnswerOther
}

func countAnswer(ctx context.Context, op, code string) {
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"op": op, "code": code}).Counter(MetricProviderAnswers).Inc(1)
}
