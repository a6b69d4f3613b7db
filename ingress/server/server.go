// Package server is the callback ingress: it turns provider callbacks (CaptchaAI GET, 2captcha-style form POST)
// into the SolveCaptcha workflow's captcha-callback signal. A tokened callback is answered 200 only once Temporal
// accepted its signal; an untokened one once it was queued (it is looked up and signalled in the background, so
// the answer does not tell whether the task exists). Every route expects hostile input: exact repeats and
// callbacks past a workflow's signal budget are answered 200 without a signal, and the untokened route is rate
// limited.
//
// Routes:
//
//	GET|POST /callback/:workflow_id?t=TOKEN  id, code in query or form; signal with Authenticated=true
//	GET|POST /callback?id=&code=             queue; resolve the workflow by CaptchaTaskId, signal with Authenticated=false
//	GET /healthz                             process up
//	GET /readyz                              Temporal reachable and not shutting down
//
// and, on a listener of its own (INGRESS_METRICS_ADDR), never on the public one:
//
//	GET /metrics                             Prometheus, from the registry passed to New
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/labstack/gommon/bytes"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
)

var errDraining = errors.New("shutting down")

// Server is the ingress HTTP server.
type Server struct {
	cfg      config.Ingress
	temporal TemporalClient
	log      *slog.Logger
	metrics  *metrics
	echo     *echo.Echo
	http     *http.Server
	// secrets are the callback secrets a token may be made with: the current one and, during a rotation, the
	// previous one.
	secrets []string
	// lookupDelay is how long after its arrival an untokened callback is looked up (untokenedLookupDelay; tests
	// shorten it).
	lookupDelay time.Duration
	bodyLimit   int64
	draining    atomic.Bool
	// now is the clock of the budgets and rate limits; tests replace it to step time.
	now func() time.Time

	// Hostile-input guards: see handleUntokenedCallback and handleTokenedCallback.
	clientLimit     *clientRateLimit
	allowSources    []*net.IPNet // UNTOKENED_ALLOW_CIDRS; empty serves every source
	seen            *seenCallbacks
	rejectedIDs     *seenCallbacks // provider task IDs whose untokened update the workflow rejected
	tokenedBudget   *signalBudget
	untokenedBudget *signalBudget
	queue           *jobQueue

	metricsHTTP    *http.Server // nil when INGRESS_METRICS_ADDR is empty
	metricsHandler http.Handler

	mu              sync.Mutex
	listener        net.Listener
	metricsListener net.Listener
}

// New builds the server and starts the untokened route's background workers; Serve (or Close, for a server that
// never serves) stops them. reg receives the HTTP and callback metrics and is served on the metrics listener; nil
// means a fresh registry.
func New(cfg config.Ingress, tc TemporalClient, log *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	if err := validate(cfg, tc); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &Server{
		cfg:             cfg,
		temporal:        tc,
		log:             log,
		secrets:         []string{cfg.CallbackSecret.Reveal(), cfg.CallbackSecretPrevious.Reveal()},
		lookupDelay:     untokenedLookupDelay,
		now:             time.Now,
		clientLimit:     newClientRateLimit(cfg.UntokenedRate, cfg.UntokenedRatePerIP),
		allowSources:    parseCIDRs(cfg.UntokenedAllowCIDRs),
		seen:            newSeenCallbacks(seenCallbackTTL),
		rejectedIDs:     newSeenCallbacks(rejectedHintTTL),
		tokenedBudget:   newSignalBudget(cfg.CallbackBurst, cfg.CallbackRefill),
		untokenedBudget: newSignalBudget(cfg.CallbackBurst, cfg.CallbackRefill),
	}
	var queueDepth atomic.Pointer[jobQueue] // the queue starts only once registration succeeded
	httpMetrics, err := s.registerMetrics(reg, &queueDepth)
	if err != nil {
		return nil, err
	}
	s.bodyLimit, _ = bytes.Parse(cfg.BodyLimit) // validated above
	s.echo = s.routes(httpMetrics, parseCIDRs(cfg.TrustedProxies))
	s.http = newHTTPServer(cfg, s.echo, log)
	s.metricsHandler = metricsMux(reg)
	if cfg.MetricsAddr != "" {
		s.metricsHTTP = newHTTPServer(cfg, s.metricsHandler, log)
	}
	s.queue = newJobQueue(cfg.UntokenedQueue, cfg.UntokenedWorkers, s.runUntokened)
	queueDepth.Store(s.queue)
	return s, nil
}

