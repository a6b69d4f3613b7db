package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
)

// readyCheckTimeout bounds the Temporal health check behind /readyz, so a probe never hangs on a dead frontend.
const readyCheckTimeout = 2 * time.Second

// handleHealthz says the process is up and serving HTTP; it does not depend on Temporal.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, okBody{Status: "ok"})
}

// handleReadyz says whether callbacks can be signalled now: Temporal answers its health check and the server is
// not draining.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.draining.Load() {
		return unavailable(errDraining)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), min(readyCheckTimeout, s.cfg.SignalTimeout))
	defer cancel()
	if _, err := s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return unavailable(err)
	}
	return c.JSON(http.StatusOK, okBody{Status: "ok"})
}
