package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
)

// Lookup retry spacing; visibility usually catches up within a few hundred milliseconds.
const (
	lookupFirstBackoff = 50 * time.Millisecond
	lookupMaxBackoff   = 500 * time.Millisecond
)

// errNoRunningWorkflow means visibility shows no running workflow for a provider task ID (yet).
var errNoRunningWorkflow = errors.New("no running workflow for the provider task ID")

// handleUntokenedCallback serves the bare /callback?id=&code= a provider sends when it was given a pingback URL
// without our token. Anyone can call it, and provider task IDs are sequential, so it is built to give a caller
// nothing: it is rate limited before the body is read, answers at once after validation with the same 200
// whether the task exists or not, and looks the workflow up and signals it (Authenticated: false, a hint the
// workflow confirms with res.php) in the background queue. Exact repeats and callbacks past the provider task's
// signal budget are answered 200 without a signal, so a flood against one waiting task adds a constant number of
// signals to its history.
func (s *Server) handleUntokenedCallback(c echo.Context) error {
	info := callbackInfoOf(c)
	now := s.now()
	if retryAfter, ok := s.clientLimit.allow(c.RealIP(), now); !ok {
		return &rateLimitedError{retryAfter: retryAfter}
	}
	id, code, err := callbackFields(c)
	info.providerTaskID = id
	if err != nil {
		return err
	}
	if s.seen.seen(callbackKey(routeUntokened, "", id, code), now) {
		info.outcome = outcomeDuplicate
		return c.JSON(http.StatusOK, accepted)
	}
	if !s.untokenedBudget.take(id, now) {
		info.outcome = outcomeSuppressed
		return c.JSON(http.StatusOK, accepted)
	}
	if err := s.queue.enqueue(untokenedJob{providerTaskID: id, code: code}); err != nil {
		s.untokenedBudget.refund(id, now)
		return err
	}
	info.queued = true
	return c.JSON(http.StatusOK, accepted)
}

// runUntokened is the background half of an untokened callback: lookup, signal, then the count and log line its
// request could not have (the outcome was not known when it was answered).
func (s *Server) runUntokened(ctx context.Context, job untokenedJob) {
	start := time.Now()
	var workflowID, outcome string
	var err error
	if ctx.Err() != nil {
		// The shutdown's drain ran out of time before this job started.
		outcome, err = outcomeDropped, ctx.Err()
	} else {
		workflowID, outcome, err = s.lookupAndSignal(ctx, job)
	}
	now := s.now()
	switch outcome {
	case outcomeSignalled, outcomeLateOrUnknown:
		s.seen.add(callbackKey(routeUntokened, "", job.providerTaskID, job.code), now)
	default:
		// Not handed to Temporal: give the budget back for a later callback of the same task.
		s.untokenedBudget.refund(job.providerTaskID, now)
	}
	s.metrics.callbacks.WithLabelValues(routeUntokened, outcome).Inc()
	attrs := []slog.Attr{
		slog.String("callback_route", routeUntokened),
		slog.String("workflow_id", workflowID),
		slog.String("provider_task_id", job.providerTaskID),
		slog.String("outcome", outcome),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.log.LogAttrs(context.WithoutCancel(ctx), level, "untokened callback processed", attrs...)
}

// lookupAndSignal resolves the provider task ID to its running workflow and signals it unauthenticated.
func (s *Server) lookupAndSignal(ctx context.Context, job untokenedJob) (workflowID, outcome string, err error) {
	// Retrying visibility is patience for a callback that raced its task's search-attribute update; while other
	// callbacks wait behind this one it is a flood's lever (an unknown ID held a worker for the whole lookup
	// timeout), so then one query decides, and a real callback it misses is recovered by the workflow's poll.
	patient := s.queue.depth() == 0
	workflowID, err = s.lookupWorkflow(ctx, job.providerTaskID, patient)
	switch {
	case errors.Is(err, errNoRunningWorkflow):
		return "", outcomeLateOrUnknown, nil
	case err != nil:
		return "", outcomeUnavailable, err
	}
	outcome, err = s.signal(ctx, workflowID, captchaflow.Callback{
		ProviderTaskID: job.providerTaskID,
		Code:           job.code,
		Authenticated:  false,
	})
	if err != nil {
		return workflowID, outcomeUnavailable, err
	}
	return workflowID, outcome, nil
}

// lookupQuery finds the running workflow whose current submission has providerTaskID. providerTaskID must already
// match providerTaskIDPattern, which admits no quote.
func lookupQuery(providerTaskID string) string {
	return fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", captchaflow.TaskIDKey.GetName(), providerTaskID)
}

// lookupWorkflow resolves providerTaskID to a workflow ID. Visibility is eventually consistent and the callback can
// race the search-attribute update, so when patient an empty answer or a failed call is retried with backoff until
// LookupTimeout; otherwise the first answer stands. It returns errNoRunningWorkflow if visibility never showed one,
// or the last Temporal error if every call failed.
func (s *Server) lookupWorkflow(ctx context.Context, providerTaskID string, patient bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LookupTimeout)
	defer cancel()
	req := &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1, Query: lookupQuery(providerTaskID)}
	backoff := s.lookupBackoff
	var lastErr error
	for {
		resp, err := s.temporal.ListWorkflow(ctx, req)
		switch {
		case err == nil && len(resp.GetExecutions()) > 0:
			return resp.GetExecutions()[0].GetExecution().GetWorkflowId(), nil
		case err == nil:
			lastErr = errNoRunningWorkflow
		case ctx.Err() != nil && lastErr != nil:
			// The call was cut by our own deadline; the answer before it is the better one.
		default:
			lastErr = err
		}
		if !patient {
			return "", lastErr
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return "", lastErr
		case <-timer.C:
		}
		backoff = min(2*backoff, lookupMaxBackoff)
	}
}
