package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/bench/twin"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// historySample is how many tasks per side and concurrency have their history counted.
const historySample = 50

// latencySamples are the raw latencies (ms) of one concurrency, for the plot.
type latencySamples struct {
	Label                      string
	OursStart, TwinStart       []float64
	OursCallback, TwinCallback []float64
}

// scenario is one comparison: N tasks of each side at concurrency C.
type scenario struct {
	Name        string // "instant", "paced", "encrypted" or "parked"
	N, C        int
	Warmup      int
	Rounds      int
	OursInput   captchaflow.Input
	TwinInput   twin.Input
	Description string
	// Queue is captchaflow's task queue: the stack's worker's, or the paced or encrypted worker's in those scenarios.
	Queue string
	// Pace is the rate (per second) the serving worker paces the account at; 0: not paced.
	Pace float64
}

func (sc scenario) label() string { return scenarioLabel(sc.Name, sc.C, sc.Pace) }

const (
	scenarioInstant = "instant"
	scenarioPaced   = "paced" // instant solves, served by a worker with a rate above the offered load
	scenarioParked  = "parked"
	// scenarioEncrypted: instant solves, every payload encrypted by the product's codec (issue 38)
	scenarioEncrypted = "encrypted"
)

// scenarioLabel names a scenario in the log, the tables and the plot: its concurrency, whether its callbacks come
// to a parked workflow or its payloads are encrypted, and the rate it was paced at (none: the default configuration).
func scenarioLabel(name string, c int, pace float64) string {
	l := fmt.Sprintf("C = %d", c)
	if name == scenarioParked || name == scenarioEncrypted {
		l += " " + name
	}
	if pace > 0 {
		l += " paced at " + rateText(pace) + "/s"
	}
	return l
}

// compare runs the scenario, alternating the sides in rounds so that drift in the machine's load hits both.
func (b *bench) compare(ctx context.Context, sc scenario) (ThroughputResult, error) {
	prefix := fmt.Sprintf("bench-%s-%s-c%d-", b.runID, sc.Name, sc.C)
	if w := sc.Warmup; w > 0 {
		log.Printf("%s: warming up with %d tasks per side", sc.label(), w)
		drive(ctx, ids(prefix+"warm-twin-", 0, w), sc.C, b.runTwin(sc.TwinInput, nil))
		drive(ctx, ids(prefix+"warm-ours-", 0, w), sc.C, b.oursFor(sc, nil))
	}
	s, err := b.alternate(ctx, sc, prefix)
	if err != nil {
		return ThroughputResult{}, err
	}
	tr := ThroughputResult{Scenario: sc.Name, Description: sc.Description, Concurrency: sc.C, Pace: sc.Pace}
	samples := latencySamples{Label: sc.label()}

	// The twin: signal times were recorded by its activity.
	tr.Twin, samples.TwinStart, samples.TwinCallback = summarizeSide(s.twin, s.twinSecs, func(r taskRun) (time.Time, bool) {
		return b.twinActs.SignalSentAt(r.ID)
	})
	defer b.twinActs.Forget()

	// Ours: pingback times and provider requests from the simulator.
	tasks, err := b.sim.tasksByWorkflow(ctx, prefix+"ours-")
	if err != nil {
		return tr, fmt.Errorf("reading the simulator's tasks: %w", err)
	}
	oursCallbackAt := func(id string) (time.Time, bool) {
		ts := tasks[id]
		if len(ts) == 0 {
			return time.Time{}, false
		}
		at, outcome, ok := firstPingback(ts[len(ts)-1])
		return at, ok && outcome == sim.OutcomeSucceeded
	}
	tr.Ours, samples.OursStart, samples.OursCallback = summarizeSide(s.ours, s.oursSecs, func(r taskRun) (time.Time, bool) {
		return oursCallbackAt(r.ID)
	})
	tr.Ours.CPUms, tr.Twin.CPUms = s.oursCPU.perTask(len(s.ours)), s.twinCPU.perTask(len(s.twin))
	tr.Ours.HistoryRequests, tr.Twin.HistoryRequests = s.oursReq.perTask(len(s.ours)), s.twinReq.perTask(len(s.twin))
	countRequests(&tr.Ours, s.ours, &s.oursRes, tasks)
	b.explainTails(ctx, &tr, s, oursCallbackAt)

	tr.ThroughputRatio = ratio(tr.Ours.TasksPerSec, tr.Twin.TasksPerSec)
	tr.CallbackP99Ratio = ratio(tr.Ours.CallbackToResult.P99, tr.Twin.CallbackToResult.P99)
	tr.StartP99Ratio = ratio(tr.Ours.StartToResult.P99, tr.Twin.StartToResult.P99)
	b.samples = append(b.samples, samples)
	log.Printf("%s: twin %.1f tasks/s, ours %.1f tasks/s (ratio %.2f); callback→result p99 ours %.0f ms, twin %.0f ms (ratio %.2f)",
		sc.label(), tr.Twin.TasksPerSec, tr.Ours.TasksPerSec, tr.ThroughputRatio, tr.Ours.CallbackToResult.P99,
		tr.Twin.CallbackToResult.P99, tr.CallbackP99Ratio)
	return tr, nil
}

