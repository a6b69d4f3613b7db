package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/providers"
)

func unsolvableObs(p string) providers.Obs {
	return providers.Obs{Provider: p, Method: "hcaptcha", Outcome: providers.ObservedUnsolvable}
}

// The exchange numbers what each worker sends and answers each the others' since its cursor; past its history bound
// it continues as new with the latest entries, still numbered on.
func TestRoutingExchangeSharesTheOthersObservationsAndContinuesAsNew(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(RoutingExchange, workflow.RegisterOptions{Name: RoutingWorkflowType})
	old := routingMaxEvents
	t.Cleanup(func() { routingMaxEvents = old })
	since := func(after int64, self string) RoutingState {
		v, err := env.QueryWorkflow(routingQuery, after, self)
		require.NoError(t, err)
		var st RoutingState
		require.NoError(t, v.Get(&st))
		return st
	}
	send := func(at time.Duration, w string, obs ...providers.Obs) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(routingSignal, RoutingBatch{Worker: w, Obs: obs}) }, at)
	}
	send(time.Second, "w1", unsolvableObs("a"), unsolvableObs("a"))
	send(2*time.Second, "w2", unsolvableObs("b"))
	env.RegisterDelayedCallback(func() {
		st := since(0, "w1")
		assert.Equal(t, RoutingState{Last: 3, Entries: []RoutingEntry{{Seq: 3, Worker: "w2", Obs: unsolvableObs("b")}}}, st, "not its own")
		assert.Len(t, since(0, "w2").Entries, 2)
		assert.Empty(t, since(3, "w2").Entries, "nothing after its cursor")
		assert.Len(t, since(99, "w2").Entries, 2, "a cursor past the last: the exchange was reset, all is news")
	}, 3*time.Second)
	var many []providers.Obs
	for i := range routingKept + 5 {
		many = append(many, unsolvableObs(fmt.Sprint(i)))
	}
	send(4*time.Second, "w3", many...)
	env.RegisterDelayedCallback(func() { routingMaxEvents = 0 }, 5*time.Second)
	send(6*time.Second, "w1", unsolvableObs("c"))
	env.ExecuteWorkflow(RoutingWorkflowType, RoutingState{})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next RoutingState
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, int64(3+routingKept+5+1), next.Last)
	assert.Len(t, next.Entries, routingKept, "bounded")
	assert.Equal(t, RoutingEntry{Seq: next.Last, Worker: "w1", Obs: unsolvableObs("c")}, next.Entries[routingKept-1])
	payload, err := converter.GetDefaultDataConverter().ToPayload(next)
	require.NoError(t, err)
	assert.Less(t, len(payload.Data), 2<<20/4, "far under the 2 MB payload limit")
}
