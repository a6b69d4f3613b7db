package tests

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// span is one recorded span, flattened for the checks.
type span struct {
	trace, id, parent, name, service string
	start                            time.Time
	attrs                            map[string]string
	links                            []string // linked trace IDs
}

// otlpReceiver is a tiny OTLP trace receiver, over HTTP (srv) and gRPC (grpcAddr): it keeps every span and the raw
// text of every request.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	srv      *httptest.Server
	grpcAddr string
	mu       sync.Mutex
	spans    []span
	dump     strings.Builder // protojson of every request, for the secret scan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("want a protobuf ExportTraceServiceRequest at /v1/traces: %v", err), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(g, r)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	r.grpcAddr = ln.Addr().String()
	return r
}

func (r *otlpReceiver) Export(_ context.Context, msg *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(msg)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) add(msg *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dump.WriteString(protojson.Format(msg))
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(), service: service,
					start: time.Unix(0, int64(s.GetStartTimeUnixNano())), attrs: map[string]string{}}
				for _, kv := range s.GetAttributes() {
					sp.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
				}
				for _, l := range s.GetLinks() {
					sp.links = append(sp.links, hex.EncodeToString(l.GetTraceId()))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func (r *otlpReceiver) recorded() ([]span, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), r.dump.String()
}

// hookRecorder is a notify_url that records each delivery's traceparent header.
type hookRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	tp  map[string]string // webhook-id → traceparent
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{tp: map[string]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.mu.Lock()
		h.tp[req.Header.Get("webhook-id")] = req.Header.Get("traceparent")
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// TestE2E_OTelOneTracePerTask runs worker (OTLP/gRPC) and ingress (OTLP/HTTP) exporting to an OTLP receiver, with a batch delay no task
// outlasts (so the spans arrive by the SIGTERM flush), and checks the trace of a task polled after a dropped
// callback, of one solved by callback and delivered, and of a report on it: one trace per task from the caller's
// span, the provider calls with the provider's name and task ID, the callback under its submission, the delivery
// with a traceparent, and nothing secret in any span.
func TestE2E_OTelOneTracePerTask(t *testing.T) {
	server, err := devstack.TemporalServerPath()
	require.NoError(t, err)
	if _, err := os.Stat(server); err != nil && os.Getenv("CI") == "" {
		t.Skipf("e2e: temporal-server missing at %s", server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	recv, hooks := newOTLPReceiver(t), newHookRecorder(t)
	otelEnv := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY": "600000"} // 10 min: only the flush at SIGTERM exports
	// The worker exports over gRPC, the ingress and the caller over HTTP: both protocols on one trace.
	workerEnv := maps.Clone(otelEnv)
	workerEnv["OTEL_EXPORTER_OTLP_ENDPOINT"], workerEnv["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http://"+recv.grpcAddr, "grpc"
	run := fmt.Sprint(time.Now().UnixMilli() % 1e6)
	polledID, callbackID := "otel-polled-"+run, "otel-callback-"+run
	stack, err := devstack.Start(ctx, devstack.Options{RunDir: t.TempDir(), TemporalHeadless: true,
		WorkerEnv: workerEnv, IngressEnv: otelEnv, SimulatorEnv: map[string]string{"SIM_FAULT_RULES": "/callback/otel-polled-=>drop_pingback",
			"SIM_SOLVE_MIN": "200ms", "SIM_SOLVE_MAX": "400ms"}})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stack.Stop()
		}
	})

	// The caller: its own tracer provider, exporting to the same receiver, and the SDK's interceptor on its client.
	for k, v := range otelEnv {
		t.Setenv(k, v)
	}
	interceptors, flush, err := telemetry.Setup(ctx, "e2e-caller")
	require.NoError(t, err)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	c, err := client.DialContext(ctx, client.Options{HostPort: stack.Temporal.Address(), Namespace: devstack.DefaultNamespace,
		Interceptors: interceptors, Logger: devstack.QuietSDKLogger()})
	require.NoError(t, err)
	defer c.Close()

	in := func(callbackTimeout int) captchaflow.Input {
		return captchaflow.Input{Method: "userrecaptcha", CallbackTimeoutSeconds: callbackTimeout, PollIntervalSeconds: 1,
			Params: captchaflow.Params{"googlekey": "6Le-e2e-site-key", "pageurl": "https://shop.example.test/login?key=shop",
				"proxy": "user:span-proxy-secret@203.0.113.7:3128", "proxytype": "HTTP"},
			NotifyURL: hooks.srv.URL + "/hooks?secret=hook-query-secret", DeadlineSeconds: deadlineSeconds}
	}
	callerTrace := map[string]string{}
	codes := []string{}
	for _, task := range []struct {
		id      string
		timeout int
	}{{polledID, 2}, {callbackID, 60}} {
		cctx, caller := otel.Tracer("e2e").Start(ctx, "caller "+task.id)
		wr, err := captchaflow.Start(cctx, c, task.id, in(task.timeout))
		require.NoError(t, err)
		caller.End()
		callerTrace[task.id] = caller.SpanContext().TraceID().String()
		var res captchaflow.Result
		require.NoError(t, wr.Get(ctx, &res), task.id)
		codes = append(codes, res.Code)
	}
	rctx, reporter := otel.Tracer("e2e").Start(ctx, "caller report", trace.WithNewRoot())
	_, err = captchaflow.SendReport(rctx, c, callbackID, captchaflow.VerdictGood)
	reporter.End()
	require.NoError(t, err)

	require.NoError(t, flush(ctx))
	stopped = true
	require.NoError(t, stack.Stop()) // SIGTERM: the worker and the ingress flush what they hold
	spans, dump := recv.recorded()

	polled := checkTaskTrace(t, spans, polledID, callerTrace[polledID])
	cb := checkTaskTrace(t, spans, callbackID, callerTrace[callbackID])
	for name, tree := range map[string][]span{polledID: polled, callbackID: cb} {
		t.Logf("trace of %s:\n%s", name, renderTree(tree))
	}

	// The polled task: a poll with the provider's task ID, no callback at the ingress.
	poll := findSpan(t, polled, "RunActivity:Poll")
	assert.NotEmpty(t, poll.attrs["captchaflow.provider_task_id"])
	assert.Equal(t, findSpan(t, polled, "RunActivity:Submit").attrs["captchaflow.provider_task_id"], poll.attrs["captchaflow.provider_task_id"])
	assert.NotEmpty(t, childrenNamed(polled, poll.id, "captchaai get"), "the poll's HTTP call")
	assert.Empty(t, spansOf(polled, "captchaflow-ingress"), "the dropped callback never reached the ingress")

	// The callback task: the ingress's span under the submission, its signal, then the delivery.
	submit := findSpan(t, cb, "RunActivity:Submit")
	var callback span
	for _, s := range spansOf(cb, "captchaflow-ingress") {
		if strings.HasSuffix(s.name, "/callback/:workflow_id") {
			callback = s
		}
	}
	require.NotEmpty(t, callback.id, "the callback's span at the ingress is in the task's trace")
	assert.Equal(t, submit.id, callback.parent, "the callback's span is a child of the submission that handed out its URL")
	assert.Equal(t, callbackID, callback.attrs["captchaflow.workflow_id"])
	assert.Equal(t, submit.attrs["captchaflow.provider_task_id"], callback.attrs["captchaflow.provider_task_id"])
	assert.NotEmpty(t, childrenNamed(cb, callback.id, "SignalWorkflow:"+captchaflow.CallbackSignal), "the signal it became")
	deliver := findSpan(t, cb, "RunActivity:Deliver")
	assert.True(t, submit.start.Before(callback.start) && callback.start.Before(deliver.start), "submit, callback, delivery in order")
	post := childrenNamed(cb, deliver.id, "deliver")
	require.Len(t, post, 1, "the delivery's HTTP call")
	hooks.mu.Lock()
	tps := slices.Collect(func(yield func(string) bool) {
		for _, tp := range hooks.tp {
			yield(tp)
		}
	})
	hooks.mu.Unlock()
	assert.Contains(t, tps, "00-"+callerTrace[callbackID]+"-"+post[0].id+"-01", "the webhook carries the delivery's traceparent")

	// The report has a trace of its own, linked to the task's.
	reportID, _ := captchaflow.ReportWorkflowID(callbackID)
	report := byWorkflow(spans, reportID)
	require.NotEmpty(t, report)
	assert.NotEqual(t, callerTrace[callbackID], report[0].trace)
	lookup := findSpan(t, report, "RunActivity:LookupReportTarget")
	assert.Contains(t, lookup.links, callerTrace[callbackID])
	t.Logf("trace of the report on %s (LookupReportTarget links %v):\n%s", callbackID, lookup.links, renderTree(sameTrace(spans, report[0].trace)))

	// Log lines carry the trace ID: the worker's activity lines and the ingress's callback line.
	for _, p := range []*devstack.Process{stack.Worker(), stack.Ingress()} {
		b, err := os.ReadFile(p.LogPath())
		require.NoError(t, err)
		assert.Contains(t, string(b), `"trace_id":"`+callerTrace[callbackID]+`"`, p.Name())
	}

	// Nothing secret in any span: the API key, the callback secret, a token, a code, a query's values.
	secrets := map[string]string{"the API key": stack.ProviderAPIKey(), "the callback secret": stack.CallbackSecret(),
		"the notify secret": stack.NotifySecret(), "notify_url's query": "hook-query-secret", "the input's pageurl query": "key=shop",
		"the proxy's password": "span-proxy-secret"}
	for i, code := range codes {
		secrets[fmt.Sprintf("code %d", i)] = code
	}
	for name, secret := range secrets {
		assert.False(t, strings.Contains(dump, secret), "a recorded span holds %s", name)
	}
	assert.False(t, regexp.MustCompile(`[0-9a-f]{64}`).MatchString(dump), "a recorded span holds a callback token")
	for _, s := range spans {
		for _, key := range []string{"url.query", "http.target"} {
			assert.NotContains(t, s.attrs, key, s.name)
		}
		assert.NotContains(t, []string{"GET /readyz", "GET /healthz"}, s.name, "probes are not traced")
	}
}

// checkTaskTrace asserts one trace for the task, the caller's, and returns its spans.
func checkTaskTrace(t *testing.T, spans []span, workflowID, callerTrace string) []span {
	t.Helper()
	own := byWorkflow(spans, workflowID)
	require.NotEmpty(t, own, workflowID)
	tree := sameTrace(spans, callerTrace)
	for _, s := range own {
		assert.Equal(t, callerTrace, s.trace, "%s: span %s is in another trace", workflowID, s.name)
	}
	for _, name := range []string{"caller " + workflowID, "StartWorkflow:" + captchaflow.WorkflowType, "RunWorkflow:" + captchaflow.WorkflowType,
		"RunActivity:Submit", "RunActivity:Deliver"} {
		findSpan(t, tree, name)
	}
	submit := findSpan(t, tree, "RunActivity:Submit")
	assert.Equal(t, "captchaai", submit.attrs["captchaflow.provider"])
	assert.NotEmpty(t, submit.attrs["captchaflow.provider_task_id"])
	assert.Equal(t, workflowID, submit.attrs["captchaflow.workflow_id"])
	calls := childrenNamed(tree, submit.id, "captchaai submit")
	require.NotEmpty(t, calls, "the submission's HTTP call to the provider")
	deliver := childrenNamed(tree, findSpan(t, tree, "RunActivity:Deliver").id, "deliver")
	require.NotEmpty(t, deliver, "the delivery's HTTP call")
	for _, call := range []span{calls[0], deliver[0]} {
		assert.Equal(t, workflowID, call.attrs["captchaflow.workflow_id"], call.name)
	}
	assert.Equal(t, "captchaai", calls[0].attrs["captchaflow.provider"])
	return tree
}

func sameTrace(spans []span, traceID string) (out []span) {
	for _, s := range spans {
		if s.trace == traceID {
			out = append(out, s)
		}
	}
	return out
}

// byWorkflow is the spans naming workflowID (Temporal's tag or ours).
func byWorkflow(spans []span, workflowID string) (out []span) {
	for _, s := range spans {
		if s.attrs["temporalWorkflowID"] == workflowID || s.attrs["captchaflow.workflow_id"] == workflowID {
			out = append(out, s)
		}
	}
	return out
}

func findSpan(t *testing.T, spans []span, name string) span {
	t.Helper()
	for _, s := range spans {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return span{}
}

func childrenNamed(spans []span, parent, name string) (out []span) {
	for _, s := range spans {
		if s.parent == parent && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

func spansOf(spans []span, service string) (out []span) {
	for _, s := range spans {
		if s.service == service {
			out = append(out, s)
		}
	}
	return out
}

// renderTree prints a trace as an indented tree, children by start time, with the offset from the root's start.
func renderTree(spans []span) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.id] = true
	}
	var b bytes.Buffer
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s] +%s", strings.Repeat("  ", depth), s.name, s.service, s.start.Sub(spans[0].start).Round(time.Millisecond))
		for _, k := range []string{"captchaflow.provider", "captchaflow.provider_task_id", "captchaflow.workflow_id"} {
			if v := s.attrs[k]; v != "" {
				fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "captchaflow."), v)
			}
		}
		b.WriteString("\n")
		for _, c := range spans {
			if c.parent == s.id {
				walk(c, depth+1)
			}
		}
	}
	for _, s := range spans {
		if !ids[s.parent] {
			walk(s, 0)
		}
	}
	return b.String()
}