// sides are both sides' measured runs of one scenario, with the time and CPU they took.
type sides struct {
	ours, twin         []taskRun
	oursSecs, twinSecs float64
	oursRes            sync.Map // captchaflow.Result by workflow ID
	oursCPU, twinCPU   *cpuMeter
	oursReq, twinReq   *requestMeter
}

// alternate runs the scenario's N tasks per side in sc.Rounds rounds, twin then ours in even ones, ours then twin
// in odd ones.
func (b *bench) alternate(ctx context.Context, sc scenario, prefix string) (*sides, error) {
	pids := b.pidsFor(sc)
	s := &sides{oursCPU: newCPUMeter(pids, b.pidTrees), twinCPU: newCPUMeter(pids, b.pidTrees),
		oursReq: newRequestMeter(b.st.TemporalMetricsURL()), twinReq: newRequestMeter(b.st.TemporalMetricsURL())}
	per := sc.N / sc.Rounds
	startOurs, startTwin := b.oursFor(sc, &s.oursRes), b.runTwin(sc.TwinInput, nil)
	for r := range sc.Rounds {
		from, to := r*per, (r+1)*per
		if r == sc.Rounds-1 {
			to = sc.N
		}
		var tr, or []taskRun
		twin := func() {
			s.twinReq.measure(ctx, func() { s.twinCPU.measure(func() { tr = drive(ctx, ids(prefix+"twin-", from, to), sc.C, startTwin) }) })
		}
		ours := func() {
			s.oursReq.measure(ctx, func() { s.oursCPU.measure(func() { or = drive(ctx, ids(prefix+"ours-", from, to), sc.C, startOurs) }) })
		}
		if r%2 == 0 { // which side goes first alternates: the first meets the database and queues the other left
			twin()
			ours()
		} else {
			ours()
			twin()
		}
		s.twinSecs += span(tr).Seconds()
		s.twin = append(s.twin, tr...)
		s.oursSecs += span(or).Seconds()
		s.ours = append(s.ours, or...)
		log.Printf("%s round %d/%d: twin %.1f tasks/s, ours %.1f tasks/s", sc.label(), r+1, sc.Rounds,
			float64(len(tr))/span(tr).Seconds(), float64(len(or))/span(or).Seconds())
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// countRequests sets our side's provider requests per task from the simulator's tasks, and the results that
// disagree with them or came by callback.
func countRequests(side *SideResult, runs []taskRun, results *sync.Map, tasks map[string][]sim.Task) {
	var inPHP, resPHP int64
	for _, r := range runs {
		ts := tasks[r.ID]
		inPHP += int64(len(ts))
		for _, t := range ts {
			resPHP += t.ResGetCount
		}
		v, ok := results.Load(r.ID)
		if !ok {
			continue
		}
		res := v.(captchaflow.Result)
		if res.Submits != len(ts) {
			side.InPHPMismatch++
		}
		if res.Via == captchaflow.ViaCallback {
			side.ViaCallback++
		}
	}
	side.InPHPPerTask = round3(float64(inPHP) / float64(len(runs)))
	side.ResPHPPerTask = round3(float64(resPHP) / float64(len(runs)))
}

// explainTails reads back the histories behind both sides' tails and a sample of their event counts.
func (b *bench) explainTails(ctx context.Context, tr *ThroughputResult, s *sides, oursCallbackAt func(string) (time.Time, bool)) {
	tr.Ours.Slowest = b.slowest(ctx, s.ours, oursCallbackAt, false)
	tr.Twin.Slowest = b.slowest(ctx, s.twin, b.twinActs.SignalSentAt, false)
	tr.Ours.SlowestStart = b.slowest(ctx, s.ours, oursCallbackAt, true)
	tr.Twin.SlowestStart = b.slowest(ctx, s.twin, b.twinActs.SignalSentAt, true)
	tr.Ours.HistoryEvents = b.historyStats(ctx, sampleIDs(s.ours, historySample))
	tr.Twin.HistoryEvents = b.historyStats(ctx, sampleIDs(s.twin, historySample))
}

// summarizeSide computes one side's throughput and latencies; callbackAt gives a task's callback (or signal)
// time.
func summarizeSide(runs []taskRun, secs float64, callbackAt func(taskRun) (time.Time, bool)) (SideResult, []float64, []float64) {
	var s SideResult
	s.Tasks = len(runs)
	var firstErr error
	s.Failed, firstErr = failures(runs)
	if firstErr != nil {
		s.FirstError = firstErr.Error()
	}
	s.Seconds = round2(secs)
	if secs > 0 {
		s.TasksPerSec = round2(float64(len(runs)-s.Failed) / secs)
	}
	var start, cb []float64
	for _, r := range runs {
		if r.Err != nil {
			continue
		}
		start = append(start, ms(r.End.Sub(r.Start)))
		at, ok := callbackAt(r)
		if !ok {
			s.Missing++
			continue
		}
		cb = append(cb, ms(r.End.Sub(at)))
	}
	s.StartToResult = summarize(start)
	s.CallbackToResult = summarize(cb)
	return s, start, cb
}
