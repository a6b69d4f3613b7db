package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"

	"github.com/captchaflow/captchaflow/providers"
)

// The fleet phase (issue 31): two workers of their own on one provider account held to 2captcha's in.php rule
// (more than 60 requests within 3 s answer MAX_USER_TURN and bar the account for 10 s), -fleet-n tasks started at
// once, callbacks working, -fleet-solve solves, PROVIDER_THREADS unset and no pace configured (the documented
// default). The figures: tasks per second against the account's limit, in.php and res.php requests per task,
// refusals, the most in.php requests within any 3 s.
const (
	fleetWorkers      = 2
	fleetSubmitLimit  = 60
	fleetSubmitWindow = 3 * time.Second
	fleetSubmitBan    = 10 * time.Second
	fleetDeadline     = 180 * time.Second

	maxFleetWallToIdeal = 1.5
	maxFleetRefusals    = 3
)

// FleetResult is the fleet phase.
type FleetResult struct {
	Tasks          int   `json:"tasks"`
	Workers        int   `json:"workers"`
	SolveMS        int   `json:"solve_ms"`
	SubmitLimit    int   `json:"submit_limit"`
	SubmitWindowMS int64 `json:"submit_window_ms"`
	SubmitBanMS    int64 `json:"submit_ban_ms"`
	// ProviderThreads is the workers' PROVIDER_THREADS (-worker-env), "unset" when not given.
	ProviderThreads string  `json:"provider_threads"`
	Failed          int     `json:"failed"`
	FirstError      string  `json:"first_error,omitempty"`
	WallSeconds     float64 `json:"wall_seconds"`  // first start request → last result
	IdealSeconds    float64 `json:"ideal_seconds"` // tasks ÷ fleetPace + the solve
	WallToIdeal     float64 `json:"wall_to_ideal"`
	// TasksPerSecond are the tasks solved per second of wall time; LimitPerSecond the account's limit, the most
	// submissions a second it can take on average (limit ÷ window), PacePerSecond the pace that keeps to it.
	TasksPerSecond float64 `json:"tasks_per_second"`
	LimitPerSecond float64 `json:"limit_per_second"`
	PacePerSecond  float64 `json:"pace_per_second"`
	// SubmitRequests are every in.php request (refused ones too), SubmitRefused those answered MAX_USER_TURN, Bans
	// the bars they began, PeakSubmitsInWindow the most within any window; ResultRequests res.php action=get ones.
	SubmitRequests      int64   `json:"submit_requests"`
	SubmitRefused       int64   `json:"submit_refused"`
	Bans                int64   `json:"bans"`
	PeakSubmitsInWindow int     `json:"peak_submits_in_window"`
	ResultRequests      int64   `json:"result_requests"`
	ResultRefused       int64   `json:"result_refused"`
	InPHPPerTask        float64 `json:"in_php_per_task"`
	ResPHPPerTask       float64 `json:"res_php_per_task"`
	// PaidTwice counts tasks the provider created more than one task for.
	PaidTwice     int  `json:"paid_twice"`
	StartToResult Dist `json:"start_to_result"`
}

// fleet runs the fleet phase. It needs the provider to itself, as the threads phase does.
// fleetPace is 2captcha's documented pace, its hosts' default: the fleet's workers are told it, the simulator on
// loopback standing for a 2captcha account.
var fleetPace = providers.InPHPRates.Submits

