package main

import (
	"context"
	"fmt"
	"log"
	"strconv"

	enums "go.temporal.io/api/enums/v1"

	"github.com/captchaflow/captchaflow/codec"
)

// The throughput phase's paced scenarios (issue 36): the same tasks as the default ones, on a worker of their own
// whose account is paced at -paced-rate, above the offered load. Its Submit and polls run on the account's paced
// task queues (<queue>@captchaai/submit, /results), whose rate the server enforces: what pacing costs a task when
// it does not hold one back.

// pacedEnv are the worker settings that pace the account; the stack's worker never gets them from the bench.
var pacedEnv = []string{"CAPTCHAAI_SUBMITS_PER_SECOND", "CAPTCHAAI_RESULTS_PER_SECOND"}

// pacedQueue is the paced worker's task queue: of its own, so that the stack's worker takes none of its tasks.
func (b *bench) pacedQueue() string { return b.taskQueue + "-paced" }

// defaultPace is the rate the stack's worker paces at: none (the default configuration on loopback) unless
// -worker-env sets one, which its scenarios then report.
func defaultPace(workerEnv map[string]string) float64 {
	pace := 0.0
	for _, k := range pacedEnv {
		if v, err := strconv.ParseFloat(workerEnv[k], 64); err == nil {
			pace = max(pace, v) // either rate moves that kind of request to a paced queue
		}
	}
	return pace
}

func rateText(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }

// ownWorkerEnv is the environment of the worker of its own that serves sc (nil: the stack's worker serves it).
func (b *bench) ownWorkerEnv(sc scenario) map[string]string {
	switch sc.Name {
	case scenarioPaced:
		env := map[string]string{"TASK_QUEUE": sc.Queue}
		for _, k := range pacedEnv {
			env[k] = rateText(b.cfg.pacedRate)
		}
		return env
	case scenarioEncrypted:
		return map[string]string{"TASK_QUEUE": sc.Queue, codec.KeysFileEnv: b.keysFile}
	case scenarioBaseline:
		return map[string]string{"TASK_QUEUE": sc.Queue}
	}
	return nil
}

// serveOwn starts the worker of its own sc needs (the paced, encrypted or baseline one) and stops any other. The
// scenarios of one kind run one after another, so each is started once and never runs during another scenario:
// even idle, its pollers' long polls would cost the server CPU another scenario's measurement would count.
func (b *bench) serveOwn(ctx context.Context, sc scenario) error {
	if b.own != nil && b.ownFor == sc.Name {
		return nil
	}
	if err := b.stopOwn(ctx); err != nil {
		return err
	}
	if sc.Name == scenarioEncrypted { // first: the worker's environment names the keys file this writes
		if err := b.encrypt(ctx); err != nil {
			return err
		}
	}
	env := b.ownWorkerEnv(sc)
	if env == nil {
		return nil
	}
	log.Printf("starting the %s worker on %s: %v", sc.Name, sc.Queue, env)
	bin := ""
	if sc.Name == scenarioBaseline {
		bin = b.baselineBin
	}
	w, err := b.st.StartExtraWorker(ctx, "worker-"+sc.Name, bin, env)
	if err != nil {
		return fmt.Errorf("starting the %s worker: %w", sc.Name, err)
	}
	b.own, b.ownFor = w, sc.Name
	// The first Submit on fresh paced queues waited ~20 s in a smoke run (cause not investigated): one task served
	// first, as the stack's prewarm does for its queue, keeps that out of any measurement whatever -warmup is.
	first := "bench-" + b.runID + "-" + sc.Name + "-first"
	if err := b.oursFor(sc, nil)(ctx, first); err != nil {
		return fmt.Errorf("the %s worker's first task: %w", sc.Name, err)
	}
	if sc.Name == scenarioEncrypted {
		return b.checkEncrypted(ctx, first)
	}
	if sc.Name == scenarioPaced {
		return b.awaitLane(ctx, sc, first)
	}
	return nil
}

