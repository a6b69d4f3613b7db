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
	outcomeSignalled     = "signalled"       // the workflow took it: Temporal accepted the signal, or the workflow the untokened update
	outcomeLateOrUnknown = "late_or_unknown" // no running workflow for it: already completed, or never existed
	outcomeForged        = "forged"          // missing or invalid token
	outcomeBadRequest    = "bad_request"     // missing/invalid field, unparsable or oversized body
	outcomeUnavailable   = "unavailable"     // Temporal unreachable, too slow or erroring; answered 503 (tokened)
	outcomeDuplicate     = "duplicate"       // an exact repeat of a callback already signalled; 200, no signal
	outcomeSuppressed    = "suppressed"      // over the workflow's (or provider task's) signal budget; 200, no signal
	outcomeRateLimited   = "rate_limited"    // untokened, over the global or per-client rate; answered 429
	outcomeDropped       = "dropped"         // untokened, the background queue was full; answered 503
	// outcomeUntokenedRejected: the workflow's validator refused the untokened update (the task is not waiting for
	// a callback, or the submission's UntokenedHintsPerSubmission are spent); no history event, answered 200 like any
	// accepted callback. Later ones for that provider task are suppressed without a lookup.
	outcomeUntokenedRejected = "untokened_rejected"
	// outcomeSourceRefused: untokened, the client is outside UNTOKENED_ALLOW_CIDRS; answered 403.
	outcomeSourceRefused = "source_refused"
)

// outcomes lists every outcome, for pre-initialising the counter.
var outcomes = []string{
	outcomeSignalled, outcomeLateOrUnknown, outcomeForged, outcomeBadRequest, outcomeUnavailable,
	outcomeDuplicate, outcomeSuppressed, outcomeRateLimited, outcomeDropped, outcomeUntokenedRejected, outcomeSourceRefused,
}

// How an untokened callback reached the workflow, as the `as` label of the untokened deliveries counter.
const (
	deliveredAsUpdate = "update" // the UntokenedUpdate, without the code
	deliveredAsSignal = "signal" // the CallbackSignal with the code: the workflow does not know the update (an older worker)
)

type metrics struct {
	callbacks *prometheus.CounterVec
	// untokenedDelivered counts untokened callbacks handed to a workflow, by how (deliveredAsUpdate, …): while it
	// counts signals, some workflows still run on a worker that predates the update.
	untokenedDelivered *prometheus.CounterVec
}

// newMetrics registers the callback counter and the untokened queue's gauges; queueDepth and queueCapacity read
// the live queue at scrape time.
func newMetrics(reg prometheus.Registerer, queueDepth func() float64, queueCapacity float64) (*metrics, error) {
	m := &metrics{
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "callbacks_total",
			Help: "Provider callbacks by route (tokened, untokened) and outcome. An untokened callback is counted " +
				"once, when its background lookup and signal finish (or when it is refused).",
		}, []string{"route", "outcome"}),
		untokenedDelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "untokened_delivered_total",
			Help: "Untokened callbacks handed to a workflow, by how: as=update (the captcha-untokened-callback " +
				"update, no code) or as=signal (the callback signal with its code, for a workflow that does not know the update).",
		}, []string{"as"}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "untokened_queue_depth",
		Help:      "Untokened callbacks accepted and waiting for their lookup and signal.",
	}, queueDepth)
	capacity := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "untokened_queue_capacity",
		Help:      "INGRESS_UNTOKENED_QUEUE: past it untokened callbacks are answered 503 (outcome dropped).",
	})
	capacity.Set(queueCapacity)
	for _, c := range []prometheus.Collector{m.callbacks, m.untokenedDelivered, depth, capacity} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Pre-initialise every combination so alerts on rate() see zeros instead of absent series.
	for _, route := range []string{routeTokened, routeUntokened} {
		for _, outcome := range outcomes {
			m.callbacks.WithLabelValues(route, outcome)
		}
	}
	for _, as := range []string{deliveredAsUpdate, deliveredAsSignal} {
		m.untokenedDelivered.WithLabelValues(as)
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
