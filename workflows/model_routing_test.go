package workflows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

// The model's providers (PROVIDERS_FILE): a third of the schedules keep the one-provider worker (no names); the
// rest have two or three providers, each of which may be unreachable for a while (or for good), a task may be pinned
// to one or reorder them, and the worker gives up a provider's open submissions past giveUp.

// outage is when a provider is unreachable: from, until (zero: for good).
type outage struct{ from, until time.Duration }

type routingModel struct {
	names   []string // "" only: the one-provider worker
	giveUp  time.Duration
	outages map[string]outage
	// givenUpAt is when the worker first told the task a provider was given up (Poll or ProviderGivenUp).
	givenUpAt map[string]time.Time
	scored    bool                       // routing: scored, the model primed with draws of what it measured before
	explore   float64                    // its explore_share
	prices    map[string]providers.Price // price_per_1000 (absent: none)
	reasons   map[string]int             // the scored submissions' route reasons, for the coverage
	// lacks are the providers without the reCAPTCHA task type: createTask answers ERROR_TASK_NOT_SUPPORTED, in.php
	// ERROR_NO_SUCH_METHOD (image tasks they take).
	lacks map[string]bool
}

func (s *schedule) drawRouting() {
	r := &s.routing
	r.givenUpAt, r.reasons = map[string]time.Time{}, map[string]int{}
	r.outages = map[string]outage{}
	if s.rng.IntN(3) == 0 {
		r.names = []string{""}
		return
	}
	r.names = []string{"a", "b", "c"}[:2+s.rng.IntN(2)]
	r.giveUp = time.Duration(30+s.rng.IntN(90)) * time.Second
	r.scored, r.explore, r.prices = s.rng.IntN(2) == 0, []float64{0, 0.05, 0.5}[s.rng.IntN(3)], map[string]providers.Price{}
	for _, name := range r.names { // some leave methods unpriced: no default, or no price_per_1000 at all
		p := providers.Price{"default": float64(1 + s.rng.IntN(3)), "userrecaptcha": float64(s.rng.IntN(4))}
		switch s.rng.IntN(4) {
		case 0:
			continue
		case 1:
			delete(p, "default")
		}
		r.prices[name] = p
	}
	for _, name := range r.names {
		if s.rng.IntN(3) == 0 {
			from := time.Duration(s.rng.Int64N(int64(5 * time.Minute))) // within the longest deadline's first half
			o := outage{from: from}
			if s.rng.IntN(2) == 0 {
				o.until = from + time.Duration(30+s.rng.IntN(600))*time.Second
			}
			r.outages[name] = o
		}
	}
	r.lacks = map[string]bool{}
	for _, name := range r.names {
		r.lacks[name] = s.rng.IntN(4) == 0
	}
}

// drawProviders pins the task to one provider or reorders them, or leaves the worker's order.
func (m *model) drawProviders() {
	r := &m.routing
	if !m.routed() {
		return
	}
	switch m.rng.IntN(4) {
	case 0:
		m.in.Providers = []string{r.names[m.rng.IntN(len(r.names))]} // pinned
	case 1:
		m.in.Providers = slices.Clone(r.names)
		slices.Reverse(m.in.Providers)
	}
}

func (s *schedule) routed() bool { return s.routing.names[0] != "" }

// down tells whether provider is unreachable now, and for how long it has been.
func (s *schedule) down(provider string) (bool, time.Duration) {
	o, ok := s.routing.outages[provider]
	now := s.env.Now().Sub(s.epoch)
	if !ok || now < o.from || (o.until != 0 && now >= o.until) {
		return false, 0
	}
	for _, p := range s.fakes { // a gateway's 5xx just before the outage is the breaker's evidence too
		if p.name == provider && !p.badSince.IsZero() {
			return true, max(now-o.from, s.env.Now().Sub(p.badSince))
		}
	}
	return true, now - o.from
}

