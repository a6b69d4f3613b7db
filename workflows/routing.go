package workflows

// Fleet learning (docs/behaviour.md "Fleet learning"): the workers of a task queue share their routing models'
// observations through one small workflow, best-effort; nothing a task waits for depends on it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
)

const (
	RoutingWorkflowType = "RoutingExchange"
	routingSignal       = "observations"
	routingQuery        = "observations_since"
	routingKept         = 2000                   // entries the exchange keeps (~120 bytes each: far under the 2 MB payload limit)
	routingEvery        = 500 * time.Millisecond // how often a worker sends its new observations and reads the others'
)

var routingMaxEvents = 2000 // the exchange continues as new past it

// RoutingEntry is one shared observation, numbered, with the worker that made it.
type RoutingEntry struct {
	Seq    int64         `json:"n"`
	Worker string        `json:"w"`
	Obs    providers.Obs `json:"o"`
}

// RoutingBatch is a worker's observations since its last batch.
type RoutingBatch struct {
	Worker string          `json:"worker"`
	Obs    []providers.Obs `json:"obs"`
}

// RoutingState is the exchange's: the latest entries, and the last number given.
type RoutingState struct {
	Last    int64          `json:"last"`
	Entries []RoutingEntry `json:"entries,omitempty"`
}

// RoutingExchange numbers the batches it is signalled and answers a worker the others' entries after its cursor.
func RoutingExchange(ctx workflow.Context, st RoutingState) error {
	if err := workflow.SetQueryHandler(ctx, routingQuery, func(after int64, self string) (RoutingState, error) {
		news := RoutingState{Last: st.Last}
		for _, e := range st.Entries {
			if (e.Seq > after || after > st.Last) && e.Worker != self { // after > Last: a cursor of a run since reset
				news.Entries = append(news.Entries, e)
			}
		}
		return news, nil
	}); err != nil {
		return err
	}
	batches := workflow.GetSignalChannel(ctx, routingSignal)
	for {
		var b RoutingBatch
		batches.Receive(ctx, &b)
		for more := true; more; more = batches.ReceiveAsync(&b) {
			for _, o := range b.Obs {
				st.Last++
				st.Entries = append(st.Entries, RoutingEntry{Seq: st.Last, Worker: b.Worker, Obs: o})
			}
			st.Entries = st.Entries[max(0, len(st.Entries)-routingKept):]
		}
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() >= routingMaxEvents || info.GetContinueAsNewSuggested() {
			return workflow.NewContinueAsNewError(ctx, RoutingWorkflowType, st)
		}
	}
}

// ShareRouting runs taskQueue's exchange on this worker too and, every routingEvery, sends m's new observations and
// applies the other workers'. Failures are logged at most once a minute: m then learns alone.
func ShareRouting(c client.Client, taskQueue string, acts *activities.Activities, o worker.Options, log *slog.Logger) (stop func(), err error) {
	if acts.Providers == nil || !acts.Providers.Model.Scored() {
		return func() {}, nil
	}
	w := worker.New(c, taskQueue+"/routing", o)
	w.RegisterWorkflowWithOptions(RoutingExchange, workflow.RegisterOptions{Name: RoutingWorkflowType})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the routing exchange's worker: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		host, _ := os.Hostname()
		x := &exchanger{c: c, taskQueue: taskQueue, self: fmt.Sprintf("%s:%d:%x", host, os.Getpid(), rand.Uint32()), m: acts.Providers.Model}
		var warned time.Time
		for t := time.NewTicker(routingEvery); ctx.Err() == nil; <-t.C {
			if err := x.round(ctx); err != nil && ctx.Err() == nil && time.Since(warned) > time.Minute {
				warned = time.Now()
				log.Warn("routing exchange failed: this worker learns alone until it answers", "error", err)
			}
		}
	}()
	return func() { cancel(); <-done; w.Stop() }, nil
}

type exchanger struct {
	c               client.Client
	taskQueue, self string
	m               *providers.Model
	pending         []providers.Obs // drained, not sent yet
	cursor          int64
}

// round sends the pending observations, then applies the others' since the cursor.
func (x *exchanger) round(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	x.pending = append(x.pending, x.m.Drain()...)
	x.pending = x.pending[max(0, len(x.pending)-routingKept/4):]
	id := "captchaflow/routing/" + x.taskQueue // the exchange runs on its own queue, taskQueue + "/routing"
	if len(x.pending) > 0 {
		if _, err := x.c.SignalWithStartWorkflow(ctx, id, routingSignal, RoutingBatch{Worker: x.self, Obs: x.pending},
			client.StartWorkflowOptions{ID: id, TaskQueue: x.taskQueue + "/routing"}, RoutingWorkflowType, RoutingState{}); err != nil {
			return err
		}
		x.pending = nil
	}
	v, err := x.c.QueryWorkflow(ctx, id, "", routingQuery, x.cursor, x.self)
	var news RoutingState
	if err == nil {
		err = v.Get(&news)
	}
	if errors.As(err, new(*serviceerror.NotFound)) {
		return nil // nobody has observed anything yet
	} else if err != nil {
		return err
	}
	obs := make([]providers.Obs, len(news.Entries))
	for i, e := range news.Entries {
		obs[i] = e.Obs
	}
	x.m.Apply(obs)
	x.cursor = news.Last
	return nil
}
