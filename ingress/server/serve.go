package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
)

// ListenAndServe binds INGRESS_ADDR and, unless empty, INGRESS_METRICS_ADDR, and serves until ctx is done. It then
// reports not ready, lets in-flight callbacks finish and drains the untokened queue within SHUTDOWN_TIMEOUT (a
// callback cut off mid-signal would only come through the slower poll); the metrics listener closes last.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("ingress: listening on INGRESS_ADDR %q: %w", s.cfg.Addr, err)
	}
	public, metrics := s.httpServer(s.echo), s.httpServer(s.metricsHandler)
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
	var errs []error
	select {
	case err := <-serveErr:
		errs = append(errs, err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("ingress shutting down", slog.Duration("timeout", s.cfg.ShutdownTimeout))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := public.Shutdown(ctx); err != nil {
		_ = public.Close()
		errs = append(errs, fmt.Errorf("ingress: graceful shutdown incomplete after %s: %w", s.cfg.ShutdownTimeout, err))
	}
	if err := s.queue.drain(ctx); err != nil {
		errs = append(errs, fmt.Errorf("ingress: untokened queue not drained within %s: %w", s.cfg.ShutdownTimeout, err))
	}
	if len(errs) == 0 {
		s.log.Info("ingress stopped")
	}
	return errors.Join(errs...)
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
