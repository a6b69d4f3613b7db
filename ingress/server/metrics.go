package server

import (
	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	metricsNamespace = "captchaflow"
	metricsSubsystem = "ingress"
)

// Callback routes, as the `route` label of the callbacks counter.
const (
	routeTokened   = "tokened"
	routeUntokened = "untokened"
)

// Callback outcomes, as the `outcome` label of the callbacks counter and the access log.
const (
	outcomeSignalled     = "signalled"       // Temporal accepted the signal
	outcomeLateOrUnknown = "late_or_unknown" // no running workflow for it: already completed, or never existed
	outcomeForged        = "forged"          // missing or invalid token
	outcomeBadRequest    = "bad_request"     // missing/invalid field, unparsable or oversized body
	outcomeUnavailable   = "unavailable"     // Temporal unreachable, too slow or erroring; answered 503
)

type metrics struct {
	callbacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "callbacks_total",
			Help:      "Provider callbacks by route (tokened, untokened) and outcome.",
		}, []string{"route", "outcome"}),
	}
	if err := reg.Register(m.callbacks); err != nil {
		return nil, err
	}
	// Pre-initialise every combination so alerts on rate() see zeros instead of absent series.
	for _, route := range []string{routeTokened, routeUntokened} {
		for _, outcome := range []string{outcomeSignalled, outcomeLateOrUnknown, outcomeForged, outcomeBadRequest, outcomeUnavailable} {
			m.callbacks.WithLabelValues(route, outcome)
		}
	}
	return m, nil
}

// httpMetricsMiddleware counts and times every request by route pattern and status, using the same status the
// error handler will answer with (the middleware runs before the error handler writes the response).
func httpMetricsMiddleware(reg prometheus.Registerer) (echo.MiddlewareFunc, error) {
	return echoprometheus.MiddlewareConfig{
		Namespace:  metricsNamespace,
		Subsystem:  metricsSubsystem,
		Registerer: reg,
		// Unmatched paths must not create one series per URL a scanner tries.
		DoNotUseRequestPathFor404: true,
		LabelFuncs: map[string]echoprometheus.LabelValueFunc{
			// The Host header is caller-controlled: a constant keeps the label set bounded.
			"host": func(echo.Context, error) string { return "" },
		},
		StatusCodeResolver: func(c echo.Context, err error) int {
			if err != nil {
				return resolveError(err).status
			}
			return c.Response().Status
		},
	}.ToMiddleware()
}
