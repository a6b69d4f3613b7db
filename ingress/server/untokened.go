package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

const (
	// untokenedLookupDelay is how long after its arrival an untokened callback is looked up. It gets one visibility
	// query, which must not race its task's own search-attribute update (visibility lags by up to about a second).
	// The wait holds a background worker only while the queue is short: a callback that waited that long in the
	// queue is looked up at once.
	untokenedLookupDelay = time.Second
	// untokenedUpdateTimeout bounds the untokened update (at most INGRESS_SIGNAL_TIMEOUT): a workflow whose worker is
	// down cannot accept it, and the poll recovers the result anyway.
	untokenedUpdateTimeout = 2 * time.Second
	// rejectedHintTTL is how long a provider task ID whose untokened update the workflow rejected is answered
	// without a lookup after its last callback (each one renews it): a rejection is final for that ID (see
	// captchaflow.UntokenedHint).
	rejectedHintTTL = time.Hour
)

// errNoRunningWorkflow means visibility shows no running workflow waiting for the provider task ID.
var errNoRunningWorkflow = errors.New("no running workflow waiting for the provider task ID")

// waitingPhases are the phases in which a workflow takes an untokened callback: waiting for the callback, or polling.
var waitingPhases = []captchaflow.Phase{captchaflow.PhaseAwaitingCallback, captchaflow.PhasePolling}

// handleUntokenedCallback serves the bare /callback?id=&code= a provider sends when it was given a pingback URL
// without our token. Anyone can call it, and provider task IDs are sequential, so it is built to give a caller
// nothing: it serves only UNTOKENED_ALLOW_CIDRS when that is set, is rate limited (a fair share per source) before
// the body is read, answers at once after validation with the same 200 whether the task exists or not, and looks
// the workflow up and hands it the hint (deliverUntokened) in the background queue. Exact repeats, callbacks past
// the provider task's budget and those for a task whose workflow already rejected one are answered 200 without
// a lookup, so a flood against one waiting task costs a constant number of Temporal calls.
func (s *Server) handleUntokenedCallback(c echo.Context) error {
	info := callbackInfoOf(c)
	if !s.untokenedSourceAllowed(c.RealIP()) {
		return sourceRefusedError{}
	}
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
	if s.rejectedIDs.seen(id, now) || !s.untokenedBudget.take(id, now) {
		info.outcome = outcomeSuppressed
		return c.JSON(http.StatusOK, accepted)
	}
	if err := s.queue.enqueue(untokenedJob{providerTaskID: id, code: code, arrived: time.Now()}); err != nil {
		s.untokenedBudget.refund(id, now)
		return err
	}
	info.queued = true
	return c.JSON(http.StatusOK, accepted)
}

