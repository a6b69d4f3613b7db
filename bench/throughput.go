package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/bench/twin"
	"github.com/captchaflow/captchaflow/simulator/sim"
)

const (
	// taskTimeout bounds one task in the throughput runs; the callback timer (120 s) fails a lost one first.
	taskTimeout = 3 * time.Minute
	// historySample is how many tasks per side and concurrency have their history counted.
	historySample = 50
)

// latencySamples are the raw latencies (ms) of one concurrency, for the plot.
type latencySamples struct {
	Label                      string
	OursStart, TwinStart       []float64
	OursCallback, TwinCallback []float64
}

// solveInput is a task the simulator solves at once (its SIM_SOLVE_* are 0) with the default timeouts.
func solveInput(extra map[string]string) captchaflow.Input {
	params := captchaflow.Params{"sitekey": "0x4AAAAAAABench", "pageurl": "https://bench.example/login"}
	for k, v := range extra {
		params[k] = v
	}
	return captchaflow.Input{Method: "turnstile", Params: params}
}

// runOurs starts SolveCaptcha for id and waits for its result.
func (b *bench) runOurs(in captchaflow.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		res, err := captchaflow.Solve(ctx, b.c, id, in, captchaflow.StartOptions{TaskQueue: b.taskQueue})
		if err == nil && results != nil {
			results.Store(id, res)
		}
		return err
	}
}

// runTwin starts the twin for id and waits for its result.
func (b *bench) runTwin(in twin.Input, results *sync.Map) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, taskTimeout)
		defer cancel()
		run, err := b.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: b.twinQueue},
			twin.WorkflowType, in)
		if err != nil {
			return err
		}
		var res twin.Result
		if err := run.Get(ctx, &res); err != nil {
			return err
		}
		if results != nil {
			results.Store(id, res)
		}
		return nil
	}
}

// scenario is one comparison: N tasks of each side at concurrency C.
type scenario struct {
	Name        string // "instant" or "parked"
	N, C        int
	Warmup      int
	Rounds      int
	OursInput   captchaflow.Input
	TwinInput   twin.Input
	Description string
}

func (sc scenario) label() string {
	if sc.Name == scenarioInstant {
		return fmt.Sprintf("C = %d", sc.C)
	}
	return fmt.Sprintf("C = %d %s", sc.C, sc.Name)
}

const (
	scenarioInstant = "instant"
	scenarioParked  = "parked"
)

