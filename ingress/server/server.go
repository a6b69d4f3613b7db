// Package server is the callback ingress: it turns provider callbacks (CaptchaAI GET, 2captcha-style form POST,
// createTask JSON) into the SolveCaptcha workflow's captcha-callback signal, and bare untokened ones into the
// captcha-untokened-callback update. Every route expects hostile input (docs/security.md).
//
//	GET|POST /callback/:workflow_id?t=TOKEN  signal with Authenticated=true, 200 once Temporal took it
//	GET|POST /callback?id=&code=             200 once queued; looked up by CaptchaTaskId and hinted in the background
//	GET /healthz, GET /readyz                process up; Temporal reachable and not draining
//	GET /metrics                             on INGRESS_METRICS_ADDR only
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/labstack/gommon/bytes"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
)

type Server struct {
	cfg            config.Ingress
	temporal       client.Client
	log            *slog.Logger
	callbacks      *prometheus.CounterVec // captchaflow_ingress_callbacks_total{route,outcome}
	echo           *echo.Echo
	metricsHandler http.Handler
	secrets        []string // the current callback secret and, during a rotation, the previous one
	lookupDelay    time.Duration
	bodyLimit      int64
	draining       atomic.Bool
	now            func() time.Time // the clock of budgets and rate limits; tests step it

	clientLimit     *clientRateLimit
	allowSources    []*net.IPNet
	seen            ttlCache[struct{}] // hashes of callbacks handed over (never the code), for exact repeats
	rejectedIDs     ttlCache[struct{}] // provider task IDs whose untokened update the workflow rejected
	tokenedBudget   *limiters
	untokenedBudget *limiters
	queue           *jobQueue

	mu                sync.Mutex
	addr, metricsAddr string // bound, for port 0
}

// New builds the server; ListenAndServe drains its untokened queue.
func New(cfg config.Ingress, tc client.Client, log *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	bodyLimit, proxies, allow, err := parse(cfg, tc)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, temporal: tc, log: log, lookupDelay: untokenedLookupDelay, now: time.Now, bodyLimit: bodyLimit,
		secrets:         []string{cfg.CallbackSecret.Reveal(), cfg.CallbackSecretPrevious.Reveal()},
		clientLimit:     newClientRateLimit(cfg.UntokenedRate, cfg.UntokenedRatePerIP),
		allowSources:    allow,
		seen:            newTTLCache[struct{}](maxSeenCallbacks, seenCallbackTTL),
		rejectedIDs:     newTTLCache[struct{}](maxSeenCallbacks, rejectedHintTTL),
		tokenedBudget:   newSignalBudget(cfg.CallbackBurst, cfg.CallbackRefill),
		untokenedBudget: newSignalBudget(cfg.CallbackBurst, cfg.CallbackRefill),
		queue:           newJobQueue(cfg.UntokenedQueue, cfg.UntokenedWorkers),
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.metricsHandler = mux
	var hm echo.MiddlewareFunc
	if s.callbacks, hm, err = newMetrics(reg, s.queue); err != nil {
		return nil, fmt.Errorf("registering ingress metrics: %w", err)
	}
	s.echo = s.routes(hm, proxies)
	return s, nil
}

