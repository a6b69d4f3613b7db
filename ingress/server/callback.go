package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
)

type okBody struct {
	Status string `json:"status"`
}

// The same body for every accepted callback: an untokened caller must not learn whether a task exists.
var accepted = okBody{Status: "ok"}

// handleTokenedCallback serves /callback/:workflow_id?t=TOKEN. The token proves the caller knows the callback
// secret, so the signal is marked Authenticated. Even so, every signal lands in the workflow's history, so an
// exact repeat is answered without one and the workflow's signal budget caps the rest: a leaked token cannot
// push a workflow past Temporal's history limits.
func (s *Server) handleTokenedCallback(c echo.Context) error {
	info := callbackInfoOf(c)
	workflowID, err := url.PathUnescape(c.Param("workflow_id"))
	if err != nil {
		return badRequest("workflow_id", "not a valid path segment")
	}
	if err := captchaflow.ValidateWorkflowID(workflowID); err != nil {
		return badRequest("workflow_id", err.Error())
	}
	info.workflowID = workflowID
	// The token is checked before the body is read: a forger gets nothing parsed.
	sub, err := s.checkToken(c, workflowID)
	if err != nil {
		return err
	}
	id, code, err := tokenedFields(c)
	info.providerTaskID = id
	if err != nil {
		return err
	}
	now := s.now()
	key := callbackKey(routeTokened, workflowID, id, code)
	if s.seen.seen(key, now) {
		info.outcome = outcomeDuplicate
		return c.JSON(http.StatusOK, accepted)
	}
	if !s.tokenedBudget.take(workflowID, now) {
		info.outcome = outcomeSuppressed
		return c.JSON(http.StatusOK, accepted)
	}
	sigCtx, cancel := signalContext(c)
	defer cancel()
	info.outcome, err = s.signal(sigCtx, workflowID, captchaflow.Callback{
		ProviderTaskID: id,
		Code:           code,
		Authenticated:  true,
		RunID:          sub.RunID,
		Submission:     sub.N,
		ReceivedAt:     now,
	})
	if err != nil {
		// Temporal did not take it: the provider's retry must find the budget as it was.
		s.tokenedBudget.refund(workflowID, s.now())
		return err
	}
	s.seen.add(key, s.now())
	return c.JSON(http.StatusOK, accepted)
}

// checkToken verifies the URL's token: over the run and submission when the URL names them, else over the workflow
// ID alone (pingback URLs made before URLs named their submission).
func (s *Server) checkToken(c echo.Context, workflowID string) (callbackauth.Submission, error) {
	token := c.QueryParam(callbackauth.TokenParam)
	run, n := c.QueryParam(callbackauth.RunParam), c.QueryParam(callbackauth.SubmissionParam)
	if run == "" && n == "" {
		if !callbackauth.Valid(token, workflowID, s.secrets...) {
			return callbackauth.Submission{}, forbiddenError{}
		}
		return callbackauth.Submission{}, nil
	}
	num, err := strconv.Atoi(n)
	if err != nil || num < 1 || num > maxSubmissionNumber || len(run) > maxRunIDBytes {
		return callbackauth.Submission{}, forbiddenError{} // nothing signed can look like this
	}
	sub := callbackauth.Submission{RunID: run, N: num}
	if !callbackauth.ValidFor(token, workflowID, sub, s.secrets...) {
		return callbackauth.Submission{}, forbiddenError{}
	}
	return sub, nil
}

// Bounds on what a named pingback URL can carry: far above any real run ID or submission count.
const (
	maxSubmissionNumber = 10000
	maxRunIDBytes       = 64
)

// signal delivers cb to the workflow and answers only once Temporal accepted it (or said there is no such running
// workflow). Anything else is unavailable: the provider may retry and the workflow's poll recovers regardless.
func (s *Server) signal(ctx context.Context, workflowID string, cb captchaflow.Callback) (outcome string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SignalTimeout)
	defer cancel()
	err = s.temporal.SignalWorkflow(ctx, workflowID, "", captchaflow.CallbackSignal, cb)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return outcomeSignalled, nil
	case errors.As(err, &notFound):
		// Completed, timed out or never existed: nothing is waiting for this result, so a retry cannot help.
		return outcomeLateOrUnknown, nil
	}
	return "", unavailable(err)
}
