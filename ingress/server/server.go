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

// Server is the ingress HTTP server.
type Server struct {
	cfg            config.Ingress
	temporal       client.Client
	log            *slog.Logger
	metrics        *metrics
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
	if s.metrics, hm, err = newMetrics(reg, s.queue); err != nil {
		return nil, fmt.Errorf("registering ingress metrics: %w", err)
	}
	s.echo = s.routes(hm, proxies)
	return s, nil
}

// parse checks cfg and parses its body limit and CIDRs (blank entries skipped); it reports every problem at once,
// so a bad deployment is fixed in one round.
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
	e.Use(s.accessLog(), httpMetrics, middleware.RecoverWithConfig(middleware.RecoverConfig{
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

// asBodyTooLarge turns the reader's over-limit error, however wrapped, into its 413; nil for any other error.
func asBodyTooLarge(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return echo.ErrStatusRequestEntityTooLarge
	}
	return nil
}
