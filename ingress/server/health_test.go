package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHealthzDoesNotDependOnTemporal(t *testing.T) {
	e := newTestEnv(t)
	e.fake.healthFn = func(context.Context) error { return errors.New("down") }
	rec := e.get(t, "/healthz")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
}

func TestReadyzFollowsTemporalHealth(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, http.StatusOK, e.get(t, "/readyz").Code)

	e.fake.healthFn = func(context.Context) error { return errors.New("connection refused") }
	requireError(t, e.get(t, "/readyz"), http.StatusServiceUnavailable, "retry later")

	e.fake.healthFn = blockUntilDone
	start := time.Now()
	requireError(t, e.get(t, "/readyz"), http.StatusServiceUnavailable, "retry later")
	assert.Less(t, time.Since(start), 2*time.Second, "a hanging Temporal must not hang the probe")
}

func TestReadyzIsUnavailableWhileDraining(t *testing.T) {
	e := newTestEnv(t)
	e.srv.draining.Store(true)
	requireError(t, e.get(t, "/readyz"), http.StatusServiceUnavailable, "retry later")
}
