package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/telemetry"
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
	Reason    string   `json:"reason,omitempty"`   // why the pin's ranking chose Provider (SlotTicket's)
	Lane      string   `json:"lane,omitempty"`     // the paced queue whose worker's lane it takes room in (Pacer.Lane)
}

// SubmitResult is the provider's task ID for the new submission.
type SubmitResult struct {
	ProviderTaskID         string             `json:"provider_task_id"`
	CallbackTimeoutSeconds int                `json:"callback_timeout_seconds,omitempty"` // CALLBACK_TIMEOUT_BY_METHOD's (0: none)
	Provider               string             `json:"provider,omitempty"`                 // chosen here, so in history ("" without the file)
	Alternatives           int                `json:"alternatives,omitempty"`             // other providers the task could use
	GiveUpSeconds          int                `json:"give_up_seconds,omitempty"`          // the worker's PROVIDER_GIVE_UP
	PollIntervalSeconds    int                `json:"poll_interval_seconds,omitempty"`    // the provider's least poll spacing
	Code                   string             `json:"code,omitempty"`                     // came with the answer (CapSolver's images)
	PriceUSD               float64            `json:"price_usd,omitempty"`                // what it costs at PROVIDERS_FILE's price
	Refunds                bool               `json:"refunds,omitempty"`                  // unless it ends unsolvable
	Route                  *captchaflow.Route `json:"route,omitempty"`                    // why it went to Provider (routing: scored)
	RunID                  string             `json:"run_id,omitempty"`                   // the run its pingback URL names
	ReceivedAt             time.Time          `json:"received_at,omitzero"`               // when Code came (gotAt)
	AcceptedAt             time.Time          `json:"accepted_at,omitzero"`               // when the request it accepted was sent: submitted_at
}

// LostDetails are a FailureSubmitOutcomeUnknown's (and FailureProviderUnsupported's): where it went, alternatives, give-up.
type LostDetails struct {
	Provider      string  `json:"provider"` // "" without PROVIDERS_FILE, which has no alternatives nor give-up either
	Alternatives  int     `json:"alternatives,omitempty"`
	GiveUpSeconds int     `json:"give_up_seconds,omitempty"`
	RunID         string  `json:"run_id,omitempty"`    // the run its pingback URL names
	PriceUSD      float64 `json:"price_usd,omitempty"` // SubmitResult's, as Refunds: a lost submission may have been paid
	Refunds       bool    `json:"refunds,omitempty"`
}

// set is the worker's providers: Providers, or Provider alone, named captchaai in logs (made per call: tests swap it).
func (a *Activities) set() *providers.Set {
	if a.Providers != nil {
		return a.Providers
	}
	return providers.Single(SingleProvider, a.Provider)
}

// provider is the provider named in an activity's input ("": the first).
func (a *Activities) provider(name string) (*providers.Provider, error) {
	if p, ok := a.set().Get(name); ok {
		return p, nil
	}
	return nil, temporal.NewApplicationError(fmt.Sprintf("provider %.40q is not in this worker's PROVIDERS_FILE", name), FailureWorkerConfig)
}

