package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// setFrontUpstream points the callback proxy at another ingress (existing connections are cut).
func (s *stack) setFrontUpstream(upstream string) error {
	return s.front.Update(&toxiproxy.Proxy{Listen: s.frontAddr, Upstream: upstream, Enabled: true})
}

// addToxic adds a toxic (toxiproxy's JSON form) to a proxy and returns a function that removes it.
func addToxic(p *toxiproxy.Proxy, toxicJSON string) (remove func(), err error) {
	w, err := p.Toxics.AddToxicJson(strings.NewReader(toxicJSON))
	if err != nil {
		return nil, fmt.Errorf("toxic %s on %s: %w", toxicJSON, p.Name, err)
	}
	return func() { _ = p.Toxics.RemoveToxic(context.Background(), w.Name) }, nil
}

// resetChaos restores every fault the harness controls, so one scenario's leftovers cannot leak into the next.
func (s *stack) resetChaos(ctx context.Context) error {
	var errs []error
	s.front.Toxics.ResetToxics(ctx)
	s.tleg.Toxics.ResetToxics(ctx)
	// Same upstream and enabled: a no-op; otherwise it reroutes to the ingress and (re)opens the listener.
	errs = append(errs, s.setFrontUpstream(loopback(s.ingressPort)))
	errs = append(errs, s.down.Up())
	s.down.FailWith(0)
	if !s.worker.Running() {
		errs = append(errs, s.restartWorker(ctx))
	}
	if !s.ingress.Running() {
		errs = append(errs, s.restartIngress(ctx))
	}
	if !s.sim.Running() {
		errs = append(errs, restart(ctx, s.sim, s.simURL()+"/healthz"))
	}
	return errors.Join(errs...)
}