// registerMetrics registers the callback metrics (the untokened queue's depth read through queueDepth, which is
// empty until the queue starts) and returns the middleware that records the HTTP metrics.
func (s *Server) registerMetrics(reg *prometheus.Registry, queueDepth *atomic.Pointer[jobQueue]) (echo.MiddlewareFunc, error) {
	m, err := newMetrics(reg, func() float64 {
		if q := queueDepth.Load(); q != nil {
			return float64(q.depth())
		}
		return 0
	}, float64(s.cfg.UntokenedQueue))
	if err != nil {
		return nil, fmt.Errorf("registering ingress metrics: %w", err)
	}
	s.metrics = m
	httpMetrics, err := httpMetricsMiddleware(reg)
	if err != nil {
		return nil, fmt.Errorf("registering ingress HTTP metrics: %w", err)
	}
	return httpMetrics, nil
}

// newHTTPServer applies the configured timeouts to h, so the callback and the metrics listeners are bounded alike.
func newHTTPServer(cfg config.Ingress, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// metricsMux serves reg on GET /metrics and nothing else.
func metricsMux(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// parseCIDRs parses a list of CIDRs (INGRESS_TRUSTED_PROXIES, UNTOKENED_ALLOW_CIDRS) that validate accepted; blank
// entries are skipped.
func parseCIDRs(cidrs []string) []*net.IPNet {
	var nets []*net.IPNet
	for _, c := range cidrs {
		if _, n, err := net.ParseCIDR(strings.TrimSpace(c)); err == nil {
			nets = append(nets, n)
		}
	}
	return nets
}

// cidrProblems names every entry of a CIDR list variable that is not a CIDR; blank entries are allowed.
func cidrProblems(env string, cidrs []string) []string {
	var problems []string
	for _, c := range cidrs {
		if strings.TrimSpace(c) == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(strings.TrimSpace(c)); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q is not a CIDR like 10.0.0.0/8 (a single address is 192.0.2.1/32)", env, c))
		}
	}
	return problems
}

// validate reports every configuration problem at once, so a bad deployment is fixed in one round.
func validate(cfg config.Ingress, tc TemporalClient) error {
	var problems []string
	if tc == nil {
		problems = append(problems, "Temporal client is nil")
	}
	if cfg.CallbackSecret.Reveal() == "" {
		problems = append(problems, "CALLBACK_SECRET is empty")
	}
	if limit, err := bytes.Parse(cfg.BodyLimit); err != nil || limit <= 0 {
		problems = append(problems, fmt.Sprintf("INGRESS_BODY_LIMIT %q is not a positive size like 64K", cfg.BodyLimit))
	}
	for _, d := range []struct {
		env string
		val float64
	}{
		{"INGRESS_SIGNAL_TIMEOUT", float64(cfg.SignalTimeout)},
		{"INGRESS_LOOKUP_TIMEOUT", float64(cfg.LookupTimeout)},
		{"SHUTDOWN_TIMEOUT", float64(cfg.ShutdownTimeout)},
		{"INGRESS_UNTOKENED_RATE", cfg.UntokenedRate},
		{"INGRESS_UNTOKENED_RATE_PER_IP", cfg.UntokenedRatePerIP},
		{"INGRESS_UNTOKENED_QUEUE", float64(cfg.UntokenedQueue)},
		{"INGRESS_UNTOKENED_WORKERS", float64(cfg.UntokenedWorkers)},
		{"INGRESS_CALLBACK_BURST", float64(cfg.CallbackBurst)},
		{"INGRESS_CALLBACK_REFILL", float64(cfg.CallbackRefill)},
	} {
		if !(d.val > 0) { // also refuses NaN
			problems = append(problems, d.env+" must be positive")
		}
	}
	problems = append(problems, cidrProblems("INGRESS_TRUSTED_PROXIES", cfg.TrustedProxies)...)
	problems = append(problems, cidrProblems("UNTOKENED_ALLOW_CIDRS", cfg.UntokenedAllowCIDRs)...)
	if len(problems) > 0 {
		return fmt.Errorf("ingress: %s", strings.Join(problems, "; "))
	}
	return nil
}

// routes builds the Echo instance; the middleware order decides what the access log and the metrics see.
func (s *Server) routes(httpMetrics echo.MiddlewareFunc, proxies []*net.IPNet) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	// The client IP keys the per-IP limit, so a header must not be able to choose it: Echo's default believes
	// X-Forwarded-For from anyone. Only the configured proxies (none by default) may name the client.
	e.IPExtractor = echo.ExtractIPDirect()
	if len(proxies) > 0 {
		trust := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range proxies {
			trust = append(trust, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(trust...)
	}
	// Order: the access log and the metrics see the final status of everything, including recovered panics.
	e.Use(s.accessLog, httpMetrics, middleware.RecoverWithConfig(middleware.RecoverConfig{
		// Return the panic as an error so the access log and metrics see it and handleError answers it.
		DisableErrorHandler: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.Error("panic while serving", slog.String("route", c.Path()),
				slog.String("error", err.Error()), slog.String("stack", string(stack)))
			return err
		},
	}))

	callbackPath := strings.TrimSuffix(callbackauth.CallbackPath, "/")
	limit := bodyLimit(s.bodyLimit)
	methods := []string{http.MethodGet, http.MethodPost}
	e.Match(methods, callbackauth.CallbackPath+":workflow_id", s.handleTokenedCallback,
		s.observeCallback(routeTokened), limit)
	// An empty workflow ID gets a 400 naming it rather than a bare 404.
	e.Match(methods, callbackauth.CallbackPath, s.handleTokenedCallback,
		s.observeCallback(routeTokened), limit)
	e.Match(methods, callbackPath, s.handleUntokenedCallback,
		s.observeCallback(routeUntokened), limit)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	return e
}

// Handler is the public HTTP handler (callbacks and probes), for tests with httptest.
func (s *Server) Handler() http.Handler { return s.echo }

// MetricsHandler is what the metrics listener serves, for tests with httptest.
func (s *Server) MetricsHandler() http.Handler { return s.metricsHandler }

// Addr is the address the server listens on (with the real port when INGRESS_ADDR asked for port 0), or "" before
// Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// MetricsAddr is the address /metrics is served on, or "" before Listen and when INGRESS_METRICS_ADDR is empty.
func (s *Server) MetricsAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metricsListener == nil {
		return ""
	}
	return s.metricsListener.Addr().String()
}