// Submit tries the candidates whose circuit lets it through: a refusal that opens it moves on, a lost answer never.
func (a *Activities) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	if req.Lane != "" && !a.Pace.takeLane(req.Lane) { // the room is taken as the request goes, each attempt's
		return SubmitResult{}, temporal.NewNonRetryableApplicationError("no room in this worker's lane of the account's rate: submitted again",
			FailureLaneSpent, nil)
	}
	var going atomic.Pointer[LostDetails]
	defer keepAlive(ctx, &going)()
	set := a.set()
	cands, route, why := a.ranked(req, timeLeft(ctx), activity.GetInfo(ctx).WorkflowExecution.ID)
	explainPin(route, req, cands)
	if len(cands) == 0 {
		return SubmitResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no provider this task may use serves method %.40q: %s", req.Method, why), captchaflow.FailureProviderConfig, nil)
	}
	var retryAt time.Time
	var lastErr error
	for i, p := range cands {
		if req.Provider != "" && p.Name != req.Provider {
			continue
		}
		if i > 0 && req.Provider == "" && route != nil && route.Reason == captchaflow.RouteProbe { // failed over: no probe's
			route.Reason = map[bool]string{true: captchaflow.RouteCheapest, false: captchaflow.RouteFastest}[route.Candidates[i].Fits]
		}
		if ok, at, reason := set.Breaker.Allow(p.Name); !ok {
			a.countSubmission(ctx, p.Name, "skipped")
			activity.GetLogger(ctx).Info("provider skipped: circuit open", "Provider", p.Name, "Reason", reason, "Until", at)
			if retryAt.IsZero() || at.Before(retryAt) {
				retryAt = at
			}
			continue
		}
		res, err, next := a.submitTo(ctx, p, req, len(cands)-1, &going)
		if res.Route = route; !next {
			return res, err
		}
		lastErr = err
	}
	if req.Provider != "" { // a pin that moved outranks the pin's own refusal
		lastErr = cmp.Or(movedFrom(req.Provider, cands, set.Breaker), lastErr)
	}
	if lastErr != nil {
		return SubmitResult{}, lastErr
	}
	return SubmitResult{}, temporal.NewApplicationErrorWithOptions("every provider this task may use is skipped (circuit open)",
		FailureProviderUnavailable, temporal.ApplicationErrorOptions{ // retried when the first circuit half-opens
			NextRetryDelay: pacedDelay(max(time.Until(retryAt), time.Second), timeLeft(ctx), 0.5)})
}

// explainPin says why a pinned submission goes to its pin: the pin's probe or exploration (first, as the pin's
// ranking put it), or the slot's provider when this worker's ranking puts another first.
func explainPin(route *captchaflow.Route, req SubmitRequest, cands []*providers.Provider) {
	switch {
	case route == nil || req.Provider == "":
	case req.Reason == captchaflow.RouteProbe || req.Reason == captchaflow.RouteExplore:
		i := max(0, slices.IndexFunc(route.Candidates, func(c captchaflow.RouteCandidate) bool { return c.Provider == req.Provider }))
		route.Reason, route.Candidates = req.Reason, slices.Concat(route.Candidates[i:i+1], route.Candidates[:i], route.Candidates[i+1:])
	case cands[0].Name != req.Provider:
		route.Reason = captchaflow.RouteSlot
	}
}

// ranked is where a submission may go, best first (by the model under routing: scored), and why; Submit and slotOf
// both ask it, so a slot is taken where Submit would go. seed, with the request's run and number, draws exploring.
func (a *Activities) ranked(req SubmitRequest, left time.Duration, seed string) ([]*providers.Provider, *captchaflow.Route, string) {
	set := a.set()
	cands, why := supported(set.Candidates(req.Providers, req.Exclude, req.Avoid), req, set.Breaker)
	if len(cands) == 0 || !set.Model.Scored() {
		return cands, nil, why
	}
	if seed = fmt.Sprint(seed, req.RunID, req.Submission); req.Provider != "" {
		seed = "" // a pinned submission's provider was chosen where it was pinned: no probe spent here
	}
	cands, route := set.Model.Rank(cands, req.Method, req.Avoid, left, seed, set.Breaker)
	return cands, route, why
}

// supported drops the candidates that cannot serve the method, or refused its task type lately; why says which and why.
func supported(cands []*providers.Provider, req SubmitRequest, b *providers.Breaker) ([]*providers.Provider, string) {
	var out []*providers.Provider
	var why []string
	for _, p := range cands {
		err := p.Client.Supports(req.Method, req.Params)
		if err == nil && b.Lacks(p.Name, req.Method, req.Params) {
			err = fmt.Errorf("refused the task type within %v (ERROR_TASK_NOT_SUPPORTED or the like)", providers.UnsupportedFor)
		}
		if err != nil {
			why = append(why, p.Name+": "+err.Error())
			continue
		}
		out = append(out, p)
	}
	return out, cmp.Or(strings.Join(why, "; "), "no provider left (providers / excluded)")
}

