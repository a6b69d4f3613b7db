package admission

import (
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
)

// probe is the task side of the slot protocol, as SolveCaptcha runs it.
type probe struct {
	in     ProbeInput
	self   activities.SlotRequest // this run; Seq set per admission
	grants workflow.ReceiveChannel
	res    ProbeResult
}

func (p *probe) ask(ctx workflow.Context, req activities.SlotRequest) (activities.SlotTicket, error) {
	var t activities.SlotTicket
	var f workflow.Future
	switch p.in.Design {
	case Batched, "":
		f = workflow.ExecuteActivity(ctx, activities.AcquireSlotName, req)
	case BatchedLocal:
		f = workflow.ExecuteLocalActivity(ctx, activities.AcquireSlotName, req)
	default:
		f = workflow.ExecuteActivity(ctx, string(p.in.Design), req)
	}
	err := f.Get(ctx, &t)
	return t, err
}

// admit takes slot seq, holds it in.Hold and releases it.
func (p *probe) admit(ctx workflow.Context, seq int) error {
	req := p.self
	req.Seq, req.RequestedAt = seq, workflow.Now(ctx)
	h := Hold{Asked: req.RequestedAt}
	t, err := p.ask(ctx, req)
	if err != nil {
		return err
	}
	h.GrantedInAnswer = t.Granted
	if !t.Granted {
		if t, err = p.await(ctx, req, t); err != nil {
			return err
		}
	}
	h.Granted, h.Epoch = workflow.Now(ctx), t.Epoch
	if t, err = p.hold(ctx, req, t); err != nil {
		return err
	}
	h.Released = workflow.Now(ctx) // the slot's use ends here; the release signal is processed after
	p.release(ctx, t.Semaphore, seq)
	p.res.Holds = append(p.res.Holds, h)
	return nil
}

// await waits for the grant of req, asking again every SlotReaskInterval with the last ticket.
func (p *probe) await(ctx workflow.Context, req activities.SlotRequest, t activities.SlotTicket) (activities.SlotTicket, error) {
	for {
		timerCtx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, activities.SlotReaskInterval)
		granted, due := false, false
		for !granted && !due {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(p.grants, func(c workflow.ReceiveChannel, _ bool) {
				var g activities.SlotGrant
				c.Receive(ctx, &g)
				granted = p.answers(ctx, g, req, t)
			})
			sel.AddFuture(timer, func(workflow.Future) { due = true })
			sel.Select(ctx)
		}
		cancel()
		if granted {
			return t, nil
		}
		p.res.Reasks++
		again := req
		again.Ticket = &t
		next, err := p.ask(ctx, again)
		if err != nil {
			return t, err
		}
		if next.Epoch != t.Epoch && t.Epoch != "" {
			p.res.Reregistered++
		}
		if t = next; t.Granted {
			return t, nil
		}
	}
}

// answers tells whether g grants req; a grant of anything else is given back.
func (p *probe) answers(ctx workflow.Context, g activities.SlotGrant, req activities.SlotRequest, t activities.SlotTicket) bool {
	ours := g.RunID == "" || g.RunID == p.self.RunID
	if ours && g.Seq == req.Seq && (g.Semaphore == "" || g.Semaphore == t.Semaphore) {
		return true
	}
	p.res.Stray++
	if ours {
		p.release(ctx, g.Semaphore, g.Seq)
	}
	return false
}

// hold keeps the slot in.Hold, re-asserting it every SlotReaskInterval.
func (p *probe) hold(ctx workflow.Context, req activities.SlotRequest, t activities.SlotTicket) (activities.SlotTicket, error) {
	for left := p.in.Hold; left > 0; {
		d := min(left, activities.SlotReaskInterval)
		if err := workflow.Sleep(ctx, d); err != nil {
			return t, err
		}
		if left -= d; left <= 0 {
			break
		}
		held := req
		held.Held, held.Ticket = true, &t
		next, err := p.ask(ctx, held)
		if err != nil {
			return t, err
		}
		if next.Epoch != t.Epoch {
			p.res.Reregistered++
		}
		t = next
	}
	return t, nil
}

func (p *probe) release(ctx workflow.Context, semaphore string, seq int) {
	if semaphore == "" {
		queue := p.in.SlotQueue
		if queue == "" {
			queue = workflow.GetInfo(ctx).TaskQueueName
		}
		semaphore = activities.ThreadsWorkflowID(queue)
	}
	rel := activities.SlotRelease{WorkflowID: p.self.WorkflowID, RunID: p.self.RunID, Seq: seq}
	if err := workflow.SignalExternalWorkflow(ctx, semaphore, "", activities.ReleaseSlotSignal, rel).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("release not delivered", "Error", err)
	}
}

// PeakHeld is the most slots the probes held at once, from their holds (granted → released).
func PeakHeld(results []ProbeResult) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range results {
		for _, h := range r.Holds {
			edges = append(edges, edge{h.Granted, 1}, edge{h.Released, -1})
		}
	}
	// Releases before grants at the same instant: a slot given back and taken in one moment is one slot.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
