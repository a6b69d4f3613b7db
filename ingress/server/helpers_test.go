package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
)

const (
	testSecret         = "current-secret-0123456789abcdef"
	testPreviousSecret = "previous-secret-fedcba9876543210"
	testWorkflowID     = "task-42.a_b:c"
	testRunID          = "0190f3b2-test-run"
)

func testConfig() config.Ingress {
	return config.Ingress{
		Addr:              "127.0.0.1:0",
		CallbackSecret:    testSecret,
		SignalTimeout:     200 * time.Millisecond,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       2 * time.Second,
		WriteTimeout:      2 * time.Second,
		IdleTimeout:       2 * time.Second,
		ShutdownTimeout:   5 * time.Second,
		BodyLimit:         "1K",
		LookupTimeout:     300 * time.Millisecond,
		MetricsAddr:       "127.0.0.1:0",
		// Generous, so only the tests about limits meet them.
		UntokenedRate:      10000,
		UntokenedRatePerIP: 10000,
		UntokenedQueue:     64,
		UntokenedWorkers:   2,
		CallbackBurst:      4,
		CallbackRefill:     30 * time.Second,
	}
}

// sentSignal is one SignalWorkflow call the fake received.
type sentSignal struct {
	WorkflowID, RunID, Name string
	Callback                captchaflow.Callback
}

// sentUpdate is one UpdateWorkflow call the fake received.
type sentUpdate struct {
	WorkflowID, Name string
	Stage            client.WorkflowUpdateStage
	Hint             captchaflow.UntokenedHint
}

// fakeTemporal records calls; its behaviour is set per test through the func fields.
type fakeTemporal struct {
	client.Client // the ingress calls only the methods below
	mu            sync.Mutex
	signals       []sentSignal
	updates       []sentUpdate
	queries       []string

	signalFn func(ctx context.Context) error
	// updateFn decides an update: an error from the call, or the rejection its handle holds (nil: accepted). Unset,
	// every update is accepted.
	updateFn func(ctx context.Context, u sentUpdate) (rejection, err error)
	listFn   func(ctx context.Context, call int) (*workflowservice.ListWorkflowExecutionsResponse, error)
	healthFn func(ctx context.Context) error
}

func (f *fakeTemporal) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	cb, _ := arg.(captchaflow.Callback)
	if cb.Authenticated && cb.ReceivedAt.IsZero() {
		return errors.New("a tokened callback without received_at") // a token's life counts from it
	}
	cb.ReceivedAt = time.Time{} // the tests compare what was sent, not the clock
	f.mu.Lock()
	f.signals = append(f.signals, sentSignal{WorkflowID: workflowID, RunID: runID, Name: signalName, Callback: cb})
	fn := f.signalFn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx)
	}
	return nil
}

func (f *fakeTemporal) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	u := sentUpdate{WorkflowID: o.WorkflowID, Name: o.UpdateName, Stage: o.WaitForStage}
	if len(o.Args) == 1 {
		u.Hint, _ = o.Args[0].(captchaflow.UntokenedHint)
	}
	f.mu.Lock()
	f.updates = append(f.updates, u)
	fn := f.updateFn
	f.mu.Unlock()
	if fn == nil {
		return fakeUpdateHandle{}, nil
	}
	rejection, err := fn(ctx, u)
	if err != nil {
		return nil, err
	}
	return fakeUpdateHandle{rejection: rejection}, nil
}

// fakeUpdateHandle behaves as the SDK's handle at WorkflowUpdateStageAccepted: a rejected update's Get returns its
// failure at once, an accepted one's waits for the handler's result.
type fakeUpdateHandle struct{ rejection error }

func (fakeUpdateHandle) WorkflowID() string { return "" }
func (fakeUpdateHandle) RunID() string      { return "" }
func (fakeUpdateHandle) UpdateID() string   { return "" }
func (h fakeUpdateHandle) Get(ctx context.Context, _ any) error {
	if h.rejection != nil {
		return h.rejection
	}
	<-ctx.Done()
	return client.NewWorkflowUpdateServiceTimeoutOrCanceledError(ctx.Err())
}

