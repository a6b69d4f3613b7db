package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// The nexus phase (issue 39): -n solves through a Nexus endpoint of the run's own (targeting the stack's worker's
// queue), each from a caller workflow (SolveViaNexus) in namespace shop on a worker in the bench process, against
// -n direct starts (captchaflow.Solve), in -rounds alternating segments, the first -c in flight. The figure: start →
// result, from the caller's start request to its result in hand, against the direct start's.
const maxNexusP99Ratio = 1.1

// NexusResult is the nexus phase.
type NexusResult struct {
	Tasks       int       `json:"tasks"` // per side
	Concurrency int       `json:"concurrency"`
	Rounds      int       `json:"rounds"`
	Endpoint    string    `json:"endpoint"`
	SolveMS     int       `json:"solve_ms"` // each task's solve time (-nexus-solve), both sides
	Direct      NexusSide `json:"direct"`
	Nexus       NexusSide `json:"nexus"`
	// P50Ratio and P99Ratio are the endpoint's start → result percentiles over the direct start's.
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
	// PaidTwice counts tasks (either side) the provider created more than one task for.
	PaidTwice int `json:"paid_twice"`
}

// NexusSide is one side of the nexus phase.
type NexusSide struct {
	Failed        int     `json:"failed"`
	FirstError    string  `json:"first_error,omitempty"`
	StartToResult Dist    `json:"start_to_result"`
	TasksPerSec   float64 `json:"tasks_per_sec"`
	seconds       float64
	samples       []float64
}

// nexusCaller is the caller team's side: a client of shop, its worker, and the endpoint it calls.
type nexusCaller struct {
	shop     client.Client
	queue    string
	endpoint string
}

func (b *bench) nexus(ctx context.Context) (*NexusResult, error) {
	caller, cleanup, err := b.setUpNexusCaller(ctx)
	if err != nil {
		return nil, fmt.Errorf("nexus: %w", err)
	}
	defer cleanup()
	c := b.cfg.concurrencies[0]
	res := &NexusResult{Tasks: b.cfg.n, Concurrency: c, Rounds: b.cfg.rounds, Endpoint: caller.endpoint, SolveMS: int(b.cfg.nexusSolve.Milliseconds())}
	log.Printf("nexus: %d solves through endpoint %s against %d direct starts, C = %d, %d rounds", b.cfg.n, caller.endpoint, b.cfg.n, c, b.cfg.rounds)
	if err := b.nexusWarmUp(ctx, caller); err != nil {
		return nil, fmt.Errorf("nexus: warming up: %w", err)
	}
	in := solveInput(nil)
	if b.cfg.nexusSolve > 0 {
		in = solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(int(b.cfg.nexusSolve.Milliseconds()))})
	}
	direct, via := b.runOurs(in, nil), caller.run(in)
	for round := range b.cfg.rounds {
		from, to := round*b.cfg.n/b.cfg.rounds, (round+1)*b.cfg.n/b.cfg.rounds
		sides := []func(){ // alternated, so that drift hits both
			func() { res.Direct.add(drive(ctx, ids(b.nexusPrefix("direct"), from, to), c, direct)) },
			func() { res.Nexus.add(drive(ctx, ids(b.nexusPrefix("via"), from, to), c, via)) },
		}
		sides[round%2]()
		sides[1-round%2]()
	}
	res.Direct.finish()
	res.Nexus.finish()
	res.P50Ratio = ratio(res.Nexus.StartToResult.P50, res.Direct.StartToResult.P50)
	res.P99Ratio = ratio(res.Nexus.StartToResult.P99, res.Direct.StartToResult.P99)
	res.PaidTwice = b.paidTwice(ctx, b.nexusPrefix(""))
	log.Printf("nexus: start → result p99 %.0f ms through the endpoint, %.0f ms direct (%.2f ×); p50 %.0f / %.0f ms; paid twice %d",
		res.Nexus.StartToResult.P99, res.Direct.StartToResult.P99, res.P99Ratio, res.Nexus.StartToResult.P50, res.Direct.StartToResult.P50, res.PaidTwice)
	return res, nil
}

func (b *bench) nexusPrefix(side string) string {
	return fmt.Sprintf("bench-%s-nexus-%s", b.runID, side)
}

// add records a segment's runs.
func (s *NexusSide) add(runs []taskRun) {
	n, first := failures(runs)
	s.Failed += n
	if first != nil && s.FirstError == "" {
		s.FirstError = first.Error()
	}
	s.seconds += span(runs).Seconds()
	for _, r := range runs {
		if r.Err == nil {
			s.samples = append(s.samples, ms(r.End.Sub(r.Start)))
		}
	}
}

func (s *NexusSide) finish() {
	s.StartToResult = summarize(s.samples)
	if s.seconds > 0 {
		s.TasksPerSec = round2(float64(len(s.samples)) / s.seconds)
	}
}

// paidTwice counts the workflows under prefix the provider created more than one task for.
func (b *bench) paidTwice(ctx context.Context, prefix string) int {
	tasks, err := b.sim.tasksByWorkflow(ctx, prefix)
	if err != nil {
		log.Printf("nexus: the provider's tasks: %v", err)
		return -1
	}
	n := 0
	for _, ts := range tasks {
		if len(ts) > 1 {
			n++
		}
	}
	return n
}

