package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// callbackInfo is what the access log and the callbacks counter learn of one callback; never the token or query.
type callbackInfo struct {
	route, workflowID, providerTaskID string
	outcome                           string // set by the handler on success, derived from the error otherwise
}

const callbackInfoKey = "captchaflow.callback"

func callbackInfoOf(c echo.Context) *callbackInfo {
	info, _ := c.Get(callbackInfoKey).(*callbackInfo)
	return info
}

// callbackRoute marks a callback route for the access log and the counter, and answers 413 past the body limit. Not
// Echo's BodyLimit: it hands mime/multipart bytes past the limit, so a chunked body over it parsed; MaxBytesReader never.
func (s *Server) callbackRoute(route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(callbackInfoKey, &callbackInfo{route: route})
			if c.Request().ContentLength > s.bodyLimit {
				return echo.ErrStatusRequestEntityTooLarge
			}
			c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, s.bodyLimit)
			return next(c)
		}
	}
}

// nameSpan names the request's span by its route, never by its URL (which holds the token).
func nameSpan(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		span := trace.SpanFromContext(c.Request().Context())
		span.SetName(c.Request().Method + " " + c.Path())
		span.SetAttributes(attribute.String("http.route", c.Path()))
		return next(c)
	}
}

// accessLog logs each request by route pattern, never the URL (it holds the token), and counts callbacks by outcome:
// callbacks at Info, probes at Debug, a 503 at Warn (Temporal is out of reach; Error stays for bugs), other 5xx at Error.
func (s *Server) accessLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError: true, LogStatus: true, LogLatency: true, LogMethod: true, LogRoutePath: true, LogError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			log, level, msg := s.log.With("method", v.Method, "route", v.RoutePath, "status", v.Status,
				"duration_ms", float64(v.Latency.Microseconds())/1000), slog.LevelDebug, "request"
			if info := callbackInfoOf(c); info != nil {
				if v.Error != nil {
					info.outcome = resolveError(v.Error).Outcome
				}
				if info.outcome != "" && info.outcome != outcomeQueued {
					s.callbacks.WithLabelValues(info.route, info.outcome).Inc()
				}
				// client_ip tells an operator the provider's sources, for UNTOKENED_ALLOW_CIDRS.
				log, level, msg = log.With("callback_route", info.route, "client_ip", c.RealIP(),
					"workflow_id", info.workflowID, "provider_task_id", info.providerTaskID, "outcome", info.outcome),
					slog.LevelInfo, "callback"
			}
			if v.Error != nil {
				log, level = log.With("error", v.Error.Error()), max(level, slog.LevelInfo)
				switch {
				case v.Status == http.StatusServiceUnavailable:
					level = slog.LevelWarn
				case v.Status >= 500:
					level = slog.LevelError
				}
			}
			log.Log(context.WithoutCancel(c.Request().Context()), level, msg)
			return nil
		},
	})
}

// Callback routes, as the `route` label of the callbacks counter.
const (
	routeTokened   = "tokened"
	routeUntokened = "untokened"
)

// Callback outcomes, as the `outcome` label of the callbacks counter and the access log (docs/operations.md).
const (
	outcomeSignalled         = "signalled"
	outcomeLateOrUnknown     = "late_or_unknown"
	outcomeForged            = "forged"
	outcomeBadRequest        = "bad_request"
	outcomeUnavailable       = "unavailable"
	outcomeDuplicate         = "duplicate"
	outcomeSuppressed        = "suppressed"
	outcomeRateLimited       = "rate_limited"
	outcomeDropped           = "dropped"
	outcomeUntokenedRejected = "untokened_rejected"
	outcomeSourceRefused     = "source_refused"
	outcomeQueued            = "queued" // the access log's only: the queue counts an untokened callback's real outcome later
)

var outcomes = []string{
	outcomeSignalled, outcomeLateOrUnknown, outcomeForged, outcomeBadRequest, outcomeUnavailable, outcomeDuplicate,
	outcomeSuppressed, outcomeRateLimited, outcomeDropped, outcomeUntokenedRejected, outcomeSourceRefused,
}

// newMetrics registers the callback counter, the queue gauges and the HTTP middleware (by route and the status answered).
func newMetrics(reg prometheus.Registerer, q *jobQueue) (*prometheus.CounterVec, echo.MiddlewareFunc, error) {
	callbacks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "captchaflow_ingress_callbacks_total",
		Help: "Provider callbacks by route and outcome; an untokened one is counted when its background lookup ends."},
		[]string{"route", "outcome"})
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "captchaflow_ingress_untokened_queue_depth",
		Help: "Untokened callbacks accepted and waiting for their lookup."}, func() float64 { return float64(len(q.jobs)) })
	capacity := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "captchaflow_ingress_untokened_queue_capacity",
		Help: "INGRESS_UNTOKENED_QUEUE: past it untokened callbacks are answered 503 (outcome dropped)."},
		func() float64 { return float64(cap(q.jobs)) })
	for _, c := range []prometheus.Collector{callbacks, depth, capacity} {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	// Zeros instead of absent series, so alerts on rate() work from the start.
	for _, route := range []string{routeTokened, routeUntokened} {
		for _, outcome := range outcomes {
			callbacks.WithLabelValues(route, outcome)
		}
	}
	hm, err := echoprometheus.MiddlewareConfig{
		Namespace: "captchaflow", Subsystem: "ingress", Registerer: reg,
		DoNotUseRequestPathFor404: true, // a scanner's URLs must not become series
		// The Host header is the caller's: a constant keeps the label set bounded.
		LabelFuncs: map[string]echoprometheus.LabelValueFunc{"host": func(echo.Context, error) string { return "" }},
		StatusCodeResolver: func(c echo.Context, err error) int {
			if err != nil {
				return resolveError(err).Status
			}
			return c.Response().Status
		},
	}.ToMiddleware()
	return callbacks, hm, err
}
