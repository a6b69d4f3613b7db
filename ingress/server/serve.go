package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ListenAndServe binds INGRESS_ADDR and, unless empty, INGRESS_METRICS_ADDR, and serves until ctx is done. It then
// reports not ready, lets in-flight callbacks finish and drains the untokened queue within SHUTDOWN_TIMEOUT (a
// callback cut off mid-signal would only come through the slower poll); the metrics listener closes last.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, mln, err := s.listen()
	if err != nil {
		return err
	}
	public, metrics := s.httpServer(s.echo), s.httpServer(s.metricsHandler)
	serveErr := make(chan error, 2)
	go func() { serveErr <- fmt.Errorf("ingress: serving: %w", public.Serve(ln)) }()
	if mln != nil {
		go func() { serveErr <- fmt.Errorf("ingress: serving metrics: %w", metrics.Serve(mln)) }()
	}
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
	if mln != nil {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if metrics.Shutdown(mctx) != nil {
			_ = metrics.Close()
		}
	}
	if len(errs) == 0 {
		s.log.Info("ingress stopped")
	}
	return errors.Join(errs...)
}

// listen binds both addresses or neither; an error names its variable.
func (s *Server) listen() (ln, mln net.Listener, err error) {
	if ln, err = net.Listen("tcp", s.cfg.Addr); err != nil {
		return nil, nil, fmt.Errorf("ingress: listening on INGRESS_ADDR %q: %w", s.cfg.Addr, err)
	}
	if s.cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			_ = ln.Close()
			return nil, nil, fmt.Errorf("ingress: listening on INGRESS_METRICS_ADDR %q: %w", s.cfg.MetricsAddr, err)
		}
		s.log.Info("ingress metrics listening", "addr", mln.Addr().String())
	}
	s.mu.Lock()
	s.addr = ln.Addr().String()
	if mln != nil {
		s.metricsAddrBound = mln.Addr().String()
	}
	s.mu.Unlock()
	s.log.Info("ingress listening", "addr", ln.Addr().String())
	return ln, mln, nil
}

// httpServer bounds h by the configured timeouts, alike for the callback and the metrics listeners.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