// handedTo counts the callbacks handed to workflowID, as signals or untokened updates ("" counts every workflow).
func (f *fakeTemporal) handedTo(workflowID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.signals {
		if workflowID == "" || s.WorkflowID == workflowID {
			n++
		}
	}
	for _, u := range f.updates {
		if workflowID == "" || u.WorkflowID == workflowID {
			n++
		}
	}
	return n
}

func (f *fakeTemporal) sentUpdates() []sentUpdate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentUpdate(nil), f.updates...)
}

func (f *fakeTemporal) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	f.queries = append(f.queries, req.GetQuery())
	call := len(f.queries)
	fn := f.listFn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, call)
	}
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

func (f *fakeTemporal) CheckHealth(ctx context.Context, _ *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	if f.healthFn != nil {
		if err := f.healthFn(ctx); err != nil {
			return nil, err
		}
	}
	return &client.CheckHealthResponse{}, nil
}

func (f *fakeTemporal) sent() []sentSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentSignal(nil), f.signals...)
}

func (f *fakeTemporal) listQueries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// blockUntilDone is a Temporal call that never answers: only the caller's deadline ends it.
func blockUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

type testEnv struct {
	srv  *Server
	fake *fakeTemporal
	reg  *prometheus.Registry
	logs *syncBuffer
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestEnv(t testing.TB, mutate ...func(*config.Ingress)) *testEnv {
	t.Helper()
	cfg := testConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	env := &testEnv{fake: &fakeTemporal{}, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(cfg, env.fake, log, env.reg)
	require.NoError(t, err)
	srv.lookupDelay = 0
	env.srv = srv
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return env
}

// drainQueue waits until every untokened callback accepted so far has been looked up, signalled and counted.
func (e *testEnv) drainQueue(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.srv.queue.drain(ctx))
}

// do sends a request through the handler. contentType "" sends no body.
func (e *testEnv) do(t testing.TB, method, target string, body io.Reader, contentType string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	return rec
}

func (e *testEnv) get(t testing.TB, target string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, http.MethodGet, target, nil, "")
}

func (e *testEnv) callbacks(route, outcome string) float64 {
	return testutil.ToFloat64(e.srv.callbacks.WithLabelValues(route, outcome))
}

func tokenedURL(workflowID, secret string, query url.Values) string {
	return submissionURL(workflowID, secret, 1, query)
}

// submissionURL is the pingback URL of submission n of testRunID.
func submissionURL(workflowID, secret string, n int, query url.Values) string {
	if query == nil {
		query = url.Values{}
	}
	if secret != "" {
		query.Set(callbackauth.RunParam, testRunID)
		query.Set(callbackauth.SubmissionParam, strconv.Itoa(n))
		query.Set(callbackauth.TokenParam, callbackauth.TokenFor(secret, workflowID, callbackauth.Submission{RunID: testRunID, N: n}))
	}
	return callbackauth.CallbackPath + url.PathEscape(workflowID) + "?" + query.Encode()
}

func multipartBody(t testing.TB, fields map[string]string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(t, w.WriteField(k, v))
	}
	require.NoError(t, w.Close())
	return &buf, w.FormDataContentType()
}

func formBody(fields url.Values) io.Reader { return strings.NewReader(fields.Encode()) }

// requireError asserts a JSON error response with status that mentions want.
func requireError(t testing.TB, rec *httptest.ResponseRecorder, status int, want string) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0])
	require.Contains(t, rec.Body.String(), `"error":`)
	require.Contains(t, rec.Body.String(), want)
}

// metricsText is the /metrics exposition of the metrics listener.
func (s *Server) metricsText(t testing.TB) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// Handler is the public HTTP handler (callbacks and probes).
func (s *Server) Handler() http.Handler { return s.echo }

// MetricsHandler serves /metrics as the metrics listener does.
func (s *Server) MetricsHandler() http.Handler { return s.metricsHandler }

// Addr and MetricsAddr are the bound addresses (the real port for port 0), "" before listening.
func (s *Server) Addr() string { s.mu.Lock(); defer s.mu.Unlock(); return s.addr }

func (s *Server) MetricsAddr() string { s.mu.Lock(); defer s.mu.Unlock(); return s.metricsAddr }

// Close drains the untokened queue of a server that never served; queued callbacks still run within ctx.
func (s *Server) Close(ctx context.Context) error { return s.queue.drain(ctx) }