// awaitLane runs tasks until one's Submit took the worker's lane (ran on the task's own queue, not the account's),
// which opens seconds after the worker first lists itself among the queue's pollers: the measurement is of the
// worker as it runs from then on, not of its first seconds.
func (b *bench) awaitLane(ctx context.Context, sc scenario, id string) error {
	for i := 1; ; i++ {
		queue, err := b.submitQueue(ctx, id)
		if err != nil || queue == sc.Queue {
			return err
		} else if i == laneTries {
			return fmt.Errorf("%d tasks' Submits all ran on %s: the paced worker's lane never opened", i, queue)
		}
		id = fmt.Sprintf("bench-%s-%s-lane-%d", b.runID, sc.Name, i)
		if err := b.oursFor(sc, nil)(ctx, id); err != nil {
			return fmt.Errorf("the %s worker's task %s: %w", sc.Name, id, err)
		}
	}
}

// laneTries bounds awaitLane: tasks of a few tens of milliseconds, the lane open within seconds.
const laneTries = 2000

// submitQueue is the task queue id's first Submit was scheduled on.
func (b *bench) submitQueue(ctx context.Context, id string) (string, error) {
	it := b.c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", err
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "Submit" {
			return a.GetTaskQueue().GetName(), nil
		}
	}
	return "", fmt.Errorf("%s has no Submit", id)
}

// stopOwn stops the worker of its own if one runs, and after the encrypted scenarios gives the ingress back its
// plaintext signals and closes the codec's client (the stack's worker has no key to read them).
func (b *bench) stopOwn(ctx context.Context) error {
	if b.own == nil {
		return nil
	}
	if err := b.own.Stop(); err != nil {
		log.Printf("stopping the %s worker: %v", b.ownFor, err)
	}
	was := b.ownFor
	b.own, b.ownFor = nil, ""
	if was != scenarioEncrypted {
		return nil
	}
	b.enc.Close()
	b.enc = nil
	return b.keyIngress(ctx, false)
}

// pidsFor counts as "worker" the worker that serves sc's tasks: the paced or encrypted one in those scenarios (the
// stack's, idle meanwhile, is then not counted, as such a deployment would not run it).
func (b *bench) pidsFor(sc scenario) func() map[string]int {
	w := b.own
	if w == nil || b.ownFor != sc.Name {
		return b.pids
	}
	return func() map[string]int {
		m := b.pids()
		m["worker"] = w.PID()
		return m
	}
}

// runScenarios runs the throughput and parked phases' comparisons; a worker of its own runs for the paced and
// the encrypted ones alone and is stopped after the last of its kind (the parked scenario's is the stack's).
func (b *bench) runScenarios(ctx context.Context) error {
	defer func() {
		if err := b.stopOwn(context.WithoutCancel(ctx)); err != nil {
			log.Print(err)
		}
	}()
	for _, sc := range b.scenarios() {
		if err := b.serveOwn(ctx, sc); err != nil {
			return err
		}
		if sc.Name == scenarioEncrypted || sc.Name == scenarioBaseline {
			sr, err := b.compareSelf(ctx, sc)
			if err != nil {
				return err
			}
			if sc.Name == scenarioBaseline {
				b.res.Baseline = append(b.res.Baseline, thisBuildAgainst(sr))
			} else {
				b.res.Codec = append(b.res.Codec, sr)
			}
			continue
		}
		tr, err := b.compare(ctx, sc)
		if err != nil {
			return err
		}
		b.res.Throughput = append(b.res.Throughput, tr)
		if sc.Name == scenarioPaced { // and what pacing costs against the default configuration, interleaved
			self := sc
			self.Rounds = b.cfg.codecRounds
			pr, err := b.compareSelf(ctx, self)
			if err != nil {
				return err
			}
			b.res.Pacing = append(b.res.Pacing, pr)
		}
	}
	return b.stopOwn(ctx)
}