func (b *bench) fleet(ctx context.Context) (*FleetResult, error) {
	fr := &FleetResult{Tasks: b.cfg.fleetN, Workers: fleetWorkers, SolveMS: int(b.cfg.fleetSolve.Milliseconds()),
		SubmitLimit: fleetSubmitLimit, SubmitWindowMS: fleetSubmitWindow.Milliseconds(), SubmitBanMS: fleetSubmitBan.Milliseconds(),
		ProviderThreads: "unset", LimitPerSecond: fleetSubmitLimit / fleetSubmitWindow.Seconds(), PacePerSecond: fleetPace}
	if v, ok := b.cfg.workerEnv["PROVIDER_THREADS"]; ok {
		fr.ProviderThreads = v
	}
	fr.IdealSeconds = round2(float64(fr.Tasks)/fleetPace + b.cfg.fleetSolve.Seconds())
	if err := b.sim.waitIdle(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	queue := b.taskQueue + "-fleet"
	stop, err := b.startFleetWorkers(ctx, queue)
	defer stop()
	if err != nil {
		return nil, err
	}
	// The limits go on last: PUT /_sim/limits restarts the counters, so they count this phase alone.
	if err := b.sim.setLimits(ctx, sim.LimitsDoc{SubmitLimit: fleetSubmitLimit, SubmitWindowMS: fr.SubmitWindowMS, SubmitBanMS: fr.SubmitBanMS}); err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.sim.setLimits(rctx, sim.LimitsDoc{}); err != nil {
			log.Printf("fleet: turning the simulator's limits off: %v", err)
		}
	}()
	log.Printf("fleet: %d tasks at once on %d workers, %s solves, in.php rule %d within %s (bar %s), PROVIDER_THREADS %s",
		fr.Tasks, fleetWorkers, b.cfg.fleetSolve, fleetSubmitLimit, fleetSubmitWindow, fleetSubmitBan, fr.ProviderThreads)
	prefix := fmt.Sprintf("bench-%s-fleet-", b.runID)
	in := solveInput(map[string]string{"sim_solve_ms": strconv.Itoa(fr.SolveMS)})
	in.DeadlineSeconds = int(fleetDeadline.Seconds())
	runs := drive(ctx, ids(prefix, 0, fr.Tasks), fr.Tasks, func(ctx context.Context, id string) error {
		ctx, cancel := context.WithTimeout(ctx, fleetDeadline+time.Minute)
		defer cancel()
		_, err := captchaflow.Solve(ctx, b.c, id, in, captchaflow.StartOptions{TaskQueue: queue})
		return err
	})
	st, err := b.sim.stats(ctx)
	if err != nil {
		return nil, err
	}
	b.summarizeFleet(ctx, fr, runs, st.Limits, prefix)
	log.Printf("fleet: %d of %d solved in %.1f s (ideal %.1f s, %.2f ×), %.1f tasks/s against a limit of %.0f/s; in.php %d (refused %d, at most %d within %s), res.php %d; paid twice %d",
		fr.Tasks-fr.Failed, fr.Tasks, fr.WallSeconds, fr.IdealSeconds, fr.WallToIdeal, fr.TasksPerSecond, fr.LimitPerSecond,
		fr.SubmitRequests, fr.SubmitRefused, fr.PeakSubmitsInWindow, fleetSubmitWindow, fr.ResultRequests, fr.PaidTwice)
	return fr, nil
}

// startFleetWorkers starts the fleet's workers on queue; stop stops those started.
func (b *bench) startFleetWorkers(ctx context.Context, queue string) (stop func(), err error) {
	var workers []*devstack.Process
	stop = func() {
		for _, w := range workers {
			_ = w.Stop()
		}
	}
	for i := range fleetWorkers {
		w, err := b.st.StartExtraWorker(ctx, fmt.Sprintf("worker-fleet-%d", i+1), "", map[string]string{"TASK_QUEUE": queue,
			"CAPTCHAAI_SUBMITS_PER_SECOND": strconv.FormatFloat(fleetPace, 'g', -1, 64)})
		if err != nil {
			return stop, fmt.Errorf("starting fleet worker %d: %w", i+1, err)
		}
		workers = append(workers, w)
	}
	return stop, nil
}

func (b *bench) summarizeFleet(ctx context.Context, fr *FleetResult, runs []taskRun, lim sim.LimitStats, prefix string) {
	var firstErr error
	fr.Failed, firstErr = failures(runs)
	if firstErr != nil {
		fr.FirstError = firstErr.Error()
	}
	fr.WallSeconds = round2(span(runs).Seconds())
	fr.WallToIdeal = round2(fr.WallSeconds / fr.IdealSeconds)
	fr.TasksPerSecond = round2(float64(fr.Tasks-fr.Failed) / fr.WallSeconds)
	fr.SubmitRequests, fr.SubmitRefused, fr.Bans, fr.PeakSubmitsInWindow = lim.SubmitRequests, lim.SubmitRefused, lim.Bans, lim.PeakSubmitsInWindow
	fr.ResultRequests, fr.ResultRefused = lim.ResultRequests, lim.ResultRefused
	fr.InPHPPerTask = round3(float64(lim.SubmitRequests) / float64(fr.Tasks))
	fr.ResPHPPerTask = round3(float64(lim.ResultRequests) / float64(fr.Tasks))
	var start []float64
	for _, r := range runs {
		if r.Err == nil {
			start = append(start, ms(r.End.Sub(r.Start)))
		}
	}
	fr.StartToResult = summarize(start)
	if tasks, err := b.sim.tasksByWorkflow(ctx, prefix); err == nil {
		for _, ts := range tasks {
			if len(ts) > 1 {
				fr.PaidTwice++
			}
		}
	} else {
		log.Printf("fleet: the provider's tasks: %v", err)
	}
}