// parse checks cfg and parses its body limit and CIDRs, reporting every problem at once: one round fixes a deployment.
func parse(cfg config.Ingress, tc client.Client) (bodyLimit int64, proxies, allow []*net.IPNet, err error) {
	var problems []string
	add := func(bad bool, format string, args ...any) {
		if bad {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	add(tc == nil, "Temporal client is nil")
	add(cfg.CallbackSecret.Reveal() == "", "CALLBACK_SECRET is empty")
	bodyLimit, err = bytes.Parse(cfg.BodyLimit)
	add(err != nil || bodyLimit <= 0, "INGRESS_BODY_LIMIT %q is not a positive size like 64K", cfg.BodyLimit)
	for env, v := range map[string]float64{
		"INGRESS_SIGNAL_TIMEOUT": float64(cfg.SignalTimeout), "INGRESS_LOOKUP_TIMEOUT": float64(cfg.LookupTimeout),
		"SHUTDOWN_TIMEOUT": float64(cfg.ShutdownTimeout), "INGRESS_UNTOKENED_RATE": cfg.UntokenedRate,
		"INGRESS_UNTOKENED_RATE_PER_IP": cfg.UntokenedRatePerIP, "INGRESS_UNTOKENED_QUEUE": float64(cfg.UntokenedQueue),
		"INGRESS_UNTOKENED_WORKERS": float64(cfg.UntokenedWorkers), "INGRESS_CALLBACK_BURST": float64(cfg.CallbackBurst),
		"INGRESS_CALLBACK_REFILL": float64(cfg.CallbackRefill),
	} {
		add(!(v > 0), "%s must be positive", env) // also refuses NaN
	}
	cidrs := func(env string, list []string) (nets []*net.IPNet) {
		for _, c := range list {
			_, n, err := net.ParseCIDR(strings.TrimSpace(c))
			add(strings.TrimSpace(c) != "" && err != nil, "%s: %q is not a CIDR like 10.0.0.0/8 (a single address is 192.0.2.1/32)", env, c)
			if err == nil {
				nets = append(nets, n)
			}
		}
		return nets
	}
	proxies, allow = cidrs("INGRESS_TRUSTED_PROXIES", cfg.TrustedProxies), cidrs("UNTOKENED_ALLOW_CIDRS", cfg.UntokenedAllowCIDRs)
	if len(problems) > 0 {
		slices.Sort(problems)
		return 0, nil, nil, fmt.Errorf("ingress: %s", strings.Join(problems, "; "))
	}
	return bodyLimit, proxies, allow, nil
}

// routes builds the Echo instance; the access log and the metrics see the final status, recovered panics included.
func (s *Server) routes(httpMetrics echo.MiddlewareFunc, proxies []*net.IPNet) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// The client IP keys the per-IP limit: only the configured proxies (none by default) may name it.
	e.IPExtractor = echo.ExtractIPDirect()
	if len(proxies) > 0 {
		trust := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range proxies {
			trust = append(trust, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(trust...)
	}
	e.Use(nameSpan, s.accessLog(), httpMetrics, middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableErrorHandler: true, // the panic becomes an error the log, the metrics and handleError see
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.Error("panic while serving", "route", c.Path(), "error", err.Error(), "stack", string(stack))
			return err
		},
	}))
	methods := []string{http.MethodGet, http.MethodPost}
	tokened := s.callbackRoute(routeTokened)
	e.Match(methods, callbackauth.CallbackPath+":workflow_id", s.handleTokenedCallback, tokened)
	e.Match(methods, callbackauth.CallbackPath, s.handleTokenedCallback, tokened) // a 400 naming the empty ID
	e.Match(methods, strings.TrimSuffix(callbackauth.CallbackPath, "/"), s.handleUntokenedCallback,
		s.callbackRoute(routeUntokened))
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, accepted) })
	e.GET("/readyz", s.handleReadyz)
	return e
}

// handleReadyz says whether callbacks can be signalled now: Temporal answers and the server is not draining.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.draining.Load() {
		return unavailable(errDraining)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), min(2*time.Second, s.cfg.SignalTimeout))
	defer cancel()
	if _, err := s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return unavailable(err)
	}
	return c.JSON(http.StatusOK, accepted)
}