// primeModel teaches a scored worker's model what earlier tasks measured: some providers slow, some unsolving.
func (s *schedule) primeModel(m *providers.Model) {
	for _, name := range s.routing.names {
		for range s.rng.IntN(8) {
			outcome := []string{providers.ObservedSolved, providers.ObservedUnsolvable, providers.ObservedOpen}[s.rng.IntN(3)]
			m.Learn(providers.Obs{Provider: name, Method: "userrecaptcha", Seconds: float64(1 + s.rng.IntN(900)), Outcome: outcome})
			if s.rng.IntN(4) == 0 {
				m.Verdict(name, "userrecaptcha", false)
			}
		}
	}
}

// slotProvider is where a routed worker's AcquireSlot pins the submission, as slotOf does: the ticket's, or the
// first of the ranking (the model's under routing: scored) that serves the method and whose circuit is not open.
func (s *schedule) slotProvider(ask activities.SlotAsk) string {
	set := s.acts.Providers
	if set == nil {
		return ""
	}
	if ask.Ticket != nil && ask.Ticket.Provider != "" {
		return ask.Ticket.Provider
	}
	cands := slices.DeleteFunc(set.Candidates(ask.Providers, ask.Exclude, ask.Avoid), func(p *providers.Provider) bool {
		return p.Client.Supports(ask.Method, ask.Params) != nil || s.breaker.Lacks(p.Name, ask.Method, ask.Params)
	})
	if set.Model.Scored() && len(cands) > 0 {
		cands, _ = set.Model.Rank(cands, ask.Method, ask.Avoid, 0, fmt.Sprint(ask.WorkflowID, ask.RunID, ask.Seq), s.breaker)
	}
	for _, p := range cands {
		if !s.breaker.IsOpen(p.Name) {
			return p.Name
		}
	}
	if len(cands) > 0 {
		return cands[0].Name
	}
	return ""
}

// checkRoute: under routing: scored an accepted submission says why, its candidates the task's allowed providers
// not given up nor lacking its task type, those it avoids last, its provider among them; under order it says nothing.
func (m *model) checkRoute(req activities.SubmitRequest, res activities.SubmitResult, lackedBefore []string) {
	if !m.routing.scored || res.Route == nil {
		if m.routing.scored != (res.Route != nil) {
			m.fail("scored-routes-explained", "routing scored %t, route %+v", m.routing.scored, res.Route)
		}
		return
	}
	m.routing.reasons[res.Route.Reason]++
	var names []string
	avoided := false
	for _, c := range res.Route.Candidates {
		names = append(names, c.Provider)
		if a := slices.Contains(req.Avoid, c.Provider); avoided && !a {
			m.fail("scored-routes-explained", "an avoided provider ranked before %s: %+v", c.Provider, res.Route)
		} else {
			avoided = avoided || a
		}
	}
	want := req.Providers
	if len(want) == 0 {
		want = m.routing.names
	}
	// Not those that refused the task type lately: before Submit ranked them, or (another task's refusal) while it did.
	want = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(req.Exclude, n) || !m.serves(n) })
	must := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(m.lacking(req), n) })
	if !subset(names, want) || !subset(must, names) || !slices.Contains(names, res.Provider) ||
		slices.ContainsFunc(lackedBefore, func(n string) bool { return slices.Contains(names, n) }) {
		m.fail("scored-routes-explained", "candidates %v, allowed %v, lacking the type %v, chosen %s", names, want, lackedBefore, res.Provider)
	}
}

func subset(a, b []string) bool {
	return !slices.ContainsFunc(a, func(n string) bool { return !slices.Contains(b, n) })
}

// serves tells whether the provider's client can express the task at all (a v3 action needs a table that reads it).
func (m *model) serves(name string) bool {
	p, ok := m.acts.Providers.Get(name)
	return ok && p.Client.Supports(m.in.Method, m.in.Params) == nil
}

// lacking are the providers the worker marks as lacking req's task type now (Submit's candidates skip them).
func (m *model) lacking(req activities.SubmitRequest) []string {
	return slices.DeleteFunc(slices.Clone(m.routing.names), func(n string) bool { return !m.breaker.Lacks(n, req.Method, req.Params) })
}