// compare runs the scenario, alternating the sides in rounds so that drift in the machine's load hits both.
func (b *bench) compare(ctx context.Context, sc scenario) (ThroughputResult, error) {
	prefix := fmt.Sprintf("bench-%s-%s-c%d-", b.runID, sc.Name, sc.C)
	if w := sc.Warmup; w > 0 {
		log.Printf("%s: warming up with %d tasks per side", sc.label(), w)
		drive(ctx, ids(prefix+"warm-twin-", 0, w), sc.C, b.runTwin(sc.TwinInput, nil))
		drive(ctx, ids(prefix+"warm-ours-", 0, w), sc.C, b.runOurs(sc.OursInput, nil))
	}
	var oursRuns, twinRuns []taskRun
	var oursSecs, twinSecs float64
	var oursRes sync.Map
	oursCPU, twinCPU := newCPUMeter(b.pids, b.pidTrees), newCPUMeter(b.pids, b.pidTrees)
	per := sc.N / sc.Rounds
	for r := range sc.Rounds {
		from, to := r*per, (r+1)*per
		if r == sc.Rounds-1 {
			to = sc.N
		}
		var tr, or []taskRun
		twinCPU.measure(func() { tr = drive(ctx, ids(prefix+"twin-", from, to), sc.C, b.runTwin(sc.TwinInput, nil)) })
		twinSecs += span(tr).Seconds()
		twinRuns = append(twinRuns, tr...)
		oursCPU.measure(func() { or = drive(ctx, ids(prefix+"ours-", from, to), sc.C, b.runOurs(sc.OursInput, &oursRes)) })
		oursSecs += span(or).Seconds()
		oursRuns = append(oursRuns, or...)
		log.Printf("%s round %d/%d: twin %.1f tasks/s, ours %.1f tasks/s", sc.label(), r+1, sc.Rounds,
			float64(len(tr))/span(tr).Seconds(), float64(len(or))/span(or).Seconds())
		if err := ctx.Err(); err != nil {
			return ThroughputResult{}, err
		}
	}

	tr := ThroughputResult{Scenario: sc.Name, Description: sc.Description, Concurrency: sc.C}
	samples := latencySamples{Label: sc.label()}

	// The twin: signal times were recorded by its activity.
	tr.Twin, samples.TwinStart, samples.TwinCallback = summarizeSide(twinRuns, twinSecs, func(r taskRun) (time.Time, bool) {
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
	tr.Ours, samples.OursStart, samples.OursCallback = summarizeSide(oursRuns, oursSecs, func(r taskRun) (time.Time, bool) {
		return oursCallbackAt(r.ID)
	})
	tr.Ours.CPUms, tr.Twin.CPUms = oursCPU.perTask(len(oursRuns)), twinCPU.perTask(len(twinRuns))
	var inPHP, resPHP int64
	for _, r := range oursRuns {
		ts := tasks[r.ID]
		inPHP += int64(len(ts))
		for _, t := range ts {
			resPHP += t.ResGetCount
		}
		v, ok := oursRes.Load(r.ID)
		if !ok {
			continue
		}
		res := v.(captchaflow.Result)
		if res.Submits != len(ts) {
			tr.Ours.InPHPMismatch++
		}
		if res.Via == captchaflow.ViaCallback {
			tr.Ours.ViaCallback++
		}
	}
	tr.Ours.InPHPPerTask = round3(float64(inPHP) / float64(len(oursRuns)))
	tr.Ours.ResPHPPerTask = round3(float64(resPHP) / float64(len(oursRuns)))

	tr.Ours.Slowest = b.slowest(ctx, oursRuns, oursCallbackAt, false)
	tr.Twin.Slowest = b.slowest(ctx, twinRuns, b.twinActs.SignalSentAt, false)
	tr.Ours.SlowestStart = b.slowest(ctx, oursRuns, oursCallbackAt, true)
	tr.Twin.SlowestStart = b.slowest(ctx, twinRuns, b.twinActs.SignalSentAt, true)
	tr.Ours.HistoryEvents = b.historyStats(ctx, sampleIDs(oursRuns, historySample))
	tr.Twin.HistoryEvents = b.historyStats(ctx, sampleIDs(twinRuns, historySample))

	tr.ThroughputRatio = ratio(tr.Ours.TasksPerSec, tr.Twin.TasksPerSec)
	tr.CallbackP99Ratio = ratio(tr.Ours.CallbackToResult.P99, tr.Twin.CallbackToResult.P99)
	tr.StartP99Ratio = ratio(tr.Ours.StartToResult.P99, tr.Twin.StartToResult.P99)
	b.samples = append(b.samples, samples)
	log.Printf("%s: twin %.1f tasks/s, ours %.1f tasks/s (ratio %.2f); callback→result p99 ours %.0f ms, twin %.0f ms (ratio %.2f)",
		sc.label(), tr.Twin.TasksPerSec, tr.Ours.TasksPerSec, tr.ThroughputRatio, tr.Ours.CallbackToResult.P99,
		tr.Twin.CallbackToResult.P99, tr.CallbackP99Ratio)
	return tr, nil
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

// slowestShown is how many of the slowest callback → result tasks per side get their timeline in the results.
const slowestShown = 3

// slowest lists the tasks with the longest callback → result (or start → result), each with its history as
// offsets from the callback, so a tail can be explained (which step waited).
func (b *bench) slowest(ctx context.Context, runs []taskRun, callbackAt func(string) (time.Time, bool), byStart bool) []SlowTask {
	type cand struct {
		r  taskRun
		at time.Time
	}
	var cs []cand
	for _, r := range runs {
		if r.Err != nil {
			continue
		}
		at, ok := callbackAt(r.ID)
		if !ok && !byStart {
			continue
		}
		cs = append(cs, cand{r, at})
	}
	slices.SortFunc(cs, func(x, y cand) int {
		if byStart {
			return cmp.Compare(y.r.End.Sub(y.r.Start), x.r.End.Sub(x.r.Start))
		}
		return cmp.Compare(y.r.End.Sub(y.at), x.r.End.Sub(x.at))
	})
	var out []SlowTask
	for _, c := range cs[:min(slowestShown, len(cs))] {
		origin := c.at
		if origin.IsZero() { // no callback: offsets from the start request
			origin = c.r.Start
		}
		st := SlowTask{WorkflowID: c.r.ID, StartToResult: round2(ms(c.r.End.Sub(c.r.Start)))}
		if !c.at.IsZero() {
			st.CallbackToResult = round2(ms(c.r.End.Sub(c.at)))
		}
		events, err := b.history(ctx, c.r.ID)
		if err != nil {
			continue
		}
		c.at = origin
		st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms start request sent", ms(c.r.Start.Sub(c.at))))
		for _, e := range events {
			st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms %s", ms(e.At.Sub(c.at)), strings.TrimPrefix(e.Type.String(), "EVENT_TYPE_")))
		}
		st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms result in the caller's hands", ms(c.r.End.Sub(c.at))))
		out = append(out, st)
	}
	return out
}

func sampleIDs(runs []taskRun, n int) []string {
	var out []string
	step := max(len(runs)/n, 1)
	for i := 0; i < len(runs) && len(out) < n; i += step {
		if runs[i].Err == nil {
			out = append(out, runs[i].ID)
		}
	}
	return out
}

// historyStats counts the history events of each workflow.
func (b *bench) historyStats(ctx context.Context, wfIDs []string) HistoryStats {
	hs := HistoryStats{Counts: map[string]int{}}
	sum := 0
	for _, id := range wfIDs {
		events, err := b.history(ctx, id)
		if err != nil {
			log.Printf("history of %s: %v", id, err)
			continue
		}
		n := len(events)
		if _, ok := eventTime(events, enums.EVENT_TYPE_TIMER_STARTED); ok {
			hs.WithTimer++
		}
		if hs.Sampled == 0 || n < hs.Min {
			hs.Min = n
		}
		hs.Max = max(hs.Max, n)
		hs.Sampled++
		sum += n
		hs.Counts[strconv.Itoa(n)]++
	}
	if hs.Sampled > 0 {
		hs.Mean = round2(float64(sum) / float64(hs.Sampled))
	}
	return hs
}

// history returns the event types and times of a closed workflow.
func (b *bench) history(ctx context.Context, id string) ([]historyEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	it := b.c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []historyEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, historyEvent{Type: e.GetEventType(), At: e.GetEventTime().AsTime()})
	}
	return out, nil
}

type historyEvent struct {
	Type enums.EventType
	At   time.Time
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
