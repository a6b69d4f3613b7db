package server

import (
	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

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
)

var outcomes = []string{
	outcomeSignalled, outcomeLateOrUnknown, outcomeForged, outcomeBadRequest, outcomeUnavailable, outcomeDuplicate,
	outcomeSuppressed, outcomeRateLimited, outcomeDropped, outcomeUntokenedRejected, outcomeSourceRefused,
}

type metrics struct {
	callbacks *prometheus.CounterVec
}

// newMetrics registers the callback counter, the untokened queue's gauges and the HTTP metrics' middleware, which
// counts and times every request by route pattern and the status the error handler will answer.
func newMetrics(reg prometheus.Registerer, q *jobQueue) (*metrics, echo.MiddlewareFunc, error) {
	m := &metrics{callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "captchaflow_ingress_callbacks_total",
		Help: "Provider callbacks by route and outcome; an untokened one is counted when its background lookup ends."},
		[]string{"route", "outcome"})}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "captchaflow_ingress_untokened_queue_depth",
		Help: "Untokened callbacks accepted and waiting for their lookup."}, func() float64 { return float64(len(q.jobs)) })
	capacity := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "captchaflow_ingress_untokened_queue_capacity",
		Help: "INGRESS_UNTOKENED_QUEUE: past it untokened callbacks are answered 503 (outcome dropped)."},
		func() float64 { return float64(cap(q.jobs)) })
	for _, c := range []prometheus.Collector{m.callbacks, depth, capacity} {
		if err := reg.Register(c); err != nil {
			return nil, nil, err
		}
	}
	// Zeros instead of absent series, so alerts on rate() work from the start.
	for _, route := range []string{routeTokened, routeUntokened} {
		for _, outcome := range outcomes {
			m.callbacks.WithLabelValues(route, outcome)
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
	return m, hm, err
}
