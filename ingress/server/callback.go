package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// The same body for every accepted callback: an untokened caller must not learn whether a task exists.
var accepted = map[string]string{"status": "ok"}

const (
	createTaskAckWithin                = 1500 * time.Millisecond // CapMonster drops a callback's connection after 2 s (the poll recovers one)
	maxSubmissionNumber, maxRunIDBytes = 10000, 64               // what a pingback URL can name: far above any real count or run ID
)

// handleTokenedCallback signals /callback/:workflow_id?t=TOKEN; repeats and callbacks past the budget get no signal.
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
	sub, ok := s.submissionOf(workflowID, c.QueryParams()) // before the body: a forger gets nothing parsed
	if !ok {
		return errForged
	}
	flavor := c.QueryParam(callbackauth.FlavorParam)
	id, code, err := callbackFields(c, flavor)
	info.providerTaskID = id
	telemetry.Annotate(c.Request().Context(), workflowID, sub.Provider, id)
	if err != nil {
		return err
	}
	// Repeats and the budget are per submission: CapMonster's callbacks name no task, so two submissions' can match.
	now, submission := s.now(), workflowID+"\x00"+sub.RunID+"\x00"+strconv.Itoa(sub.N)+"\x00"+sub.Provider
	key := callbackKey(routeTokened, submission, id, code)
	switch {
	case s.seen.has(key, now):
		info.outcome = outcomeDuplicate
	case !s.tokenedBudget.take(submission, now):
		info.outcome = outcomeSuppressed
	default:
		wait := s.cfg.SignalTimeout
		if flavor != "" {
			wait = min(wait, createTaskAckWithin)
		}
		// Answered once Temporal took the signal or said no such workflow runs; else a 503 (the poll recovers anyway).
		ctx, cancel := context.WithTimeout(c.Request().Context(), wait)
		defer cancel()
		err = s.temporal.SignalWorkflow(ctx, workflowID, "", captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: id,
			Code: code, Authenticated: true, RunID: sub.RunID, Submission: sub.N, Provider: sub.Provider, ReceivedAt: now})
		if info.outcome = outcomeOf(err); info.outcome == outcomeUnavailable {
			s.tokenedBudget.refund(submission, s.now()) // the provider's retry finds the budget as it was
			return unavailable(err)
		}
		s.seen.add(key, s.now())
	}
	return c.JSON(http.StatusOK, accepted)
}

// submissionOf is the submission a tokened callback's query names, ok only if its token signs it.
func (s *Server) submissionOf(workflowID string, q url.Values) (callbackauth.Submission, bool) {
	run, provider := q.Get(callbackauth.RunParam), q.Get(callbackauth.ProviderParam)
	n, err := strconv.Atoi(q.Get(callbackauth.SubmissionParam))
	sub := callbackauth.Submission{RunID: run, N: n, Provider: provider, Trace: q.Get(callbackauth.TraceParam)}
	return sub, err == nil && n >= 1 && n <= maxSubmissionNumber && run != "" && len(run) <= maxRunIDBytes && // nothing signed looks so
		(provider == "" || captchaflow.ProviderNamePattern.MatchString(provider)) &&
		callbackauth.ValidFor(q.Get(callbackauth.TokenParam), workflowID, sub, s.secrets...)
}

// traced is h in a span; a tokened callback's is a child of the submission whose signed URL carries its trace.
func (s *Server) traced(h http.Handler) http.Handler {
	none := propagation.NewCompositeTextMapPropagator() // a caller's trace headers are not trusted
	// The global provider: by default otelhttp takes a remote parent's, which records nothing.
	h = otelhttp.NewHandler(h, "ingress", otelhttp.WithPropagators(none), otelhttp.WithTracerProvider(otel.GetTracerProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { // the callback routes, not the probes
			return strings.HasPrefix(r.URL.Path, strings.TrimSuffix(callbackauth.CallbackPath, "/"))
		}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.URL.EscapedPath(), callbackauth.CallbackPath)
		if id, err := url.PathUnescape(raw); ok && err == nil && r.URL.Query().Get(callbackauth.TraceParam) != "" {
			if sub, ok := s.submissionOf(id, r.URL.Query()); ok {
				r = r.WithContext(telemetry.FromTraceparent(r.Context(), sub.Trace))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// callbackFields is callback.Parse of c (flavor "": the in.php pingback); a refusal is a 413 or a 400 naming the field.
func callbackFields(c echo.Context, flavor string) (id, code string, err error) {
	res, err := callback.Parse(c.Request(), callback.Flavor(flavor))
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge { // however wrapped
		return "", "", echo.ErrStatusRequestEntityTooLarge
	}
	if err != nil {
		err = &Error{Status: http.StatusBadRequest, Outcome: outcomeBadRequest, Message: err.Error()}
	}
	return res.TaskID, res.Code, err
}