// checkCost: a result's cost_usd is at most every provider task's price (and the lost submissions' the provider did
// not create), and at least what the paid ones cost
// (created and not unsolvable, lost ones included, unless the task cancelled the Submit that made it).
func (m *model) checkCost(r captchaflow.Result) {
	most, paid := m.mayHavePaid, 0.0
	for _, t := range m.tasks {
		most += m.routing.prices[t.provider].Of(m.in.Method)
		if !t.unsolvable && !t.unseen && !t.discarded { // a reset run's cost_usd is its own submissions
			paid += m.routing.prices[t.provider].Of(m.in.Method)
		}
	}
	if r.CostUSD > most+1e-9 {
		m.fail("cost-is-the-submissions", "cost_usd %v, all submissions %v", r.CostUSD, most)
	}
	if r.CostUSD < paid-1e-9 {
		m.fail("paid-has-a-price", "cost_usd %v, the paid submissions cost %v", r.CostUSD, paid)
	}
}

// checkPriced: under routing: scored, every provider task went to a provider that prices its method (its own price
// or default); one that is free by omission takes all the traffic.
func (m *model) checkPriced() {
	for _, t := range m.tasks {
		if p := m.routing.prices[t.provider]; m.routing.scored && !priced(p, m.in.Method) {
			m.fail("paid-has-a-price", "%s took %s (method %s) without a price: %v", t.provider, t.id, m.in.Method, p)
		}
	}
}

func priced(p providers.Price, method string) bool {
	_, own := p[method]
	_, def := p["default"]
	return own || def
}

// checkPricesAtStart runs the worker's start-up check of the schedule's providers file: under routing: scored, a
// provider that leaves a method it serves unpriced is refused, naming its price_per_1000; the operator then sets
// a default. A file the worker accepts runs as it is.
func (s *schedule) checkPricesAtStart(list []*providers.Provider) {
	f := providers.File{Routing: map[bool]string{true: providers.RoutingScored}[s.routing.scored]}
	for _, p := range list {
		spec := providers.Spec{Name: p.Name, Protocol: providers.ProtocolInPHP, BaseURL: "https://p.example", APIKeyEnv: "KEY", PricePer1000: p.Price}
		if p.Flavor != "" {
			spec.Protocol, spec.Flavor, spec.BaseURL = providers.ProtocolCreateTask, string(p.Flavor), ""
		}
		f.Providers = append(f.Providers, spec)
	}
	content, err := yaml.Marshal(f)
	s.must(err)
	_, err = providers.ParseFile(content, func(string) string { return "key" })
	for i, p := range list {
		unpriced := !priced(p.Price, "") && (p.Flavor == "" || slices.ContainsFunc(providers.Methods(p.Flavor), func(m string) bool { return !priced(p.Price, m) }))
		refused := err != nil && strings.Contains(err.Error(), fmt.Sprintf("providers[%d].price_per_1000", i))
		if refused != (s.routing.scored && unpriced) {
			s.fail("unpriced-refused-at-start", "%s (%q, price %v, scored %t): refused %t: %v", p.Name, p.Flavor, p.Price, s.routing.scored, refused, err)
		}
		if refused {
			p.Price = providers.Price{"default": 2, "userrecaptcha": p.Price["userrecaptcha"]}
			s.routing.prices[p.Name] = p.Price
		}
	}
}

// checkExplore: an explored submission goes to a provider Submit would not skip (allowed when it ranked), and the
// candidates after it keep the ranking's order, so when the explored one refuses the best comes next.
func (m *model) checkExplore(req activities.SubmitRequest, res activities.SubmitResult, allowed map[string]bool) {
	if res.Route == nil || res.Route.Reason != captchaflow.RouteExplore {
		return
	}
	c := res.Route.Candidates
	if !allowed[c[0].Provider] {
		m.fail("explores-where-submit-goes", "explored %s, which Submit skips (allowed %v): %+v", c[0].Provider, allowed, res.Route)
	}
	if slices.ContainsFunc(c, func(c captchaflow.RouteCandidate) bool { return !allowed[c.Provider] }) {
		m.routing.reasons["explore-among-skipped"]++
	}
	rank := func(a, b captchaflow.RouteCandidate) int { // Rank's order, to the rounding of the route's figures
		key := func(c captchaflow.RouteCandidate) (int, float64) {
			if slices.Contains(req.Avoid, c.Provider) {
				return 2, 0
			} else if !c.Fits {
				return 1, c.P90Seconds / c.GoodShare
			}
			return 0, c.CostUSD
		}
		ka, va := key(a)
		kb, vb := key(b)
		if math.Abs(va-vb) <= 1e-6*max(math.Abs(va), math.Abs(vb)) {
			va = vb
		}
		return cmp.Or(cmp.Compare(ka, kb), cmp.Compare(va, vb))
	}
	if !slices.IsSortedFunc(c[1:], rank) {
		m.fail("explores-where-submit-goes", "after the explored %s the fallback is not the best: %+v", c[0].Provider, res.Route)
	}
}

