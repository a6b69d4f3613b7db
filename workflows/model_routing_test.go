package workflows

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stretchr/testify/mock"

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
	for _, name := range r.names {
		if s.rng.IntN(4) > 0 {
			r.prices[name] = providers.Price{"default": float64(1 + s.rng.IntN(3)), "userrecaptcha": float64(s.rng.IntN(4))}
		}
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
	return true, now - o.from
}

// primeModel teaches a scored worker's model what earlier tasks measured: some providers slow, some unsolving.
func (s *schedule) primeModel(m *providers.Model) {
	for _, name := range s.routing.names {
		for range s.rng.IntN(8) {
			outcome := []string{providers.ObservedSolved, providers.ObservedUnsolvable, providers.ObservedOpen}[s.rng.IntN(3)]
			m.Observe(name, "userrecaptcha", float64(1+s.rng.IntN(900)), outcome)
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
		return p.Client.Supports(ask.Method, ask.Params) != nil
	})
	if set.Model.Scored() && len(cands) > 0 {
		cands, _ = set.Model.Rank(cands, ask.Method, ask.Avoid, 0, fmt.Sprint(ask.WorkflowID, ask.RunID, ask.Seq))
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
// not given up, those it avoids last, its provider among them; under order it says nothing.
func (m *model) checkRoute(req activities.SubmitRequest, res activities.SubmitResult) {
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
	want = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(req.Exclude, n) })
	if slices.Sort(names); !slices.Equal(names, slices.Sorted(slices.Values(want))) || !slices.Contains(names, res.Provider) {
		m.fail("scored-routes-explained", "candidates %v, allowed %v, chosen %s", names, want, res.Provider)
	}
}

// checkCost: a result's cost_usd is at most every provider task's price, and at least its own (unless lost).
func (m *model) checkCost(r captchaflow.Result) {
	var most, own float64
	for _, t := range m.tasks {
		most += m.routing.prices[t.provider].Of(m.in.Method)
		if t.id == r.ProviderTaskID && !t.lost {
			own = m.routing.prices[t.provider].Of(m.in.Method)
		}
	}
	if r.CostUSD > most+1e-9 || r.CostUSD < own-1e-9 {
		m.fail("cost-is-the-submissions", "cost_usd %v, own submission %v, all %v", r.CostUSD, own, most)
	}
}

// checkRouteRequest: the task passes its providers as given, excludes only providers the worker gave up, and
// avoids only providers that found one of its submissions unsolvable.
func (m *model) checkRouteRequest(req activities.SubmitRequest) {
	if !slices.Equal(req.Providers, m.in.Providers) {
		m.fail("routes-as-asked", "Submit asked for providers %v, the input says %v", req.Providers, m.in.Providers)
	}
	for _, name := range req.Exclude {
		if _, ok := m.routing.givenUpAt[name]; !ok {
			m.fail("routes-as-asked", "Submit excludes %s, which the worker never gave up", name)
		}
	}
	for _, name := range req.Avoid {
		if !slices.ContainsFunc(m.tasks, func(t *providerTask) bool { return t.provider == name && t.unsolvable }) {
			m.fail("routes-as-asked", "Submit avoids %s, which found nothing unsolvable", name)
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
		if task.lost || m.abandoned(task, now) {
			continue
		}
		if !(task.unsolvable && !task.solveAt.After(now)) {
			m.fail("no-submit-while-open", "submitted at %v while submission %d (%s at %q) is open", now.Sub(m.epoch), task.n, task.id, task.provider)
		}
	}
}

func (s *schedule) describe() string {
	d := fmt.Sprintf("providers %v give-up %v outages %v PROVIDER_THREADS %d workflow tasks late %v clocks ahead %v",
		s.routing.names, s.routing.giveUp, s.routing.outages, s.settings.ProviderThreads, s.backlog, s.ahead)
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
	}
}

func (m *model) cover(covered map[string]int) {
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
}
