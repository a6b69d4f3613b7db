package main

import (
	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

// circuitCollector reads each circuit at scrape, so one half-opened by time alone shows it (and its alert clears).
type circuitCollector struct {
	set  *providers.Set
	desc *prom.Desc
}

func newCircuitCollector(set *providers.Set, namespace, taskQueue string) *circuitCollector {
	return &circuitCollector{set: set, desc: prom.NewDesc(activities.MetricCircuitState,
		"a provider's circuit: 0 closed, 1 half-open, 2 open", []string{"provider"},
		prom.Labels{"namespace": namespace, "task_queue": taskQueue})}
}

func (c *circuitCollector) Describe(ch chan<- *prom.Desc) { ch <- c.desc }

func (c *circuitCollector) Collect(ch chan<- prom.Metric) {
	for _, p := range c.set.All() {
		ch <- prom.MustNewConstMetric(c.desc, prom.GaugeValue, float64(c.set.Breaker.State(p.Name)), p.Name)
	}
}

// exportCircuits registers the circuit gauge of a routed worker (PROVIDERS_FILE); a one-provider worker has none.
func (m *metrics) exportCircuits(set *providers.Set, namespace, taskQueue string) error {
	if set == nil || !set.Routed {
		return nil
	}
	return m.registry.Register(newCircuitCollector(set, namespace, taskQueue))
}