// checkRouteRequest: the task passes its providers as given, excludes only providers the worker gave up or that
// refused its task type, and avoids only providers that found one of its submissions unsolvable or whose submit
// queue did not serve one (model_pace_test.go).
func (m *model) checkRouteRequest(req activities.SubmitRequest) {
	if !slices.Equal(req.Providers, m.in.Providers) {
		m.fail("routes-as-asked", "Submit asked for providers %v, the input says %v", req.Providers, m.in.Providers)
	}
	for _, name := range req.Exclude {
		if _, ok := m.routing.givenUpAt[name]; !ok && !slices.Contains(m.refused, name) {
			m.fail("routes-as-asked", "Submit excludes %s, which the worker never gave up and which took the task type", name)
		}
	}
	for _, name := range req.Avoid {
		if !slices.ContainsFunc(m.tasks, func(t *providerTask) bool { return t.provider == name && t.unsolvable }) && !m.unservedAt[name] {
			m.fail("routes-as-asked", "Submit avoids %s, which found nothing unsolvable and whose queue served its Submits", name)
		}
	}
}

// givenUp records that the worker gave provider up; it may only when the provider is unreachable now and has been
// for PROVIDER_GIVE_UP (stale evidence gives up a provider that holds paid codes).
func (s *schedule) givenUp(provider string) {
	if down, since := s.down(provider); !down || since < s.routing.giveUp {
		s.fail("gives-up-only-the-unreachable", "%s given up, down %v for %v (PROVIDER_GIVE_UP %v)", provider, down, since, s.routing.giveUp)
	}
	if _, ok := s.routing.givenUpAt[provider]; !ok {
		s.routing.givenUpAt[provider] = s.env.Now()
	}
}

// mockGivenUp runs the real ProviderGivenUp (the shared breaker) and records what it told the task.
func (s *schedule) mockGivenUp() {
	s.env.OnActivity(acts.ProviderGivenUp, mock.Anything, mock.Anything).Return(func(ctx context.Context, provider string) (bool, error) {
		gaveUp, err := s.acts.ProviderGivenUp(ctx, provider)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.logf("ProviderGivenUp %s -> %v", provider, gaveUp)
		if gaveUp {
			s.givenUp(provider)
		}
		return gaveUp, err
	})
}

// mockObserved runs the real Observe and Deliver, checking first what the task hands the routing model.
func (s *schedule) mockObserved() {
	s.env.OnActivity(acts.Observe, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.ObserveRequest) error {
		s.checkObserved(ctx, &req)
		return s.acts.Observe(ctx, req)
	})
	s.env.OnActivity(acts.Deliver, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.DeliverRequest) error {
		s.checkObserved(ctx, req.Observed)
		return s.acts.Deliver(ctx, req)
	})
}

// checkObserved: a submission observed still open is one a provider took (a lost one that never answered says
// nothing of a solve time, nor that it was made): never more open ones at a provider than its tasks that were.
func (s *schedule) checkObserved(ctx context.Context, req *activities.ObserveRequest) {
	if req == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.solve(activity.GetInfo(ctx).WorkflowExecution.ID)
	open := map[string]int{}
	for _, o := range req.Observations {
		if o.Outcome == providers.ObservedOpen {
			open[o.Provider]++
		}
	}
	for provider, n := range open {
		if made := len(slices.DeleteFunc(slices.Clone(m.tasks), func(t *providerTask) bool {
			return t.provider != provider || t.lost && t.arrived.IsZero()
		})); n > made {
			m.fail("observes-what-it-was", "%d submission(s) at %s observed open, %d taken and not lost unanswered: %+v", n, provider, made, req.Observations)
		}
	}
}

