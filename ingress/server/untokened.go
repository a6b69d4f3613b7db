package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

const (
	untokenedLookupDelay   = time.Second     // the one visibility query must not race the task's search-attribute update
	untokenedUpdateTimeout = 2 * time.Second // a workflow whose worker is down cannot accept it; the poll recovers anyway
	rejectedHintTTL        = time.Hour       // a rejection is final for a provider task ID (captchaflow.UntokenedHint)
)

// handleUntokenedCallback serves /callback?id=&code=: anyone can call it with sequential IDs, so it tells nothing (the same
// 200 either way), is allow-listed and rate limited before the body, and looks up in the background; repeats cost no call.
func (s *Server) handleUntokenedCallback(c echo.Context) error {
	info := callbackInfoOf(c)
	ip := net.ParseIP(c.RealIP()) // every source when UNTOKENED_ALLOW_CIDRS is empty, else only its networks
	if len(s.allowSources) > 0 && !slices.ContainsFunc(s.allowSources, func(n *net.IPNet) bool { return n.Contains(ip) }) {
		return errSourceRefused
	}
	now := s.now()
	if retryAfter, ok := s.clientLimit.allow(c.RealIP(), now); !ok {
		return rateLimited(retryAfter)
	}
	id, code, err := callbackFields(c, "")
	info.providerTaskID = id
	switch {
	case err != nil:
		return err
	case s.seen.has(callbackKey(routeUntokened, "", id, code), now):
		info.outcome = outcomeDuplicate
	case s.rejectedIDs.has(id, now) || !s.untokenedBudget.take(id, now):
		info.outcome = outcomeSuppressed
	default:
		key, arrived := callbackKey(routeUntokened, "", id, code), time.Now() // wall clock: the lookup waits after it
		if err := s.queue.enqueue(func(ctx context.Context) { s.runUntokened(ctx, id, key, arrived) }); err != nil {
			s.untokenedBudget.refund(id, now)
			return err
		}
		info.outcome = outcomeQueued
	}
	return c.JSON(http.StatusOK, accepted)
}

// runUntokened is the background half: lookup, hint, then the count and log line the request could not have.
func (s *Server) runUntokened(ctx context.Context, id, key string, arrived time.Time) {
	start := time.Now()
	workflowID, outcome, err := s.lookupAndDeliver(ctx, id, arrived)
	now := s.now()
	switch outcome {
	case outcomeSignalled, outcomeLateOrUnknown:
		s.seen.add(key, now)
	case outcomeUntokenedRejected:
		s.rejectedIDs.add(id, now)
	default:
		s.untokenedBudget.refund(id, now) // not handed over: a later callback may try again
	}
	s.callbacks.WithLabelValues(routeUntokened, outcome).Inc()
	log := s.log.With("callback_route", routeUntokened, "workflow_id", workflowID,
		"provider_task_id", id, "outcome", outcome, "duration_ms", float64(time.Since(start).Microseconds())/1000)
	if err != nil {
		log.Warn("untokened callback processed", "error", err.Error())
		return
	}
	log.Info("untokened callback processed")
}

// lookupAndDeliver finds the running workflow waiting for id (one bounded visibility query, after a delay) and hints it.
func (s *Server) lookupAndDeliver(ctx context.Context, id string, arrived time.Time) (workflowID, outcome string, err error) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(arrived.Add(s.lookupDelay))):
	}
	if ctx.Err() != nil {
		return "", outcomeDropped, ctx.Err() // the shutdown's drain ran out of time first
	}
	// id admits no quote (callback.Parse); only a task waiting for its callback or polling can use the hint.
	lctx, cancel := context.WithTimeout(ctx, s.cfg.LookupTimeout)
	resp, err := s.temporal.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1,
		Query: fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running' AND %s IN ('%s', '%s')", captchaflow.TaskIDKey.GetName(),
			id, captchaflow.PhaseKey.GetName(), captchaflow.PhaseAwaitingCallback, captchaflow.PhasePolling)})
	cancel()
	switch {
	case err != nil:
		return "", outcomeUnavailable, err
	case len(resp.GetExecutions()) == 0:
		return "", outcomeLateOrUnknown, nil
	}
	workflowID = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
	uctx, cancel := context.WithTimeout(ctx, min(untokenedUpdateTimeout, s.cfg.SignalTimeout))
	defer cancel()
	handle, err := s.temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   captchaflow.UntokenedUpdate,
		Args:         []any{captchaflow.UntokenedHint{ProviderTaskID: id}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	switch outcome = outcomeOf(err); {
	case outcome == outcomeUnavailable:
		return workflowID, outcome, err
	case outcome == outcomeSignalled && updateRejected(handle):
		return workflowID, outcomeUntokenedRejected, nil
	}
	return workflowID, outcome, nil
}

// outcomeOf is a Temporal call's outcome; NotFound means nothing waits for it (completed, or never existed).
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outcomeSignalled
	case errors.As(err, new(*serviceerror.NotFound)):
		return outcomeLateOrUnknown
	}
	return outcomeUnavailable
}

// updateRejected asks the handle with a context already done: at WorkflowUpdateStageAccepted a rejected update
// holds its failure, while an accepted one's Get would wait for the handler.
func updateRejected(h client.WorkflowUpdateHandle) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.Get(ctx, nil)
	return err != nil && !errors.As(err, new(*client.WorkflowUpdateServiceTimeoutOrCanceledError)) && !errors.Is(err, context.Canceled)
}

// jobQueue runs untokened callbacks on a fixed number of workers, at most cap(jobs) waiting: a request is answered
// at once (no timing oracle) and a flood costs a bounded number of lookups.
type jobQueue struct {
	jobs    chan func(context.Context)
	ctx     context.Context // cancelled only when a drain runs out of time
	cancel  context.CancelFunc
	workers sync.WaitGroup
	mu      sync.RWMutex // orders enqueue's send before drain's close
	closed  bool
}

func newJobQueue(size, workers int) *jobQueue {
	q := &jobQueue{jobs: make(chan func(context.Context), size)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	for range workers {
		q.workers.Go(func() {
			for run := range q.jobs {
				run(q.ctx)
			}
		})
	}
	return q
}

func (q *jobQueue) enqueue(run func(context.Context)) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return unavailable(errDraining)
	}
	select {
	case q.jobs <- run:
		return nil
	default:
		return errQueueFull
	}
}

// drain stops taking jobs and waits for the accepted ones, cancelled (the waiting dropped) if ctx ends first; repeatable.
func (q *jobQueue) drain(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.jobs)
	}
	q.mu.Unlock()
	stop := context.AfterFunc(ctx, q.cancel) // the jobs still waiting then run cancelled: dropped
	q.workers.Wait()
	if !stop() {
		return ctx.Err()
	}
	return nil
}
