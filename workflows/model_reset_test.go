package workflows

import (
	"cmp"
	"fmt"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"

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

// submitOut records when a Submit of the task was out, from its scheduling until the workflow had its end (an answer,
// a failure, or its cancellation): a discarded submission's callback naming its number waits in its inbox meanwhile.
func (o *unservedOutbound) submitOut(ctx workflow.Context, m *model, arg any, f workflow.Future) workflow.Future {
	req, ok := arg.(activities.SubmitRequest)
	if !ok {
		return f
	}
	o.s.mu.Lock()
	m.submitsOut[req.Submission] = [2]time.Time{workflow.Now(ctx)}
	o.s.mu.Unlock()
	out, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		err := f.Get(ctx, nil)
		o.s.mu.Lock()
		m.submitsOut[req.Submission] = [2]time.Time{m.submitsOut[req.Submission][0], workflow.Now(ctx)}
		m.submitEnds[req.Submission] = m.endOf(err, workflow.Now(ctx))
		o.s.mu.Unlock()
		set.Chain(f)
	})
	return out
}

// parkedUntil is when the workflow could act on discarded task d's callback, which came at at: the end of the reset
// run's Submit of its number, if that was out then (the end of the schedule if it never ended), else at.
func (m *model) parkedUntil(d *providerTask, at time.Time) time.Time {
	out, ok := m.submitsOut[d.n]
	switch {
	case !ok || at.Before(out[0]) || !out[1].IsZero() && !out[1].After(at):
		return at
	case out[1].IsZero():
		return m.env.Now().Add(24 * time.Hour)
	}
	return out[1]
}

// endOf names how a Submit ended at at, for the coverage of the endings a discarded callback waited through.
func (m *model) endOf(err error, at time.Time) string {
	switch typ := captchaflow.FailureType(err); {
	case err == nil:
		return "accepted"
	case temporal.IsCanceledError(err):
		return "cancelled"
	case notStarted(err):
		return "unserved"
	case submitOutcomeUnknown(err) && !at.Before(m.epoch.Add(m.in.SolveBudget())):
		return "lost-at-deadline"
	case submitOutcomeUnknown(err):
		return "lost"
	case typ == activities.FailureProviderZeroBalance, typ == activities.FailureProviderMoved,
		typ == activities.FailureProviderUnsupported, typ == activities.FailureResubmit:
		return typ
	}
	return "other:" + captchaflow.FailureType(err)
}

// coverParked counts the Submit endings that a discarded submission's callback waited through in the inbox.
func (m *model) coverParked(covered map[string]int) {
	for _, d := range m.tasks {
		if at := d.arrived.Add(m.backlog); d.discarded && !d.arrived.IsZero() && m.parkedUntil(d, at) != at {
			covered["reset-parked:"+cmp.Or(m.submitEnds[d.n], "still-out")]++
		}
	}
}

// expiredWhenSeen: a discarded submission's token (its method's life) died while its callback was parked, so the
// run's live submission answers instead.
func (m *model) expiredWhenSeen(d *providerTask) bool {
	exp := m.in.ExpiresAt(d.arrived)
	return !exp.IsZero() && !m.usable(d).Before(exp)
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
			m.expiredWhenSeen(d) {
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
