package tests

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_ScaleOut (issue #9): two workers and two ingresses serve the same task queue. The second worker gives
// the provider a callback base of its own, a second proxy in front of the second ingress (as two regions or two
// load-balancer pools would). Mid-batch the first worker and the second ingress are SIGKILLed; the surviving
// worker takes over the dead one's workflows and activities, callbacks to the dead ingress fail and those tasks
// recover by polling. Every result is delivered exactly once.
func TestE2E_ScaleOut(t *testing.T) {
	s := requireStack(t)
	ctx := context.Background()
	sc := newScenario(t, s, "scale-out")
	sc.allowCrashRepeats = true

	// Second ingress (straight to Temporal) behind a proxy of its own; second worker calling back through it.
	ports := make([]int, 3)
	for i := range ports {
		var err error
		ports[i], err = devstack.FreePort()
		require.NoError(t, err)
	}
	ingress2Port, ingress2Metrics, worker2Metrics := ports[0], ports[1], ports[2]
	frontB, err := s.addProxy("callbacks-b-"+sc.prefix, loopback(ingress2Port))
	require.NoError(t, err)
	ingress2, err := s.startProcess(ctx, "ingress-2", s.bins.Ingress,
		s.ingressEnv(ingress2Port, ingress2Metrics, s.temporalAddr, ingressSignalTimeout),
		"http://"+loopback(ingress2Port)+"/readyz")
	t.Cleanup(func() {
		if ingress2 != nil {
			_ = ingress2.Stop()
		}
		_ = s.tox.Collection.Remove(frontB.Name)
	})
	require.NoError(t, err)
	env2 := s.workerEnv()
	env2["CALLBACK_BASE_URL"] = "http://" + frontB.Listen
	env2["WORKER_METRICS_ADDR"] = loopback(worker2Metrics)
	worker2, err := s.startProcess(ctx, "worker-2", s.bins.Worker, env2, "http://"+loopback(worker2Metrics)+"/healthz")
	t.Cleanup(func() {
		if worker2 != nil {
			_ = worker2.Stop()
		}
		if !s.worker.Running() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.restartWorker(cctx); err != nil {
				t.Logf("restarting the first worker: %v", err)
			}
		}
	})
	require.NoError(t, err)

	// 30 tasks: two thirds on the callback path (solves spread over ~4 s, so callbacks keep coming after the
	// kills), a third whose pingback is dropped (poll path).
	for i := range 20 {
		sc.add(1, taskSpec{Kind: "callback path", SolveMS: 500 + 200*i})
	}
	sc.add(10, taskSpec{Kind: "poll path (pingback dropped)", Faults: "drop_pingback", Via: captchaflow.ViaPoll})
	require.NoError(t, s.simRules(ctx, sc.rules()))

	startErr := make(chan error, 1)
	go func() { startErr <- sc.startWorkflows(ctx) }()
	const killAt = 15
	eventually(t, fmt.Sprintf("%d submissions", killAt), time.Minute, 20*time.Millisecond, func() string {
		tasks, err := s.simTasks(ctx, callbackPathPrefix+sc.prefix)
		if err != nil {
			return err.Error()
		}
		if len(tasks) < killAt {
			return fmt.Sprintf("%d submissions so far", len(tasks))
		}
		return ""
	})
	s.worker.Kill()
	ingress2.Kill()
	killed := time.Now()
	sc.note("worker 1 and ingress 2 SIGKILLed at submission %d (%s into the batch); worker 2 and ingress 1 carry on",
		killAt, killed.Sub(sc.started).Round(time.Millisecond))
	require.NoError(t, <-startErr, "starting the workflows")

	sc.await(ctx, 2*time.Minute)
	var viaCallback, viaPoll int
	for _, tr := range sc.tasks {
		switch tr.Result.Via {
		case captchaflow.ViaCallback:
			viaCallback++
		case captchaflow.ViaPoll:
			viaPoll++
		}
	}
	provider := sc.simTasksByWorkflow(ctx)
	submissions := 0

	// Which worker submitted what: its callback base is in the pingback URL the provider got.
	byBase := map[string]int{}
	failedByBase := map[string]int{}
	for _, pts := range provider {
		for _, pt := range pts {
			submissions++
			u, err := url.Parse(pt.PingbackURL)
			require.NoError(t, err)
			byBase[u.Host]++
			for _, p := range pt.Pingbacks {
				if p.HTTPStatus != 200 && p.Outcome != sim.OutcomeDropped {
					failedByBase[u.Host]++
				}
			}
		}
	}
	w1, w2 := byBase[s.frontAddr], byBase[frontB.Listen]
	sc.note("submissions by worker 1 (callbacks via ingress 1): %d, by worker 2 (via ingress 2): %d; pingbacks failed: %d via ingress 1, %d via ingress 2",
		w1, w2, failedByBase[s.frontAddr], failedByBase[frontB.Listen])
	wall := sc.ended.Sub(sc.started).Seconds()
	sc.note("results: %d via callback, %d via poll; wall %.1f s", viaCallback, viaPoll, wall)
	f := sc.verify(ctx) // every task: its real code, delivered exactly once (a repeat only where a kill lost an attempt)
	assert.Equal(t, len(sc.tasks), f.Delivered)
	assert.Positive(t, w1, "worker 1 took part before the kill")
	assert.Positive(t, w2, "worker 2 took part")
	assert.Equal(t, submissions, w1+w2, "every submission came from one of the two workers")
	assert.Equal(t, f.Submissions, submissions)
	assert.Less(t, wall, 60.0, "scale-out batch wall time")
	replayLive(t, s, sc.ids()[0], sc.ids()[len(sc.ids())-1])
}