// Listen binds INGRESS_ADDR and, unless it is empty, INGRESS_METRICS_ADDR; Serve then serves on them. Either
// failing to bind is an error naming its variable, and nothing stays bound.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return errors.New("ingress: already listening")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("ingress: listening on INGRESS_ADDR %q: %w", s.cfg.Addr, err)
	}
	if s.metricsHTTP != nil {
		mln, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("ingress: listening on INGRESS_METRICS_ADDR %q: %w", s.cfg.MetricsAddr, err)
		}
		s.metricsListener = mln
		s.log.Info("ingress metrics listening", slog.String("addr", mln.Addr().String()))
	}
	s.listener = ln
	s.log.Info("ingress listening", slog.String("addr", ln.Addr().String()))
	return nil
}

// ListenAndServe binds INGRESS_ADDR and serves until ctx is done, then shuts down gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Serve serves on the bound listeners until ctx is done. It then stops accepting connections, reports not ready,
// lets in-flight callbacks finish and drains the untokened queue, all within SHUTDOWN_TIMEOUT: a callback cut off
// mid-signal would make the provider retry or give up, and the result would only come through the slower poll.
// The metrics listener closes last, so a final scrape still sees the drain.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln, mln := s.listener, s.metricsListener
	s.mu.Unlock()
	if ln == nil {
		return errors.New("ingress: Serve called before Listen")
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- fmt.Errorf("ingress: serving: %w", s.http.Serve(ln)) }()
	if mln != nil {
		go func() { serveErr <- fmt.Errorf("ingress: serving metrics: %w", s.metricsHTTP.Serve(mln)) }()
	}

	var failed error
	select {
	case failed = <-serveErr:
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("ingress shutting down", slog.Duration("timeout", s.cfg.ShutdownTimeout))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if failed != nil {
		errs = append(errs, failed)
	}
	if err := s.http.Shutdown(shutdownCtx); err != nil {
		_ = s.http.Close()
		errs = append(errs, fmt.Errorf("ingress: graceful shutdown incomplete after %s: %w", s.cfg.ShutdownTimeout, err))
	}
	if err := s.queue.drain(shutdownCtx); err != nil {
		errs = append(errs, fmt.Errorf("ingress: untokened queue not drained within %s: %w", s.cfg.ShutdownTimeout, err))
	}
	if s.metricsHTTP != nil && mln != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := s.metricsHTTP.Shutdown(ctx); err != nil {
			_ = s.metricsHTTP.Close()
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.log.Info("ingress stopped")
	return nil
}

// Close stops the untokened queue's workers of a server that is not serving (tests, a failed Listen); queued
// callbacks still run within ctx.
func (s *Server) Close(ctx context.Context) error { return s.queue.drain(ctx) }