// run starts a caller workflow for id, which solves the task id through the endpoint, and waits for its result.
func (nc nexusCaller) run(in captchaflow.Input) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		run, err := nc.shop.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: nc.queue}, captchaflow.NexusCallerWorkflowType,
			captchaflow.NexusCall{Endpoint: nc.endpoint, SolveRequest: captchaflow.SolveRequest{TaskID: id, Input: in}})
		if err != nil {
			return err
		}
		return run.Get(ctx, nil)
	}
}

// nexusWarmUp runs -warmup unmeasured tasks per side (at least one: a namespace just registered may take a few
// seconds to be served), trying the first again for up to a minute.
func (b *bench) nexusWarmUp(ctx context.Context, caller nexusCaller) error {
	n := max(b.cfg.warmup, 1)
	for until := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		failed, err := failures(drive(ctx, ids(b.nexusPrefix("warmup-via"), 0, n), b.cfg.concurrencies[0], caller.run(solveInput(nil))))
		if failed == 0 {
			break
		}
		if time.Now().After(until) {
			return err
		}
	}
	_, err := failures(drive(ctx, ids(b.nexusPrefix("warmup-direct"), 0, n), b.cfg.concurrencies[0], b.runOurs(solveInput(nil), nil)))
	return err
}

// setUpNexusCaller registers shop (if missing), creates the run's endpoint and starts the caller's worker; cleanup
// undoes the endpoint and the worker.
func (b *bench) setUpNexusCaller(ctx context.Context) (nexusCaller, func(), error) {
	nc := nexusCaller{queue: "bench-shop-" + b.runID, endpoint: "bench-" + b.runID}
	_, err := b.c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: devstack.CallerNamespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	if err != nil && !errors.As(err, new(*serviceerror.NamespaceAlreadyExists)) {
		return nc, nil, fmt.Errorf("register namespace %s: %w", devstack.CallerNamespace, err)
	}
	target := &nexuspb.EndpointTarget_Worker{Namespace: b.st.Namespace(), TaskQueue: b.taskQueue}
	ep, err := b.c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: nc.endpoint, Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: target}}}})
	if err != nil {
		return nc, nil, fmt.Errorf("create Nexus endpoint %s: %w", nc.endpoint, err)
	}
	td := teardown{func() {
		_, _ = b.c.OperatorService().DeleteNexusEndpoint(context.Background(), &operatorservice.DeleteNexusEndpointRequest{
			Id: ep.GetEndpoint().GetId(), Version: ep.GetEndpoint().GetVersion()})
	}}
	if nc.shop, err = client.DialContext(ctx, client.Options{HostPort: b.st.TemporalAddress(), Namespace: devstack.CallerNamespace,
		Logger: devstack.QuietSDKLogger()}); err != nil {
		td.run()
		return nc, nil, err
	}
	td.add(nc.shop.Close)
	w := worker.New(nc.shop, nc.queue, worker.Options{})
	w.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
	if err := w.Start(); err != nil {
		td.run()
		return nc, nil, err
	}
	td.add(w.Stop)
	return nc, td.run, nil
}

// nexusRows are the nexus phase's rows in the measures table.
func (m *markdown) nexusRows(r *Results) {
	x := r.Nexus
	if x == nil {
		return
	}
	c := fmt.Sprintf("nexus (C = %d, %d per side, %d rounds, solved after %d ms)", x.Concurrency, x.Tasks, x.Rounds, x.SolveMS)
	m.p("| %s: start → result p50 / p95 / p99, ms, through the endpoint from a caller workflow (captchaflow column) and started directly (twin column) | %s | %s | **%.2f** (p99), %.2f (p50) |\n",
		c, dist3(x.Nexus.StartToResult), dist3(x.Direct.StartToResult), x.P99Ratio, x.P50Ratio)
	m.p("| %s: tasks/s, through the endpoint / direct | %s | %s | |\n", c, num(x.Nexus.TasksPerSec), num(x.Direct.TasksPerSec))
	m.p("| %s: failed through the endpoint / direct; paid twice | %d / %d; %d | | |\n", c, x.Nexus.Failed, x.Direct.Failed, x.PaidTwice)
}

// nexusTargets: issue 39's, at most 10 % more p99 through the endpoint, with nothing failed or paid twice.
func nexusTargets(r *Results) []Target {
	x := r.Nexus
	if x == nil {
		return nil
	}
	return []Target{{
		Name: fmt.Sprintf("solve through the Nexus endpoint, start → result p99, C = %d", x.Concurrency),
		Want: fmt.Sprintf("≤ %.2f × a direct start's p99, none failed or paid twice", maxNexusP99Ratio),
		Got: fmt.Sprintf("%.2f × (%s vs %s ms); failed %d / %d, paid twice %d", x.P99Ratio, num(x.Nexus.StartToResult.P99),
			num(x.Direct.StartToResult.P99), x.Nexus.Failed, x.Direct.Failed, x.PaidTwice),
		Met:      x.P99Ratio <= maxNexusP99Ratio && x.Nexus.Failed+x.Direct.Failed == 0 && x.PaidTwice == 0,
		Measured: true,
	}}
}
