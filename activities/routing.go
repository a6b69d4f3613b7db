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
	"github.com/captchaflow/captchaflow/captchaai"
	"github.com/captchaflow/captchaflow/internal/providers"
)

// Failure types of routing across providers (PROVIDERS_FILE).
const (
	// FailureProviderUnavailable: every provider the task may use has its circuit open; retried when the first one
	// half-opens (NextRetryDelay), so a task pinned to one provider waits for it.
	FailureProviderUnavailable = "ProviderUnavailable"
	// FailureProviderGaveUp: the submission's provider has been unreachable past PROVIDER_GIVE_UP and the task may
	// go elsewhere: the workflow abandons the submission and submits to another provider. Details: the provider.
	FailureProviderGaveUp = "ProviderGaveUp"
)

// FlavorParam is callbackauth.FlavorParam.
const FlavorParam = callbackauth.FlavorParam

// Metrics of routing, each with the tag provider (a name from PROVIDERS_FILE: a fixed set).
const (
	// MetricProviderSubmissions counts Submit requests by provider and outcome (SubmissionAccepted, …).
	MetricProviderSubmissions = "captchaflow_provider_submissions_total"
	// MetricCircuitState is a provider's circuit: 0 closed, 1 half-open, 2 open. The worker computes it when /metrics
	// is scraped (a circuit half-opens by time alone), not the activities.
	MetricCircuitState = "captchaflow_provider_circuit_state"
	// MetricCircuitOpened counts circuits opening, by provider and reason (providers.Reason*).
	MetricCircuitOpened = "captchaflow_provider_circuit_opened_total"
)

// Outcome labels of MetricProviderSubmissions.
const (
	SubmissionAccepted = "accepted"
	SubmissionRefused  = "refused"   // a provider answer that created no task (busy, zero balance, unsolvable, key…)
	SubmissionLost     = "lost"      // the answer was lost after the request was written: maybe a task, maybe paid
	SubmissionSkipped  = "skipped"   // the circuit was open: nothing sent
	SubmissionAbandon  = "abandoned" // a submission given up at an unreachable provider (maybe paid for, result ignored)
)

// set is the worker's providers: Providers, or the one-provider set of Provider (made per call: it is two small
// allocations, and tests swap Provider).
func (a *Activities) set() *providers.Set {
	if a.Providers != nil {
		return a.Providers
	}
	return providers.Single(LegacyProviderName, a.Provider)
}

// LegacyProviderName names the one provider of a worker without PROVIDERS_FILE where a name is needed (never in
// a result or history).
const LegacyProviderName = "captchaai"