// submitTo makes one submission to p; next: nothing was created and p's circuit is now open, so try the next.
func (a *Activities) submitTo(ctx context.Context, p *providers.Provider, req SubmitRequest, alternatives int,
	going *atomic.Pointer[LostDetails]) (SubmitResult, error, bool) {
	lost := LostDetails{Provider: a.routedName(p), Alternatives: alternatives, GiveUpSeconds: int(a.set().Breaker.Settings().GiveUp / time.Second),
		RunID: req.RunID, PriceUSD: p.Price.Of(req.Method), Refunds: p.Refunds}
	going.Store(&lost) // a worker killed mid-request leaves it in the heartbeat timeout's details
	if lost != (LostDetails{GiveUpSeconds: lost.GiveUpSeconds, RunID: activity.GetInfo(ctx).WorkflowExecution.RunID}) {
		beat(ctx, going) // a server write, skipped when the details add nothing to a bare timeout (this run, no price)
	}
	// The pingback names the submission, its provider and a createTask provider's flavor (the ingress reads its body).
	workflowID := activity.GetInfo(ctx).WorkflowExecution.ID
	ctx = telemetry.Annotate(ctx, workflowID, p.Name, "")
	pingback, err := callbackauth.URLFor(a.CallbackBaseURL, workflowID, a.CallbackSecret,
		callbackauth.Submission{RunID: req.RunID, N: req.Submission, Provider: lost.Provider, Trace: telemetry.Traceparent(ctx)})
	if err != nil {
		return SubmitResult{}, temporal.NewApplicationError("building the callback URL: "+err.Error(), FailureWorkerConfig), false
	}
	if p.Flavor != "" {
		pingback += "&" + callbackauth.FlavorParam + "=" + url.QueryEscape(string(p.Flavor))
	}
	sent := time.Now().UTC() // the acceptance's time: its pingback may come before the answer does
	id, code, err := p.Client.Submit(ctx, req.Method, req.Params, pingback)
	a.countAnswer(ctx, p, "submit", err)
	a.record(ctx, p.Name, err, a.set().Breaker.Record)
	a.paceOn(ctx, p.Name, SubmitQueue, err)
	switch {
	case err == nil:
		telemetry.Annotate(ctx, "", "", id)
		a.countSubmission(ctx, p.Name, "accepted")
		activity.GetLogger(ctx).Info("submitted to provider", "Provider", p.Name, "ProviderTaskID", id)
		return SubmitResult{ProviderTaskID: id, Provider: lost.Provider, Code: code, Alternatives: lost.Alternatives,
			GiveUpSeconds: lost.GiveUpSeconds, PollIntervalSeconds: int(p.PollInterval / time.Second),
			PriceUSD: lost.PriceUSD, Refunds: lost.Refunds, RunID: req.RunID, ReceivedAt: gotAt(code), AcceptedAt: sent,
			CallbackTimeoutSeconds: int(a.CallbackTimeoutByMethod[req.Method] / time.Second)}, nil, false
	case providers.OutcomeUnknown(err): // the providers decide it; never submitted again here
		a.countSubmission(ctx, p.Name, "lost")
		activity.GetLogger(ctx).Warn("the provider failed after the request was sent: it may have created the task",
			"Provider", p.Name, "Error", err)
		return SubmitResult{}, temporal.NewApplicationError("the provider's answer was lost after the request was sent: "+
			err.Error(), FailureSubmitOutcomeUnknown, lost), false
	}
	a.countSubmission(ctx, p.Name, "refused")
	if c := providers.ClassOf(err); c == callback.ClassUnsupported || c == callback.ClassProxy {
		return SubmitResult{}, a.refusedTask(ctx, p.Name, req, err, lost), false
	}
	next := a.set().Breaker.IsOpen(p.Name) && providers.ClassOf(err) != callback.ClassResubmit
	if callback.Canonical(codeOf(err)) == callback.CodeZeroBalance {
		return SubmitResult{}, transientError(ctx, err, FailureProviderZeroBalance), next
	}
	return SubmitResult{}, providerError(ctx, err), next
}

