package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestFailoverTasksAreServableByTheCreateTaskProvider(t *testing.T) {
	tasks := planFailover(7, 50, "20260101-000000", "http://127.0.0.1:9/hooks/captcha")
	require.Len(t, tasks, 7)
	assert.Equal(t, "demo-20260101-000000-051", tasks[0].ID)
	b := demoProviders[1]
	for i, task := range tasks {
		in := task.Input.WithDefaults()
		require.NoError(t, in.Validate(), task.ID)
		assert.NoError(t, providers.Supports(providers.Flavor(b.Flavor), in.Method, in.Params), "%s must be able to fail over to b", task.ID)
		want := failoverAfter
		if i < failoverSplit(7) {
			want = failoverBefore
		}
		assert.Equal(t, want, task.Scenario, task.ID)
	}
	// The troubled tasks are a's alone: b refuses their sim_* parameters, so they never fail over.
	troubled := planBatch(1, "x", "http://127.0.0.1:9/hooks/captcha")[0]
	assert.Error(t, providers.Supports(providers.Flavor(b.Flavor), troubled.Input.Method, troubled.Input.Params))
	assert.Equal(t, 1, failoverSplit(2))
}

func TestRoutingAuditCountsProvidersFailoversAndDoublePayments(t *testing.T) {
	a, b := demoProviders[0].Name, demoProviders[1].Name
	tasks := []demoTask{{ID: "t1", Scenario: scenarioCycle[0]}, {ID: "f1", Scenario: failoverBefore},
		{ID: "f2", Scenario: failoverAfter}, {ID: "f3", Scenario: failoverAfter}, {ID: "f4", Scenario: failoverAfter}}
	tr := newTracker(tasks)
	tr.outcomes["t1"] = &outcome{Result: captchaflow.Result{Provider: a, Submits: 1}}
	tr.outcomes["f1"] = &outcome{Result: captchaflow.Result{Provider: a, Submits: 1}}
	tr.outcomes["f2"] = &outcome{Result: captchaflow.Result{Provider: b, Submits: 1}}
	tr.outcomes["f3"] = &outcome{Result: captchaflow.Result{Provider: b, Submits: 2}}
	tr.outcomes["f4"] = &outcome{Result: captchaflow.Result{Provider: a, Submits: 1}}
	per := map[string][]sim.Task{
		a: {{ID: "1", PingbackPath: "/callback/t1"}, {ID: "2", PingbackPath: "/callback/f1"}, {ID: "3", PingbackPath: "/callback/f3"}},
		b: {{ID: "u1", PingbackPath: "/callback/f2"}, {ID: "u2", PingbackPath: "/callback/f3"}},
	}
	r := auditRouting(per, tr)
	assert.Equal(t, map[string]int{a: 3, b: 2}, r.ByProvider)
	assert.Equal(t, 3, r.After)
	assert.Equal(t, 2, r.AtOthers)
	assert.Equal(t, 1, r.FirstSubmit)
	assert.Equal(t, []string{"f3"}, r.PaidTwice)

	var out strings.Builder
	writeRouting(&out, r)
	assert.Contains(t, out.String(), "solved by provider   a (in.php) 3, b (createTask, capsolver) 2\n")
	assert.Contains(t, out.String(), "failovers            2 of the 3 tasks started after a ran dry went to another provider (1 on their first submission)")
	assert.Contains(t, out.String(), "PAID TWICE           1 tasks created at two providers: f3")
	sum := summary{Audit: &audit{Routing: r}}
	assert.False(t, sum.ok(), "a task paid at two providers fails the demo")
}