// submitRouted sends the task to the first candidate whose circuit lets it through. A refusal that opens the
// candidate's circuit (zero balance, no slot past its budget, unreachable, key refused) moves on to the next one
// within the same attempt: nothing was created there. An answer lost after the request was written never does —
// the provider may be solving it — and is returned with the provider's name for the workflow's lost-answer wait.
// Each candidate gets a pingback URL of its own (pingbackURL): its callback names it.
func (a *Activities) submitRouted(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	set := a.set()
	cands, why := supported(set.Candidates(req.Providers, req.Exclude, req.Avoid), req)
	if len(cands) == 0 {
		return SubmitResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no provider this task may use serves method %.40q: %s", req.Method, why), captchaflow.FailureProviderConfig, nil)
	}
	var retryAt time.Time
	var lastErr error
	for _, p := range cands {
		ok, at, reason := set.Breaker.Allow(p.Name)
		if !ok {
			countSubmission(ctx, p.Name, SubmissionSkipped)
			activity.GetLogger(ctx).Info("provider skipped: circuit open", "Provider", p.Name, "Reason", reason, "Until", at)
			if retryAt.IsZero() || at.Before(retryAt) {
				retryAt = at
			}
			continue
		}
		alt := LostDetails{Provider: p.Name, Alternatives: len(cands) - 1,
			GiveUpSeconds: int(set.Breaker.Settings().GiveUp / time.Second)}
		res, err, next := a.submitTo(ctx, p, req, alt)
		if err == nil {
			res.Alternatives, res.GiveUpSeconds = alt.Alternatives, alt.GiveUpSeconds
			return res, nil
		}
		if !next {
			return SubmitResult{}, err
		}
		lastErr = err
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
		if err := p.Supports(req.Method, req.Params); err != nil {
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

// submitTo makes one createTask / in.php request to p. next tells whether the task may go on to the next candidate
// at once: nothing was created and p's circuit is now open.
func (a *Activities) submitTo(ctx context.Context, p *providers.Provider, req SubmitRequest, lost LostDetails) (SubmitResult, error, bool) {
	pingback, err := a.pingbackURL(ctx, req, p.Name)
	if err != nil {
		return SubmitResult{}, err, false
	}
	if p.Protocol == providers.ProtocolCreateTask {
		pingback = withFlavor(pingback, string(p.Flavor))
	}
	id, code, err := submitOnce(ctx, p.Client, req, pingback)
	countAnswerAt(ctx, p.Name, AnswerOpSubmit, answerCode(err))
	a.record(ctx, p.Name, err)
	if err == nil {
		countSubmission(ctx, p.Name, SubmissionAccepted)
		activity.GetLogger(ctx).Info("submitted to provider", "Provider", p.Name, "ProviderTaskID", id)
		return SubmitResult{ProviderTaskID: id, Provider: p.Name, Code: code,
			CallbackTimeoutSeconds: int(a.CallbackTimeoutByMethod[req.Method] / time.Second),
			PollIntervalSeconds:    int(p.PollInterval(0) / time.Second)}, nil, false
	}
	if captchaai.OutcomeUnknown(err) {
		countSubmission(ctx, p.Name, SubmissionLost)
		return SubmitResult{}, submitOutcomeUnknownAt(ctx, lost, err), false
	}
	countSubmission(ctx, p.Name, SubmissionRefused)
	next := a.set().Breaker.IsOpen(p.Name) && captchaai.ClassOf(err) != captchaai.ClassResubmit
	if answerCode(err) == codeZeroBalance {
		return SubmitResult{}, zeroBalanceError(ctx, err.Error()), next
	}
	return SubmitResult{}, providerError(ctx, err), next
}

// solvedSubmitter is a client whose submission may come back solved (createtask.Client: CapSolver answers image
// tasks at once).
type solvedSubmitter interface {
	SubmitSolved(ctx context.Context, method string, params map[string]string, callbackURL string) (id, code string, err error)
}

// submitOnce submits to c, and returns the code too when the provider answered with it.
func submitOnce(ctx context.Context, c providers.Client, req SubmitRequest, pingback string) (id, code string, err error) {
	if sc, ok := c.(solvedSubmitter); ok {
		return sc.SubmitSolved(ctx, req.Method, req.Params, pingback)
	}
	id, err = c.Submit(ctx, req.Method, req.Params, pingback)
	return id, "", err
}

// record feeds a submission's outcome to p's circuit, and an opening to the metrics.
func (a *Activities) record(ctx context.Context, name string, err error) {
	a.recordWith(ctx, name, err, a.set().Breaker.Record)
}

// recordPoll feeds a result request's outcome to p's circuit (Breaker.RecordPoll: it proves reachability only).
func (a *Activities) recordPoll(ctx context.Context, name string, err error) {
	a.recordWith(ctx, name, err, a.set().Breaker.RecordPoll)
}

func (a *Activities) recordWith(ctx context.Context, name string, err error, rec func(string, providers.Outcome) string) {
	if a.set().Breaker == nil {
		return
	}
	if reason := rec(name, providers.OutcomeOf(err)); reason != "" {
		activity.GetLogger(ctx).Warn("provider circuit opened", "Provider", name, "Reason", reason)
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": name, "reason": reason}).
			Counter(MetricCircuitOpened).Inc(1)
	}
}

// unavailable is the retryable FailureProviderUnavailable error, retried when the first circuit half-opens.
func unavailable(ctx context.Context, retryAt time.Time) error {
	wait := pacedDelay(max(time.Until(retryAt), time.Second), timeLeft(ctx), 0.5)
	return temporal.NewApplicationErrorWithOptions("every provider this task may use is skipped (circuit open)",
		FailureProviderUnavailable, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
}

// withFlavor adds the flavor to a pingback URL, so the ingress reads the provider's callback body.
func withFlavor(pingback, flavor string) string {
	u, err := url.Parse(pingback)
	if err != nil {
		return pingback
	}
	q := u.Query()
	q.Set(FlavorParam, flavor)
	u.RawQuery = q.Encode()
	return u.String()
}

func countSubmission(ctx context.Context, provider, outcome string) {
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": provider, "outcome": outcome}).
		Counter(MetricProviderSubmissions).Inc(1)
}

// countAnswerAt is countAnswer with the provider's name, for a routed worker (its label set is fixed per worker).
func countAnswerAt(ctx context.Context, provider, op, code string) {
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"op": op, "code": code, "provider": provider}).
		Counter(MetricProviderAnswers).Inc(1)
}

// LostDetails are the details of a routed FailureSubmitOutcomeUnknown: where the lost submission went, and whether
// (after how long unreachable) the task may give it up.
type LostDetails struct {
	Provider      string `json:"provider"`
	Alternatives  int    `json:"alternatives,omitempty"`
	GiveUpSeconds int    `json:"give_up_seconds,omitempty"`
}

// submitOutcomeUnknownAt is submitOutcomeUnknown with LostDetails.
func submitOutcomeUnknownAt(ctx context.Context, lost LostDetails, err error) error {
	activity.GetLogger(ctx).Warn("the provider failed after the request was sent: it may have created the task",
		"Provider", lost.Provider, "Error", err)
	return temporal.NewApplicationError("the provider's answer was lost after the request was sent: "+err.Error(),
		FailureSubmitOutcomeUnknown, lost)
}

// ProviderGivenUpName is the registered name of ProviderGivenUp.
const ProviderGivenUpName = "ProviderGivenUp"

// ProviderGivenUp tells whether provider has been unreachable past PROVIDER_GIVE_UP on this worker. Run as a local
// activity by a task whose submission's answer was lost there, every PROVIDER_GIVE_UP of its wait; its answer is
// recorded, so replay gives up (or not) the same way.
func (a *Activities) ProviderGivenUp(_ context.Context, provider string) (bool, error) {
	return a.set().Routed && a.set().Breaker.GivenUp(provider), nil
}