// refusedTask fails a Submit whose task the provider would not take: a proxy word is the user's (ProxyRejected, asked
// nowhere else); a type it lacks is marked (skipped a while), and the workflow decides to go elsewhere.
func (a *Activities) refusedTask(ctx context.Context, name string, req SubmitRequest, err error, lost LostDetails) error {
	if providers.ClassOf(err) == callback.ClassProxy {
		activity.GetLogger(ctx).Warn("the provider could not use the task's proxy", "Provider", name, "Code", codeOf(err))
		return ProxyRejected(codeOf(err), req.Params)
	}
	if a.set().Routed {
		a.set().Breaker.Refused(name, req.Method, req.Params)
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": name, "method": req.Method}).
			Counter(MetricProviderUnsupported).Inc(1)
	}
	activity.GetLogger(ctx).Warn("the provider lacks the task type: not asked for it again for a while", "Provider", name,
		"Method", req.Method, "For", providers.UnsupportedFor, "Error", err)
	return temporal.NewNonRetryableApplicationError(err.Error(), FailureProviderUnsupported, nil, lost)
}

// gotAt is when this worker got code (zero without one): its received_at, which the workflow holds within its clock.
func gotAt(code string) time.Time {
	if code == "" {
		return time.Time{}
	}
	return time.Now().UTC()
}

// routedName is p's name as results, pingback URLs and metrics carry it: "" on a worker without PROVIDERS_FILE.
func (a *Activities) routedName(p *providers.Provider) string {
	if !a.set().Routed {
		return ""
	}
	return p.Name
}

