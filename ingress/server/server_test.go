package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/internal/config"
)

// serve runs ListenAndServe on a free port and returns its base URL, a stop function and Serve's result.
func serve(t *testing.T, e *testEnv) (baseURL string, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	result, finished := make(chan error, 1), make(chan struct{})
	go func() {
		result <- e.srv.ListenAndServe(ctx)
		close(finished)
	}()
	require.Eventually(t, func() bool { return e.srv.Addr() != "" }, 5*time.Second, 5*time.Millisecond)
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return "http://" + e.srv.Addr(), cancel, result
}

func TestListenOnPortZeroReportsTheRealAddress(t *testing.T) {
	e := newTestEnv(t)
	assert.Empty(t, e.srv.Addr())
	base, stop, done := serve(t, e)
	assert.NotContains(t, e.srv.Addr(), ":0")
	assert.Contains(t, e.logs.String(), e.srv.Addr(), "the listen address is logged")

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestListenFailsOnABusyAddress(t *testing.T) {
	first := newTestEnv(t)
	serve(t, first)
	second := newTestEnv(t, func(c *config.Ingress) { c.Addr = first.srv.Addr() })
	err := second.srv.ListenAndServe(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INGRESS_ADDR")
}

// inFlightSignal makes the fake's SignalWorkflow block until released, reporting when it started.
func inFlightSignal(e *testEnv) (started <-chan struct{}, release chan<- struct{}) {
	startedCh, releaseCh := make(chan struct{}), make(chan struct{})
	e.fake.signalFn = func(ctx context.Context) error {
		close(startedCh)
		select {
		case <-releaseCh:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return startedCh, releaseCh
}

func TestGracefulShutdownLetsAnInFlightCallbackFinish(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.SignalTimeout = 10 * time.Second })
	started, release := inFlightSignal(e)
	base, stop, done := serve(t, e)

	status := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}))
		if err != nil {
			status <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-started
	stop()
	require.Eventually(t, e.srv.draining.Load, 5*time.Second, 5*time.Millisecond)
	assert.Never(t, func() bool { return len(done) > 0 }, 100*time.Millisecond, 10*time.Millisecond,
		"Serve returned while a callback was in flight")

	close(release)
	select {
	case code := <-status:
		assert.Equal(t, http.StatusOK, code)
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight callback never answered")
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	assert.Equal(t, 1.0, e.callbacks(routeTokened, outcomeSignalled))
}

func TestShutdownGivesUpAfterTheTimeout(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.SignalTimeout = 10 * time.Second
		c.ShutdownTimeout = 100 * time.Millisecond
	})
	started, release := inFlightSignal(e)
	defer close(release)
	base, stop, done := serve(t, e)
	go func() {
		resp, err := http.Get(base + tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {"x"}}))
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-started
	stop()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop after SHUTDOWN_TIMEOUT")
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	cases := map[string]struct {
		mutate func(*config.Ingress)
		want   string
	}{
		"body limit":     {func(c *config.Ingress) { c.BodyLimit = "lots" }, "INGRESS_BODY_LIMIT"},
		"signal timeout": {func(c *config.Ingress) { c.SignalTimeout = 0 }, "INGRESS_SIGNAL_TIMEOUT"},
		"lookup timeout": {func(c *config.Ingress) { c.LookupTimeout = -time.Second }, "INGRESS_LOOKUP_TIMEOUT"},
		"shutdown":       {func(c *config.Ingress) { c.ShutdownTimeout = 0 }, "SHUTDOWN_TIMEOUT"},
		"secret":         {func(c *config.Ingress) { c.CallbackSecret = "" }, "CALLBACK_SECRET"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			tc.mutate(&cfg)
			_, err := New(cfg, &fakeTemporal{}, nil, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), testSecret)
		})
	}
	_, err := New(testConfig(), nil, nil, nil)
	require.ErrorContains(t, err, "Temporal client")
}

func TestNewTwiceOnOneRegistryIsAnErrorNotAPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New(testConfig(), &fakeTemporal{}, nil, reg)
	require.NoError(t, err)
	_, err = New(testConfig(), &fakeTemporal{}, nil, reg)
	require.Error(t, err)
}

func TestMetricsAreServedOnTheirOwnListener(t *testing.T) {
	e := newTestEnv(t)
	base, _, _ := serve(t, e)
	require.NotEmpty(t, e.srv.MetricsAddr())
	assert.NotEqual(t, e.srv.Addr(), e.srv.MetricsAddr())
	assert.Contains(t, e.logs.String(), e.srv.MetricsAddr(), "the metrics address is logged")

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get("http://" + e.srv.MetricsAddr() + "/metrics")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "captchaflow_ingress_callbacks_total")
	status, _ = get(base + "/metrics")
	assert.Equal(t, http.StatusNotFound, status, "the public listener does not serve /metrics")
	for _, probe := range []string{"/healthz", "/readyz"} {
		status, _ = get(base + probe)
		assert.Equal(t, http.StatusOK, status, probe)
	}
}

func TestBusyMetricsAddrFailsNamingItAndBindsNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	e := newTestEnv(t, func(c *config.Ingress) { c.MetricsAddr = busy.Addr().String() })
	err = e.srv.ListenAndServe(context.Background())
	require.ErrorContains(t, err, "INGRESS_METRICS_ADDR")
	assert.Empty(t, e.srv.Addr(), "the public listener was closed again")
}

func TestEmptyMetricsAddrDisablesTheMetricsListener(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.MetricsAddr = "" })
	serve(t, e)
	assert.NotEmpty(t, e.srv.Addr())
	assert.Empty(t, e.srv.MetricsAddr())
}
