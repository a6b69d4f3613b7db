// Package server is the callback ingress: it turns provider callbacks (CaptchaAI GET, 2captcha-style form POST)
// into the SolveCaptcha workflow's captcha-callback signal, answering 200 only once Temporal accepted it.
//
// Routes:
//
//	GET|POST /callback/:workflow_id?t=TOKEN  id, code in query or form; signal with Authenticated=true
//	GET|POST /callback?id=&code=             resolve the workflow by CaptchaTaskId; signal with Authenticated=false
//	GET /healthz                             process up
//	GET /readyz                              Temporal reachable and not shutting down
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

	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/labstack/gommon/bytes"
	"github.com/prometheus/client_golang/prometheus"

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
	secrets       []string
	lookupBackoff time.Duration
	bodyLimit     int64
	draining      atomic.Bool

	mu       sync.Mutex
	listener net.Listener
}

// New builds the server. reg receives the HTTP and callback metrics and is served on /metrics; nil means a fresh
// registry.
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
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering ingress metrics: %w", err)
	}
	httpMetrics, err := httpMetricsMiddleware(reg)
	if err != nil {
		return nil, fmt.Errorf("registering ingress HTTP metrics: %w", err)
	}
	s := &Server{
		cfg:           cfg,
		temporal:      tc,
		log:           log,
		metrics:       m,
		secrets:       []string{cfg.CallbackSecret.Reveal(), cfg.CallbackSecretPrevious.Reveal()},
		lookupBackoff: lookupFirstBackoff,
	}
	s.bodyLimit, _ = bytes.Parse(cfg.BodyLimit) // validated above
	s.echo = s.routes(httpMetrics, reg)
	s.http = &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s, nil
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
		val time.Duration
	}{
		{"INGRESS_SIGNAL_TIMEOUT", cfg.SignalTimeout},
		{"INGRESS_LOOKUP_TIMEOUT", cfg.LookupTimeout},
		{"SHUTDOWN_TIMEOUT", cfg.ShutdownTimeout},
	} {
		if d.val <= 0 {
			problems = append(problems, d.env+" must be positive")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("ingress: %s", strings.Join(problems, "; "))
	}
	return nil
}

// routes builds the Echo instance; the middleware order decides what the access log and the metrics see.
func (s *Server) routes(httpMetrics echo.MiddlewareFunc, reg *prometheus.Registry) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
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
	e.GET("/metrics", echoprometheus.NewHandlerWithConfig(echoprometheus.HandlerConfig{Gatherer: reg}))
	return e
}

// Handler is the HTTP handler, for tests with httptest.
func (s *Server) Handler() http.Handler { return s.echo }

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

// Listen binds INGRESS_ADDR; Serve then serves on it.
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

// Serve serves on the bound listener until ctx is done. It then stops accepting connections, reports not ready and
// lets in-flight callbacks finish within SHUTDOWN_TIMEOUT: a callback cut off mid-signal would make the provider
// retry or give up, and the result would only come through the slower poll.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln := s.listener
	s.mu.Unlock()
	if ln == nil {
		return errors.New("ingress: Serve called before Listen")
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("ingress: serving: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("ingress shutting down", slog.Duration("timeout", s.cfg.ShutdownTimeout))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(shutdownCtx); err != nil {
		_ = s.http.Close()
		return fmt.Errorf("ingress: graceful shutdown incomplete after %s: %w", s.cfg.ShutdownTimeout, err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ingress: serving: %w", err)
	}
	s.log.Info("ingress stopped")
	return nil
}
