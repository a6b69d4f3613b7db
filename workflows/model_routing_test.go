package workflows

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/captchaflow/captchaflow/activities"
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
}

func (m *model) drawRouting() {
	r := &m.routing
	r.givenUpAt = map[string]time.Time{}
	r.outages = map[string]outage{}
	if m.rng.IntN(3) == 0 {
		r.names = []string{""}
		return
	}
	r.names = []string{"a", "b", "c"}[:2+m.rng.IntN(2)]
	r.giveUp = time.Duration(30+m.rng.IntN(90)) * time.Second
	horizon := int64(m.in.SolveBudget())
	for _, name := range r.names {
		if m.rng.IntN(3) == 0 {
			from := time.Duration(m.rng.Int64N(horizon / 2))
			o := outage{from: from}
			if m.rng.IntN(2) == 0 {
				o.until = from + time.Duration(30+m.rng.IntN(600))*time.Second
			}
			r.outages[name] = o
		}
	}
	switch m.rng.IntN(4) {
	case 0:
		m.in.Providers = []string{r.names[m.rng.IntN(len(r.names))]} // pinned
	case 1:
		m.in.Providers = slices.Clone(r.names)
		slices.Reverse(m.in.Providers)
	}
}

func (m *model) routed() bool { return m.routing.names[0] != "" }

// down tells whether provider is unreachable now, and for how long it has been.
func (m *model) down(provider string) (bool, time.Duration) {
	o, ok := m.routing.outages[provider]
	now := m.env.Now().Sub(m.epoch)
	if !ok || now < o.from || (o.until != 0 && now >= o.until) {
		return false, 0
	}
	return true, now - o.from
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
func (m *model) givenUp(provider string) {
	if down, since := m.down(provider); !down || since < m.routing.giveUp {
		m.fail("gives-up-only-the-unreachable", "%s given up, down %v for %v (PROVIDER_GIVE_UP %v)", provider, down, since, m.routing.giveUp)
	}
	if _, ok := m.routing.givenUpAt[provider]; !ok {
		m.routing.givenUpAt[provider] = m.env.Now()
	}
}

// mockGivenUp runs the real ProviderGivenUp (the shared breaker) and records what it told the task.
func (m *model) mockGivenUp() {
	m.env.OnActivity(acts.ProviderGivenUp, mock.Anything, mock.Anything).Return(func(ctx context.Context, provider string) (bool, error) {
		gaveUp, err := m.acts.ProviderGivenUp(ctx, provider)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.logf("ProviderGivenUp %s -> %v", provider, gaveUp)
		if gaveUp {
			m.givenUp(provider)
		}
		return gaveUp, err
	})
}

// abandoned tells whether task was given up by now: its provider was given up after it was submitted.
func (m *model) abandoned(task *providerTask, now time.Time) bool {
	at, ok := m.routing.givenUpAt[task.provider]
	return ok && task.provider != "" && !at.Before(task.at) && !at.After(now)
}

// checkNoSubmitWhileOpen: before the first delivery, a new submission comes only once every earlier accepted one of
// the same solve has said it is unsolvable or was given up: never two open submissions (at one provider or two).
func (m *model) checkNoSubmitWhileOpen() {
	if len(m.delivered) > 0 {
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

func (m *model) describeRouting() string {
	return fmt.Sprintf("providers %v give-up %v outages %v pinned/order %v", m.routing.names, m.routing.giveUp, m.routing.outages, m.in.Providers)
}

// cover counts what the schedule exercised of routing, so a generator that stops reaching a case shows.
func (m *model) cover(covered map[string]int) {
	for loss, n := range m.losses {
		covered["unpaid:"+loss] += n
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