// setLimits sets the simulator's account limits (PUT /_sim/limits; the zero document turns them off).
func (s *simClient) setLimits(ctx context.Context, doc sim.LimitsDoc) error {
	return s.put(ctx, "/_sim/limits", doc)
}

// fleetRows are the fleet phase's rows in the measures table.
func (m *markdown) fleetRows(r *Results) {
	f := r.Fleet
	if f == nil {
		return
	}
	c := fmt.Sprintf("fleet (%d tasks at once, %d workers, %.0f s solves, in.php rule %d within %.0f s, PROVIDER_THREADS %s)",
		f.Tasks, f.Workers, float64(f.SolveMS)/1000, f.SubmitLimit, float64(f.SubmitWindowMS)/1000, f.ProviderThreads)
	m.p("| %s: solved, tasks/s (the account's limit %.0f/s, pace %.0f/s) | %d of %d, %.2f | | |\n", c, f.LimitPerSecond,
		f.PacePerSecond, f.Tasks-f.Failed, f.Tasks, f.TasksPerSecond)
	m.p("| %s: batch wall time, s (ideal %d ÷ %.0f/s + %.0f s = %.1f s) | %.1f (%.2f × ideal) | | |\n", c, f.Tasks, f.PacePerSecond,
		float64(f.SolveMS)/1000, f.IdealSeconds, f.WallSeconds, f.WallToIdeal)
	m.p("| %s: in.php / res.php requests per task | %.3f / %.3f | | |\n", c, f.InPHPPerTask, f.ResPHPPerTask)
	m.p("| %s: in.php requests, refused (MAX_USER_TURN), bars; most within %.0f s | %d, %d, %d; %d | | |\n", c,
		float64(f.SubmitWindowMS)/1000, f.SubmitRequests, f.SubmitRefused, f.Bans, f.PeakSubmitsInWindow)
	m.p("| %s: paid twice; start → result p50 / p95 / max, ms | %d; %s / %s / %s | | |\n", c, f.PaidTwice,
		num(f.StartToResult.P50), num(f.StartToResult.P95), num(f.StartToResult.Max))
	if f.Failed > 0 {
		m.p("| %s: failed | %d (%s) | | |\n", c, f.Failed, f.FirstError)
	}
}

// fleetTargets: the figures for the fleet phase.
func fleetTargets(r *Results) []Target {
	f := r.Fleet
	if f == nil {
		return nil
	}
	cond := fmt.Sprintf(" (fleet: %d tasks, %d workers)", f.Tasks, f.Workers)
	return []Target{{
		Name: "tasks solved, none paid twice" + cond, Want: fmt.Sprintf("%d, 0", f.Tasks),
		Got: fmt.Sprintf("%d, %d", f.Tasks-f.Failed, f.PaidTwice), Met: f.Failed == 0 && f.PaidTwice == 0, Measured: true,
	}, {
		Name: fmt.Sprintf("in.php requests within any %.0f s", float64(f.SubmitWindowMS)/1000) + cond,
		Want: fmt.Sprintf("≤ %d", f.SubmitLimit), Got: strconv.Itoa(f.PeakSubmitsInWindow),
		Met: f.PeakSubmitsInWindow <= f.SubmitLimit, Measured: true,
	}, {
		Name: "rate refusals (MAX_USER_TURN)" + cond, Want: fmt.Sprintf("≤ %d", maxFleetRefusals),
		Got: strconv.FormatInt(f.SubmitRefused, 10), Met: f.SubmitRefused <= maxFleetRefusals, Measured: true,
	}, {
		Name: "batch wall time" + cond, Want: fmt.Sprintf("≤ %.1f × ideal (%.1f s)", maxFleetWallToIdeal, f.IdealSeconds),
		Got: fmt.Sprintf("%.1f s = %.2f × ideal", f.WallSeconds, f.WallToIdeal),
		Met: f.Failed == 0 && f.WallToIdeal <= maxFleetWallToIdeal, Measured: true,
	}}
}
