package server

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// callbackInfo is what the access log and the callbacks counter know about one callback. The handler fills it in
// as it learns; it never holds the token or the query string.
type callbackInfo struct {
	route          string
	workflowID     string
	providerTaskID string
	outcome        string // set by the handler on success; derived from the error otherwise
	// queued: an untokened callback handed to the background queue, which counts and logs its outcome later.
	queued bool
}

const callbackInfoKey = "captchaflow.callback"

// callbackInfoOf is the handler's way to fill in what the access log and the counter report about its callback.
func callbackInfoOf(c echo.Context) *callbackInfo {
	info, _ := c.Get(callbackInfoKey).(*callbackInfo)
	if info == nil {
		// Only reachable if a handler runs without observeCallback; keep it harmless.
		info = &callbackInfo{}
		c.Set(callbackInfoKey, info)
	}
	return info
}

// observeCallback wraps a callback route: it settles the outcome and counts it. It sits outside the body limit so
// an oversized body counts as bad_request.
func (s *Server) observeCallback(route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			info := &callbackInfo{route: route}
			c.Set(callbackInfoKey, info)
			err := next(c)
			if err != nil {
				info.outcome = resolveError(err).outcome
			}
			if info.outcome != "" {
				s.metrics.callbacks.WithLabelValues(route, info.outcome).Inc()
			}
			return err
		}
	}
}

// accessLog writes one line per request with safe fields only: the route pattern, never the URL or query (the
// callback token is in it). Callbacks log at Info (Warn/Error when they fail); probes and scrapes at Debug.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = resolveError(err).status
		}
		attrs := []slog.Attr{
			slog.String("method", c.Request().Method),
			slog.String("route", c.Path()),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		}
		level := slog.LevelDebug
		msg := "request"
		if info, ok := c.Get(callbackInfoKey).(*callbackInfo); ok {
			msg = "callback"
			level = slog.LevelInfo
			attrs = append(attrs,
				slog.String("callback_route", info.route),
				// The client, so an operator can learn the provider's callback sources (for UNTOKENED_ALLOW_CIDRS)
				// from the tokened callbacks it answered 200.
				slog.String("client_ip", c.RealIP()),
				slog.String("workflow_id", info.workflowID),
				slog.String("provider_task_id", info.providerTaskID),
				slog.String("outcome", cmp.Or(info.outcome, queuedLabel(info.queued))))
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
			level = max(level, levelForStatus(status))
		}
		s.log.LogAttrs(context.WithoutCancel(c.Request().Context()), level, msg, attrs...)
		return err
	}
}

// queuedLabel is the access log's outcome for a callback whose real outcome the background queue logs later.
func queuedLabel(queued bool) string {
	if queued {
		return "queued"
	}
	return ""
}

// levelForStatus keeps a Temporal outage (503) at Warn so Error stays for bugs.
func levelForStatus(status int) slog.Level {
	switch {
	case status == http.StatusServiceUnavailable:
		return slog.LevelWarn // expected while Temporal is down; the workflow's poll recovers
	case status >= 500:
		return slog.LevelError
	}
	return slog.LevelInfo
}
