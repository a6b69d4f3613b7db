package workflows

import (
	"fmt"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// A sixth of the tasks run as the reset run of a chain whose earlier run made submissions the reset discarded (a
// reset to the first workflow task): those provider tasks were created and paid, and call back to the pingback URLs
// that run handed out, naming the chain's run and the same submission numbers the reset run uses again. The test
// environment cannot reset a run, so resetRuns makes workflow.GetInfo say what a reset run's does: its own run ID,
// and the chain's first run as the original.

// resetRuns answers workflow.GetInfo for the tasks drawn as reset runs.
type resetRuns struct {
	interceptor.WorkerInterceptorBase
	s *schedule
}

type resetInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	s *schedule
}

type resetOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	s *schedule
}

func (r *resetRuns) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &resetInbound{interceptor.WorkflowInboundInterceptorBase{Next: next}, r.s}
}

func (i *resetInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&resetOutbound{interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, i.s})
}

func (o *resetOutbound) GetInfo(ctx workflow.Context) *workflow.Info {
	info := *o.Next.GetInfo(ctx)
	for _, m := range o.s.solves { // the root of several tasks is none of them
		if m.wid == info.WorkflowExecution.ID && m.discards > 0 {
			info.OriginalRunID = "chain-" + m.wid
		}
	}
	return &info
}

// drawReset makes a sixth of the tasks reset runs with one or two discarded submissions.
func (m *model) drawReset() {
	if m.rng.IntN(6) == 0 {
		m.discards = 1 + m.rng.IntN(2)
	}
}

// startDiscarded creates the discarded submissions' provider tasks, at the provider the task would go to first.
func (s *schedule) startDiscarded() {
	for _, m := range s.solves {
		provider := s.routing.names[0]
		if len(m.in.Providers) > 0 {
			provider = m.in.Providers[0]
		}
		unnamed := false
		for _, p := range s.fakes {
			unnamed = unnamed || p.name == provider && (p.flavor == callback.AntiCaptcha || p.flavor == callback.CapMonster)
		}
		for n := 1; n <= m.discards; n++ {
			pingback, err := callbackauth.URLFor("https://cb.example", m.wid, "model-secret",
				callbackauth.Submission{RunID: "chain-" + m.wid, N: n, Provider: provider})
			s.must(err)
			m.discarding = true
			m.take(provider, pingback, false, false, unnamed).discarded = true
			m.discarding = false
		}
	}
}

// untold tells whether discarded task d called back while the reset run's submission of its number had no answer from
// its Submit: only that answer (history) says which URL the run handed out, so the callback waits for it, and is
// dropped if Submit is refused or another answer comes first (the discarded code is then not delivered: a documented
// loss, never a payment of its own).
func (m *model) untold(d *providerTask) bool {
	for _, t := range m.tasks {
		if !t.discarded && t.n == d.n && t.at.Before(d.arrived) {
			return false
		}
	}
	return true
}

// checkDiscardedTaken: a discarded submission's code that reached captchaflow before any other paid code of the
// first solve is that solve's result (it was paid for, and came first), and the task does not fail meanwhile.
func (m *model) checkDiscardedTaken() {
	var first *captchaflow.Result
	if len(m.delivered) > 0 {
		first = &m.delivered[0]
	} else if r := (captchaflow.Result{}); m.err == nil && m.result.Get(&r) == nil {
		r = m.named(r)
		first = &r
	}
	for _, d := range m.tasks {
		if !d.discarded || d.unsolvable || d.arrived.IsZero() || !m.seen(d).Before(m.ended) || m.canceled || m.deadWhenSeen(d) ||
			m.untold(d) {
			continue
		}
		at := m.ended // when the first result's code arrived (the end, when there is none)
		for _, t := range m.tasks {
			if first != nil && t.id == first.ProviderTaskID {
				at = t.arrived
			}
		}
		if d.arrived.Before(at) {
			m.fail("reset-takes-discarded", "%s: the discarded submission %s's code arrived at %v, before the first result's (%v; %s)",
				m.wid, d.id, d.arrived.Sub(m.epoch), at.Sub(m.epoch), fmt.Sprint(m.err))
		}
	}
}
