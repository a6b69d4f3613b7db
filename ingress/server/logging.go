package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// callbackInfo is what the access log and the callbacks counter learn of one callback; never the token or query.
type callbackInfo struct {
	route, workflowID, providerTaskID string
	outcome                           string // set by the handler on success, derived from the error otherwise
}

const callbackInfoKey = "captchaflow.callback"

// outcomeQueued is the access log's outcome of an untokened callback whose real one the queue counts later.
const outcomeQueued = "queued"

func callbackInfoOf(c echo.Context) *callbackInfo {
	info, _ := c.Get(callbackInfoKey).(*callbackInfo)
	if info == nil {
		info = &callbackInfo{}
		c.Set(callbackInfoKey, info)
	}
	return info
}

// observeCallback settles a callback's outcome and counts it; outside the body limit, so a 413 counts too.
func (s *Server) observeCallback(route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			info := &callbackInfo{route: route}
			c.Set(callbackInfoKey, info)
			err := next(c)
			if err != nil {
				info.outcome = resolveError(err).outcome
			}
			if info.outcome != "" && info.outcome != outcomeQueued {
				s.metrics.callbacks.WithLabelValues(route, info.outcome).Inc()
			}
			return err
		}
	}
}

// accessLog writes one line per request with safe fields only: the route pattern, never the URL (it holds the
// token). Callbacks log at Info, probes and scrapes at Debug, a 503 at Warn, other 5xx at Error.
func (s *Server) accessLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError: true, LogStatus: true, LogLatency: true, LogMethod: true, LogRoutePath: true, LogError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			log, level, msg := s.log.With("method", v.Method, "route", v.RoutePath, "status", v.Status,
				"duration_ms", float64(v.Latency.Microseconds())/1000), slog.LevelDebug, "request"
			if info, ok := c.Get(callbackInfoKey).(*callbackInfo); ok {
				// client_ip tells an operator the provider's sources, for UNTOKENED_ALLOW_CIDRS.
				log, level, msg = log.With("callback_route", info.route, "client_ip", c.RealIP(),
					"workflow_id", info.workflowID, "provider_task_id", info.providerTaskID, "outcome", info.outcome),
					slog.LevelInfo, "callback"
			}
			if v.Error != nil {
				log = log.With("error", v.Error.Error())
				level = max(level, levelForStatus(v.Status))
			}
			log.Log(context.WithoutCancel(c.Request().Context()), level, msg)
			return nil
		},
	})
}

// levelForStatus keeps a Temporal outage (503) at Warn so Error stays for bugs.
func levelForStatus(status int) slog.Level {
	switch {
	case status == http.StatusServiceUnavailable:
		return slog.LevelWarn
	case status >= 500:
		return slog.LevelError
	}
	return slog.LevelInfo
}