// untokenedSourceAllowed reports whether clientIP may use the untokened route: always when UNTOKENED_ALLOW_CIDRS
// is empty, else only from its networks.
func (s *Server) untokenedSourceAllowed(clientIP string) bool {
	if len(s.allowSources) == 0 {
		return true
	}
	ip := net.ParseIP(clientIP)
	for _, n := range s.allowSources {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// untokenedResult is how the background half of one untokened callback ended.
type untokenedResult struct {
	workflowID string
	outcome    string
	as         string // deliveredAsUpdate or deliveredAsSignal, once handed to a workflow
	err        error
}

// runUntokened is the background half of an untokened callback: lookup, hand-over, then the count and log line its
// request could not have (the outcome was not known when it was answered).
func (s *Server) runUntokened(ctx context.Context, job untokenedJob) {
	start := time.Now()
	r := untokenedResult{outcome: outcomeDropped, err: ctx.Err()} // the shutdown's drain ran out of time first
	if ctx.Err() == nil {
		r = s.lookupAndDeliver(ctx, job)
	}
	now := s.now()
	switch r.outcome {
	case outcomeSignalled, outcomeLateOrUnknown:
		s.seen.add(callbackKey(routeUntokened, "", job.providerTaskID, job.code), now)
	case outcomeUntokenedRejected:
		s.rejectedIDs.add(job.providerTaskID, now)
	default:
		// Not handed to Temporal: give the budget back for a later callback of the same task.
		s.untokenedBudget.refund(job.providerTaskID, now)
	}
	s.metrics.callbacks.WithLabelValues(routeUntokened, r.outcome).Inc()
	if r.as != "" {
		s.metrics.untokenedDelivered.WithLabelValues(r.as).Inc()
	}
	s.logUntokened(ctx, job, r, time.Since(start))
}

// logUntokened writes the line of an untokened callback's background half.
func (s *Server) logUntokened(ctx context.Context, job untokenedJob, r untokenedResult, took time.Duration) {
	attrs := []slog.Attr{
		slog.String("callback_route", routeUntokened),
		slog.String("workflow_id", r.workflowID),
		slog.String("provider_task_id", job.providerTaskID),
		slog.String("outcome", r.outcome),
		slog.String("delivered_as", r.as),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
	}
	level := slog.LevelInfo
	if r.err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", r.err.Error()))
	}
	s.log.LogAttrs(context.WithoutCancel(ctx), level, "untokened callback processed", attrs...)
}

// lookupAndDeliver resolves the provider task ID to the running workflow waiting for it — one visibility query,
// after untokenedLookupDelay — and hands it the hint.
func (s *Server) lookupAndDeliver(ctx context.Context, job untokenedJob) untokenedResult {
	if err := sleepUntil(ctx, job.arrived.Add(s.lookupDelay)); err != nil {
		return untokenedResult{outcome: outcomeDropped, err: err}
	}
	workflowID, err := s.lookupWorkflow(ctx, job.providerTaskID)
	switch {
	case errors.Is(err, errNoRunningWorkflow):
		return untokenedResult{outcome: outcomeLateOrUnknown}
	case err != nil:
		return untokenedResult{outcome: outcomeUnavailable, err: err}
	}
	r := s.deliverUntokened(ctx, workflowID, job)
	r.workflowID = workflowID
	return r
}

// sleepUntil waits until t or until ctx ends (its error).
func sleepUntil(ctx context.Context, t time.Time) error {
	wait := time.Until(t)
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// deliverUntokened hands the callback to the workflow as the UntokenedUpdate, without its code. A workflow that
// does not know the update (its worker predates it), or a server that serves no updates, gets the CallbackSignal
// with the code instead, which such a workflow needs. The update waits only until the workflow accepted or rejected it, within untokenedUpdateTimeout.
func (s *Server) deliverUntokened(ctx context.Context, workflowID string, job untokenedJob) untokenedResult {
	uctx, cancel := context.WithTimeout(ctx, min(untokenedUpdateTimeout, s.cfg.SignalTimeout))
	defer cancel()
	handle, err := s.temporal.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   captchaflow.UntokenedUpdate,
		Args:         []any{captchaflow.UntokenedHint{ProviderTaskID: job.providerTaskID}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		// Completed meanwhile: nothing is waiting for this result.
		return untokenedResult{outcome: outcomeLateOrUnknown}
	case updatesDisabled(err):
	case err != nil:
		return untokenedResult{outcome: outcomeUnavailable, err: unavailable(err)}
	default:
		rejection := updateRejection(handle)
		switch {
		case rejection == nil:
			return untokenedResult{outcome: outcomeSignalled, as: deliveredAsUpdate}
		case !unknownUpdate(rejection):
			return untokenedResult{outcome: outcomeUntokenedRejected}
		}
	}
	outcome, err := s.signal(ctx, workflowID, captchaflow.Callback{
		ProviderTaskID: job.providerTaskID, Code: job.code, Authenticated: false,
	})
	if err != nil {
		return untokenedResult{outcome: outcomeUnavailable, err: err}
	}
	r := untokenedResult{outcome: outcome}
	if outcome == outcomeSignalled {
		r.as = deliveredAsSignal
	}
	return r
}

// updateRejection is the failure of an update the workflow rejected, or nil for one it accepted. At
// WorkflowUpdateStageAccepted a rejected update's handle already holds its failure, while an accepted one's Get
// would wait for the handler to finish; so the handle is asked with a context that is already done, and an accepted
// update answers with that context's error.
func updateRejection(h client.WorkflowUpdateHandle) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.Get(ctx, nil)
	var pending *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if err == nil || errors.As(err, &pending) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// unknownUpdate reports whether rejection says the workflow has no handler for UntokenedUpdate (an older worker):
// the SDKs word it "unknown update <name>" (Go), "Update handler for '<name>' expected but not found" (Python) and
// the like.
func unknownUpdate(rejection error) bool {
	msg := strings.ToLower(rejection.Error())
	if !strings.Contains(msg, captchaflow.UntokenedUpdate) {
		return false
	}
	for _, says := range []string{"unknown update", "not found", "no handler", "not registered"} {
		if strings.Contains(msg, says) {
			return true
		}
	}
	return false
}

// updatesDisabled reports whether err is a Temporal server that does not serve updates at all (too old, or
// frontend.enableUpdateWorkflowExecution off): its workflows can only be signalled.
func updatesDisabled(err error) bool {
	var unimplemented *serviceerror.Unimplemented
	var denied *serviceerror.PermissionDenied
	return errors.As(err, &unimplemented) ||
		errors.As(err, &denied) && strings.Contains(strings.ToLower(denied.Error()), "disabled")
}

// lookupQuery finds the running workflow whose current submission has providerTaskID and that waits for its
// callback or polls (never one that is delivering, done or queued). providerTaskID must already match
// providerTaskIDPattern, which admits no quote.
func lookupQuery(providerTaskID string) string {
	phases := make([]string, len(waitingPhases))
	for i, p := range waitingPhases {
		phases[i] = "'" + string(p) + "'"
	}
	return fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running' AND %s IN (%s)", captchaflow.TaskIDKey.GetName(),
		providerTaskID, captchaflow.PhaseKey.GetName(), strings.Join(phases, ", "))
}

// lookupWorkflow resolves providerTaskID to a workflow ID with one visibility query, bounded by LookupTimeout: a
// request never causes more. It returns errNoRunningWorkflow if visibility shows none, or the Temporal error.
func (s *Server) lookupWorkflow(ctx context.Context, providerTaskID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LookupTimeout)
	defer cancel()
	resp, err := s.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		PageSize: 1,
		Query:    lookupQuery(providerTaskID),
	})
	switch {
	case err != nil:
		return "", err
	case len(resp.GetExecutions()) == 0:
		return "", errNoRunningWorkflow
	}
	return resp.GetExecutions()[0].GetExecution().GetWorkflowId(), nil
}