// abandoned tells whether task was given up by now: its provider was given up after it was submitted.
func (s *schedule) abandoned(task *providerTask, now time.Time) bool {
	at, ok := s.routing.givenUpAt[task.provider]
	return ok && task.provider != "" && !at.Before(task.at) && !at.After(now)
}

// checkNoSubmitWhileOpen: before the first delivery, a new submission comes only once every earlier accepted one of
// the same solve has said it is unsolvable or was given up: never two open submissions (at one provider or two).
func (m *model) checkNoSubmitWhileOpen() {
	if len(m.delivered) > 0 || m.diedUnseen(m.env.Now()) {
		return
	}
	now := m.env.Now()
	for _, task := range m.tasks {
		if task.lost || task.discarded || m.abandoned(task, now) { // the reset run cannot know a discarded one
			continue
		}
		if !(task.unsolvable && !task.solveAt.After(now)) {
			m.fail("no-submit-while-open", "submitted at %v while submission %d (%s at %q) is open", now.Sub(m.epoch), task.n, task.id, task.provider)
		}
	}
}

// checkUnsupported: a task fails with ProviderConfig only if no provider it may use takes its task type (nor was
// given up), or a provider refused its key (ERROR_WRONG_USER_KEY): a refusal of the type moves it on (#29 §11).
func (m *model) checkUnsupported(err error) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != captchaflow.FailureProviderConfig || m.keyRefused {
		return
	}
	allowed := m.in.Providers
	if len(allowed) == 0 {
		allowed = m.routing.names
	}
	takers := slices.DeleteFunc(slices.Clone(allowed), func(name string) bool {
		_, gaveUp := m.routing.givenUpAt[name]
		return gaveUp || name == "" || m.routing.lacks[name] && m.in.Method != "base64" || !m.serves(name)
	})
	if len(takers) > 0 {
		m.fail("unsupported-moves-on", "failed with ProviderConfig (%v) although %v take its task type", err, takers)
	}
}

func (s *schedule) describe() string {
	d := fmt.Sprintf("providers %v give-up %v outages %v lack reCAPTCHA %v PROVIDER_THREADS %d workflow tasks late %v clocks ahead %v",
		s.routing.names, s.routing.giveUp, s.routing.outages, s.routing.lacks, s.settings.ProviderThreads, s.backlog, s.ahead)
	for _, m := range s.solves {
		d += fmt.Sprintf("\n%s: %+v", m.wid, m.in)
	}
	return d
}

// cover counts what the schedule exercised of routing, so a generator that stops reaching a case shows.
func (s *schedule) cover(covered map[string]int) {
	for loss, n := range s.losses {
		covered["unpaid:"+loss] += n
	}
	if len(s.solves) > 1 {
		covered["tasks-sharing-a-worker"]++
	}
	covered["workflow-tasks-late"] += min(int(s.backlog), 1)
	covered["stamping-clocks-ahead"] += min(int(s.ahead), 1)
	for reason, n := range s.routing.reasons {
		covered["route:"+reason] += n
	}
	for _, m := range s.solves {
		m.cover(covered)
		m.coverParked(covered)
	}
	s.coverPace(covered)
	s.coverKeys(covered)
}

func (m *model) cover(covered map[string]int) {
	if m.answersMore() && m.err == nil {
		covered["answers-more-solved"]++
	}
	if !m.routed() {
		covered["one-provider"]++
		return
	}
	if len(m.routing.givenUpAt) > 0 {
		covered["gave-up"]++
	}
	if len(m.in.Providers) == 1 {
		covered["pinned"]++
	}
	if m.routing.scored {
		covered["scored"]++
	}
	seen := map[string]bool{}
	for _, t := range m.tasks {
		seen[t.provider] = true
		if t.unsolvable {
			covered["unsolvable"]++
		}
		if t.instant {
			covered["instant"]++
		}
	}
	if len(seen) > 1 {
		covered["failed-over"]++
	}
	if len(m.refused) > 0 {
		covered["type-refused"]++
	}
}
