package server

import (
	"context"
	"errors"
	"fmt"
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
// without our token. Anyone can call it, so the signal is only a hint (Authenticated: false): the workflow checks
// the code with res.php before accepting it.
func (s *Server) handleUntokenedCallback(c echo.Context) error {
	info := callbackInfoOf(c)
	id, code, err := callbackFields(c)
	info.providerTaskID = id
	if err != nil {
		return err
	}
	workflowID, err := s.lookupWorkflow(c.Request().Context(), id)
	switch {
	case errors.Is(err, errNoRunningWorkflow):
		info.outcome = outcomeLateOrUnknown
		return c.JSON(http.StatusOK, accepted)
	case err != nil:
		return unavailable(err)
	}
	info.workflowID = workflowID
	info.outcome, err = s.signal(c.Request().Context(), workflowID, captchaflow.Callback{
		ProviderTaskID: id,
		Code:           code,
		Authenticated:  false,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, accepted)
}

// lookupQuery finds the running workflow whose current submission has providerTaskID. providerTaskID must already
// match providerTaskIDPattern, which admits no quote.
func lookupQuery(providerTaskID string) string {
	return fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", captchaflow.TaskIDKey.GetName(), providerTaskID)
}

// lookupWorkflow resolves providerTaskID to a workflow ID. Visibility is eventually consistent and the callback can
// race the search-attribute update, so an empty answer or a failed call is retried with backoff until
// LookupTimeout. It returns errNoRunningWorkflow if visibility never showed one, or the last Temporal error if
// every call failed.
func (s *Server) lookupWorkflow(ctx context.Context, providerTaskID string) (string, error) {
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