// PollRequest names the provider task to look up.
type PollRequest struct {
	ProviderTaskID string `json:"provider_task_id"`
	Provider       string `json:"provider,omitempty"` // took the submission ("": the first)
	GiveUp         bool   `json:"give_up,omitempty"`  // unanswered past PROVIDER_GIVE_UP: give the submission up
	// Method and SubmittedAt time a fallback poll from the provider's solve times (unset: a confirmation, asked at once).
	Method      string    `json:"method,omitempty"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	Kind        string    `json:"kind,omitempty"` // set for a kind that answers more than its code (providers.AnswersMore)
}

// PollResult is the solved code.
type PollResult struct {
	Code       string    `json:"code"`
	CostUSD    float64   `json:"cost_usd,omitempty"`   // what the provider's answer says the solve cost (0: not said)
	ReceivedAt time.Time `json:"received_at,omitzero"` // gotAt: a workflow task that runs late moves no token's life
	UserAgent  string    `json:"user_agent,omitempty"`
	Cookies    string    `json:"cookies,omitempty"` // a Cookie header
}

// Poll makes exactly one result request; not ready is a retryable NotReady error the retry policy spaces.
func (a *Activities) Poll(ctx context.Context, req PollRequest) (PollResult, error) {
	defer keepAlive(ctx)()
	p, err := a.provider(req.Provider)
	if err != nil { // removed from the file: its code is out of reach, as an unreachable provider's (behaviour.md)
		a.countSubmission(ctx, req.Provider, "abandoned")
		return PollResult{}, temporal.NewNonRetryableApplicationError(err.Error()+": submission given up", FailureProviderGaveUp, nil, req.Provider)
	}
	wait := time.Until(req.SubmittedAt.Add(a.set().Model.FirstPoll(p.Name, req.Method)))
	if wait > 0 && !req.SubmittedAt.IsZero() && wait < timeLeft(ctx)-deadlineMargin { // a hold past the deadline asks now
		return PollResult{}, temporal.NewApplicationErrorWithOptions("not asked yet: the provider's solves of the method take longer",
			FailureNotReady, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
	}
	breaker := a.set().Breaker
	if req.Kind == "" { // a kind that answers more is asked alone: a batch's answer drops all but the codes
		ctx = providers.ForMethod(ctx, req.Method)
	}
	ctx = telemetry.Annotate(ctx, activity.GetInfo(ctx).WorkflowExecution.ID, p.Name, req.ProviderTaskID)
	var ans providers.Answer
	if c, ok := p.Client.(providers.Answerer); ok {
		ans, err = c.Answer(ctx, req.ProviderTaskID, providers.Kind(req.Kind))
	} else {
		ans.Code, err = p.Client.Get(ctx, req.ProviderTaskID)
	}
	code := ans.Code
	a.record(ctx, p.Name, err, breaker.RecordPoll)
	a.paceOn(ctx, p.Name, ResultsQueue, err)
	switch { // the clients bound a code; a Client that does not is held to the same bound here
	case err == nil && len(code) > captchaflow.MaxCodeBytes:
		err = &providers.Error{Op: "get", Class: callback.ClassUnknown, Provider: "provider",
			Err: fmt.Errorf("%w: the code is %d bytes, over the %d-byte bound", providers.ErrInvalidAnswer, len(code), captchaflow.MaxCodeBytes)}
	case err == nil && callback.IsStatusWord(code): // it means what it says (ASCII: cut anywhere)
		err = &providers.Error{Op: "get", Code: code[:min(len(code), 64)], Class: callback.ClassifyCode(code),
			Err: errors.New("answered as a solution"), Provider: "provider"}
	}
	a.countAnswer(ctx, p, "get", err)
	switch {
	case err == nil:
		return PollResult{Code: code, CostUSD: ans.CostUSD, ReceivedAt: gotAt(code), UserAgent: ans.UserAgent,
			Cookies: callback.JoinCookies(ans.Cookies)}, nil
	case req.GiveUp && breaker.GivenUp(p.Name): // always asked first: the provider holds the paid code
		a.countSubmission(ctx, p.Name, "abandoned")
		return PollResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("provider %s unreachable for %v (PROVIDER_GIVE_UP): submission given up",
			p.Name, breaker.DownFor(p.Name).Round(time.Second)), FailureProviderGaveUp, nil, p.Name)
	}
	return PollResult{}, providerError(ctx, err)
}

// Observation is one submission of a solve that ended: how long it took, or how long it was open.
type Observation struct {
	Provider string  `json:"provider"`
	Seconds  float64 `json:"seconds"`
	Outcome  string  `json:"outcome"`         // providers.Observed*
	Probe    bool    `json:"probe,omitempty"` // its route's reason was RouteProbe: a solve says the provider recovered
}

// ObserveRequest is the input of Observe: one solve's submissions, of one method.
type ObserveRequest struct {
	Method       string        `json:"method"`
	Observations []Observation `json:"observations"`
}

// Observe teaches the worker's routing model a solve's submissions (a local activity: the worker that ran them).
func (a *Activities) Observe(_ context.Context, req ObserveRequest) error {
	for _, o := range req.Observations {
		a.set().Model.Learn(providers.Obs{Provider: o.Provider, Method: req.Method, Seconds: o.Seconds, Outcome: o.Outcome, Reset: o.Probe})
	}
	return nil
}

// ProviderGivenUp: unreachable past PROVIDER_GIVE_UP on this worker (a local activity, so replay decides the same).
func (a *Activities) ProviderGivenUp(_ context.Context, provider string) (bool, error) {
	return a.set().Breaker.GivenUp(provider), nil // no breaker without PROVIDERS_FILE
}

// record feeds a request's outcome to name's circuit (Record, or RecordPoll: reachability only) and the metrics.
func (a *Activities) record(ctx context.Context, name string, err error, rec func(string, providers.Outcome) string) {
	if reason := rec(name, providers.OutcomeOf(err)); reason != "" {
		activity.GetLogger(ctx).Warn("provider circuit opened", "Provider", name, "Reason", reason)
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": name, "reason": reason}).
			Counter(MetricCircuitOpened).Inc(1)
	}
}

// paceOn pauses the account's queue of kind when err is a rate refusal: the fleet slows, not this task alone.
func (a *Activities) paceOn(ctx context.Context, provider, kind string, err error) {
	what, ok := providers.RateLimited(err)
	if !ok || a.Pace == nil {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": cmp.Or(provider, SingleProvider), "kind": kind}).
		Counter(MetricRateRefusals).Inc(1)
	if err := a.Pace.Refused(ctx, provider, kind, what, callback.RetryAfter(codeOf(err))); err != nil {
		activity.GetLogger(ctx).Warn("pausing the provider's queue failed", "Provider", provider, "Kind", kind, "Error", err)
	}
}