// ListenAndServe serves INGRESS_ADDR (and INGRESS_METRICS_ADDR) until ctx is done, then turns not ready and lets callbacks
// finish and the untokened queue drain within SHUTDOWN_TIMEOUT (a cut-off one waits for the poll); metrics close last.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("ingress: listening on INGRESS_ADDR %q: %w", s.cfg.Addr, err)
	}
	public, metrics := s.httpServer(s.traced(s.echo)), s.httpServer(s.metricsHandler)
	defer metrics.Close()
	serveErr := make(chan error, 2)
	if s.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("ingress: listening on INGRESS_METRICS_ADDR %q: %w", s.cfg.MetricsAddr, err)
		}
		s.bound(&s.metricsAddr, mln, "ingress metrics listening")
		go func() { serveErr <- fmt.Errorf("ingress: serving metrics: %w", metrics.Serve(mln)) }()
	}
	s.bound(&s.addr, ln, "ingress listening")
	go func() { serveErr <- fmt.Errorf("ingress: serving: %w", public.Serve(ln)) }()
	select {
	case err = <-serveErr:
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("ingress shutting down", slog.Duration("timeout", s.cfg.ShutdownTimeout))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if e := public.Shutdown(ctx); e != nil {
		_ = public.Close()
		err = errors.Join(err, fmt.Errorf("ingress: graceful shutdown incomplete after %s: %w", s.cfg.ShutdownTimeout, e))
	}
	if e := s.queue.drain(ctx); e != nil {
		err = errors.Join(err, fmt.Errorf("ingress: untokened queue not drained within %s: %w", s.cfg.ShutdownTimeout, e))
	}
	if err == nil {
		s.log.Info("ingress stopped")
	}
	return err
}

// bound records and logs the address ln is bound to (the real port for port 0).
func (s *Server) bound(addr *string, ln net.Listener, msg string) {
	s.mu.Lock()
	*addr = ln.Addr().String()
	s.mu.Unlock()
	s.log.Info(msg, "addr", ln.Addr().String())
}

// httpServer bounds h by the configured timeouts, alike for the callback and the metrics listeners.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
}

// Error is what handlers return: Status and Message go to the caller, Outcome labels the counter, Err is only logged.
type Error struct {
	Status     int
	Outcome    string
	Message    string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// unavailableRetryAfter is the hint sent with a 503; providers honour it, and the workflow polls anyway.
const unavailableRetryAfter = 5 * time.Second

const unavailableMessage = "temporarily unable to accept the callback, retry later"

var (
	errForged        = &Error{http.StatusForbidden, outcomeForged, "missing or invalid callback token", 0, nil}
	errSourceRefused = &Error{http.StatusForbidden, outcomeSourceRefused, "untokened callbacks are accepted only " +
		"from the provider's addresses (UNTOKENED_ALLOW_CIDRS); use the tokened callback URL", 0, nil}
	errQueueFull = &Error{http.StatusServiceUnavailable, outcomeDropped, unavailableMessage, unavailableRetryAfter,
		errors.New("untokened callback queue full")}
	errDraining = errors.New("shutting down")
)

// badRequest is input the provider must fix; the message names the field.
func badRequest(field, msg string) error {
	return &Error{Status: http.StatusBadRequest, Outcome: outcomeBadRequest, Message: field + ": " + msg}
}

// unavailable means Temporal did not take the callback in time: the provider may retry, and the poll recovers it.
func unavailable(cause error) error {
	return &Error{http.StatusServiceUnavailable, outcomeUnavailable, unavailableMessage, unavailableRetryAfter, cause}
}

func rateLimited(retryAfter time.Duration) error {
	return &Error{http.StatusTooManyRequests, outcomeRateLimited, "too many untokened callbacks, retry later", retryAfter, nil}
}

// resolveError is the one place an error becomes a response; an error not of ours is a bug: a bare 500.
func resolveError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if he, ok := errors.AsType[*echo.HTTPError](err); ok {
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		if he.Code < 500 {
			return &Error{Status: he.Code, Outcome: outcomeBadRequest, Message: msg} // an oversized body, mostly
		}
		return &Error{Status: he.Code, Message: msg}
	}
	return &Error{Status: http.StatusInternalServerError, Message: http.StatusText(http.StatusInternalServerError)}
}

// handleError is Echo's one HTTPErrorHandler: every error becomes {"error": "..."} with its status.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	r := resolveError(err)
	if r.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((r.RetryAfter+time.Second-1)/time.Second)))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(r.Status)
		return
	}
	_ = c.JSON(r.Status, echo.Map{"error": r.Message})
}
