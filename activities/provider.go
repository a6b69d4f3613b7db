package activities

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// SubmitRequest is the input of Submit. It holds no secret: the pingback URL and its token are built here.
type SubmitRequest struct {
	Method string            `json:"method"`
	Params map[string]string `json:"params"`
	// RunID and Submission name the submission in its signed pingback URL, so a lost answer's callback is known.
	RunID      string `json:"run_id,omitempty"`
	Submission int    `json:"submission,omitempty"`
	// Providers restricts and orders (Input.providers), Exclude are given up, Avoid go last; without PROVIDERS_FILE: none.
	Providers []string `json:"providers,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	Avoid     []string `json:"avoid,omitempty"`
	Provider  string   `json:"provider,omitempty"` // the slot's (admission): no other is tried
}

// SubmitResult is the provider's task ID for the new submission.
type SubmitResult struct {
	ProviderTaskID         string `json:"provider_task_id"`
	CallbackTimeoutSeconds int    `json:"callback_timeout_seconds,omitempty"` // CALLBACK_TIMEOUT_BY_METHOD's (0: none)
	Provider               string `json:"provider,omitempty"`                 // chosen here, so in history ("" without the file)
	Alternatives           int    `json:"alternatives,omitempty"`             // other providers the task could use
	GiveUpSeconds          int    `json:"give_up_seconds,omitempty"`          // the worker's PROVIDER_GIVE_UP
	PollIntervalSeconds    int    `json:"poll_interval_seconds,omitempty"`    // the provider's least poll spacing
	Code                   string `json:"code,omitempty"`                     // came with the answer (CapSolver's images)
}

// LostDetails are a FailureSubmitOutcomeUnknown's: where the submission went, and after how long it may be given up.
type LostDetails struct {
	Provider      string `json:"provider"`
	Alternatives  int    `json:"alternatives,omitempty"`
	GiveUpSeconds int    `json:"give_up_seconds,omitempty"`
}

// LegacyProviderName names the one provider of a worker without PROVIDERS_FILE in logs (never in history).
const LegacyProviderName = "captchaai"

// set is the worker's providers: Providers, or the one-provider set of Provider (made per call: tests swap it).
func (a *Activities) set() *providers.Set {
	if a.Providers != nil {
		return a.Providers
	}
	return providers.Single(LegacyProviderName, a.Provider)
}

// Submit sends the task to the first candidate whose circuit lets it through. A refusal that opens its circuit moves
// on within the attempt (nothing was created); a lost answer (FailureSubmitOutcomeUnknown) never moves on.
func (a *Activities) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	defer keepAlive(ctx)()
	set := a.set()
	cands, why := supported(set.Candidates(req.Providers, req.Exclude, req.Avoid), req)
	if len(cands) == 0 {
		return SubmitResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no provider this task may use serves method %.40q: %s", req.Method, why), captchaflow.FailureProviderConfig, nil)
	}
	var retryAt time.Time
	var lastErr error
	for _, p := range cands {
		if req.Provider != "" && p.Name != req.Provider {
			continue
		}
		if ok, at, reason := set.Breaker.Allow(p.Name); !ok {
			a.countSubmission(ctx, p.Name, SubmissionSkipped)
			activity.GetLogger(ctx).Info("provider skipped: circuit open", "Provider", p.Name, "Reason", reason, "Until", at)
			if retryAt.IsZero() || at.Before(retryAt) {
				retryAt = at
			}
			continue
		}
		res, err, next := a.submitTo(ctx, p, req, len(cands)-1)
		if !next {
			return res, err
		}
		lastErr = err
	}
	if req.Provider != "" {
		if err := movedFrom(req.Provider, cands, set.Breaker); err != nil {
			return SubmitResult{}, err
		}
	}
	if lastErr != nil {
		return SubmitResult{}, lastErr
	}
	return SubmitResult{}, unavailable(ctx, retryAt)
}

// supported drops the candidates that cannot serve the method; why says which and why, for the failure.
func supported(cands []*providers.Provider, req SubmitRequest) ([]*providers.Provider, string) {
	var out []*providers.Provider
	var why []string
	for _, p := range cands {
		if err := p.Client.Supports(req.Method, req.Params); err != nil {
			why = append(why, p.Name+": "+err.Error())
			continue
		}
		out = append(out, p)
	}
	if len(why) == 0 {
		why = append(why, "no provider left (providers / excluded)")
	}
	return out, strings.Join(why, "; ")
}

// submitTo makes one submission to p; next: nothing was created and p's circuit is now open, so try the next.
func (a *Activities) submitTo(ctx context.Context, p *providers.Provider, req SubmitRequest, alternatives int) (SubmitResult, error, bool) {
	set := a.set()
	name := a.routedName(p)
	lost := LostDetails{Provider: name}
	if name != "" {
		lost.Alternatives, lost.GiveUpSeconds = alternatives, int(set.Breaker.Settings().GiveUp/time.Second)
	}
	pingback, err := a.pingbackURL(ctx, req, name, p.Flavor)
	if err != nil {
		return SubmitResult{}, err, false
	}
	id, code, err := p.Client.Submit(ctx, req.Method, req.Params, pingback)
	a.countAnswer(ctx, p, AnswerOpSubmit, answerCode(err))
	a.record(ctx, p.Name, err, set.Breaker.Record)
	switch {
	case err == nil:
		a.countSubmission(ctx, p.Name, SubmissionAccepted)
		activity.GetLogger(ctx).Info("submitted to provider", "Provider", p.Name, "ProviderTaskID", id)
		return SubmitResult{ProviderTaskID: id, Provider: name, Code: code, Alternatives: lost.Alternatives,
			GiveUpSeconds: lost.GiveUpSeconds, PollIntervalSeconds: int(p.PollInterval / time.Second),
			CallbackTimeoutSeconds: int(a.CallbackTimeoutByMethod[req.Method] / time.Second)}, nil, false
	case providers.OutcomeUnknown(err):
		a.countSubmission(ctx, p.Name, SubmissionLost)
		return SubmitResult{}, submitOutcomeUnknown(ctx, lost, err), false
	}
	a.countSubmission(ctx, p.Name, SubmissionRefused)
	next := set.Breaker.IsOpen(p.Name) && providers.ClassOf(err) != callback.ClassResubmit
	if answerCode(err) == callback.CodeZeroBalance {
		return SubmitResult{}, zeroBalanceError(ctx, err.Error()), next
	}
	return SubmitResult{}, providerError(ctx, err), next
}

// routedName is p's name as results, pingback URLs and metrics carry it: "" on a worker without PROVIDERS_FILE.
func (a *Activities) routedName(p *providers.Provider) string {
	if !a.set().Routed {
		return ""
	}
	return p.Name
}

// pingbackURL names the submission, its provider and a createTask provider's flavor (the ingress reads its body).
func (a *Activities) pingbackURL(ctx context.Context, req SubmitRequest, provider string, flavor providers.Flavor) (string, error) {
	pingback, err := callbackauth.URLFor(a.CallbackBaseURL, activity.GetInfo(ctx).WorkflowExecution.ID, a.CallbackSecret,
		callbackauth.Submission{RunID: req.RunID, N: req.Submission, Provider: provider})
	if err != nil {
		return "", temporal.NewApplicationError("building the callback URL: "+err.Error(), FailureWorkerConfig)
	}
	if u, err := url.Parse(pingback); err == nil && flavor != "" {
		q := u.Query()
		q.Set(callbackauth.FlavorParam, string(flavor))
		u.RawQuery = q.Encode()
		pingback = u.String()
	}
	return pingback, nil
}

// PollRequest names the provider task to look up.
type PollRequest struct {
	ProviderTaskID string `json:"provider_task_id"`
	Provider       string `json:"provider,omitempty"` // took the submission ("": the first)
	GiveUp         bool   `json:"give_up,omitempty"`  // unanswered past PROVIDER_GIVE_UP: give the submission up
}

// PollResult is the solved code.
type PollResult struct {
	Code string `json:"code"`
}

// Poll makes exactly one result request; not ready is a retryable NotReady error the retry policy spaces.
func (a *Activities) Poll(ctx context.Context, req PollRequest) (PollResult, error) {
	defer keepAlive(ctx)()
	set := a.set()
	p, ok := set.Get(req.Provider)
	if !ok {
		return PollResult{}, temporal.NewApplicationError(fmt.Sprintf("provider %.40q is not in this worker's PROVIDERS_FILE", req.Provider), FailureWorkerConfig)
	}
	code, err := p.Client.Get(ctx, req.ProviderTaskID)
	a.record(ctx, p.Name, err, set.Breaker.RecordPoll)
	if err != nil {
		a.countAnswer(ctx, p, AnswerOpGet, answerCode(err))
		if req.GiveUp && set.Breaker.GivenUp(p.Name) { // always asked first: the provider holds the paid code
			a.countSubmission(ctx, p.Name, SubmissionAbandon)
			return PollResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("provider %s unreachable for %v (PROVIDER_GIVE_UP): submission given up",
				p.Name, set.Breaker.DownFor(p.Name).Round(time.Second)), FailureProviderGaveUp, nil, p.Name)
		}
		return PollResult{}, providerError(ctx, err)
	}
	if err := solutionError(ctx, code); err != nil {
		a.countAnswer(ctx, p, AnswerOpGet, refusedSolutionCode(code))
		return PollResult{}, err
	}
	a.countAnswer(ctx, p, AnswerOpGet, AnswerOK)
	return PollResult{Code: code}, nil
}

// ProviderGivenUpName is the registered name of ProviderGivenUp.
const ProviderGivenUpName = "ProviderGivenUp"

// ProviderGivenUp: unreachable past PROVIDER_GIVE_UP on this worker (a local activity, so replay decides the same).
func (a *Activities) ProviderGivenUp(_ context.Context, provider string) (bool, error) {
	return a.set().Routed && a.set().Breaker.GivenUp(provider), nil
}

// unavailable is the retryable FailureProviderUnavailable error, retried when the first circuit half-opens.
func unavailable(ctx context.Context, retryAt time.Time) error {
	wait := pacedDelay(max(time.Until(retryAt), time.Second), timeLeft(ctx), 0.5)
	return temporal.NewApplicationErrorWithOptions("every provider this task may use is skipped (circuit open)",
		FailureProviderUnavailable, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
}

// record feeds a request's outcome to name's circuit (Record, or RecordPoll: reachability only) and the metrics.
func (a *Activities) record(ctx context.Context, name string, err error, rec func(string, providers.Outcome) string) {
	if a.set().Breaker == nil {
		return
	}
	if reason := rec(name, providers.OutcomeOf(err)); reason != "" {
		activity.GetLogger(ctx).Warn("provider circuit opened", "Provider", name, "Reason", reason)
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": name, "reason": reason}).
			Counter(MetricCircuitOpened).Inc(1)
	}
}
