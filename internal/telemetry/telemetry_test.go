package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestEnabledOnlyWithAnEndpointAndNotNone(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME"} {
			t.Setenv(k, c.env[k])
		}
		assert.Equal(t, c.want, Enabled(), c.env)
		_, flush, err := Setup(context.Background(), "test")
		require.NoError(t, err)
		require.NoError(t, flush(context.Background()))
	}
}

// OTEL_EXPORTER_OTLP_PROTOCOL picks the exporter; one autoexport does not know stops the process at start.
func TestSetupHonoursTheProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for protocol, ok := range map[string]bool{"http/protobuf": true, "grpc": true, "carrier-pigeon": false} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
		interceptors, flush, err := Setup(context.Background(), "test")
		if !ok {
			assert.Error(t, err, protocol)
			continue
		}
		require.NoError(t, err, protocol)
		assert.Len(t, interceptors, 1)
		require.NoError(t, flush(context.Background()), "nothing buffered: the shutdown sends nothing")
	}
}

// Every query leaves the exported span: url.query dropped, url.full, the status and an event's text cut.
func TestExportedSpansHoldNoQuery(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(scrubbing{mem}))
	_, s := tp.Tracer("t").Start(context.Background(), "captchaai get")
	s.SetAttributes(attribute.String("url.full", "https://h/res.php?key=SECRETKEY&action=get&id=7"),
		attribute.String("url.query", "t=TOKEN&code=THECODE"), attribute.String("url.path", "/res.php"), attribute.Int("n", 1))
	err := errors.New(`Get "https://h/res.php?key=SECRETKEY&id=7": dial tcp: refused`)
	s.RecordError(err)
	s.SetStatus(codes.Error, err.Error())
	s.End()
	spans := mem.GetSpans() // exported at End (a syncer); Shutdown would clear them
	require.Len(t, spans, 1)
	text := strings.Join(append([]string{spans[0].Status.Description}, flatten(spans[0])...), " ")
	for _, secret := range []string{"SECRETKEY", "TOKEN", "THECODE", "url.query"} {
		assert.NotContains(t, text, secret)
	}
	assert.Contains(t, text, "url.full=https://h/res.php?REDACTED")
	assert.Contains(t, text, "url.path=/res.php")
	assert.Contains(t, text, "n=1")
}

func flatten(s tracetest.SpanStub) (out []string) {
	attrs := s.Attributes
	for _, e := range s.Events {
		attrs = append(attrs, e.Attributes...)
	}
	for _, kv := range attrs {
		out = append(out, string(kv.Key)+"="+kv.Value.String())
	}
	return out
}

func TestLogLinesCarryTheTraceID(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler{slog.NewJSONHandler(&buf, nil)}).With("a", 1)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "with")
	log.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], `"trace_id":"01000000000000000000000000000000"`)
	assert.NotContains(t, lines[1], "trace_id")
}

func TestTraceparentRoundTrips(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	assert.Equal(t, tp, Traceparent(FromTraceparent(context.Background(), tp)))
	assert.Empty(t, Traceparent(context.Background()))
	assert.Empty(t, Traceparent(FromTraceparent(context.Background(), "not one")))
}

// A clean stop's flush is bounded whatever the collector or OTEL_BSP_EXPORT_TIMEOUT: a collector that takes the
// connection and never answers holds no process (worker, ingress, starter) past the bound.
func TestFlushIsBoundedWhenTheCollectorHangs(t *testing.T) {
	stuck := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stuck }))
	t.Cleanup(collector.Close)
	t.Cleanup(func() { close(stuck) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "60000")
	_, flush, err := Setup(context.Background(), "test")
	require.NoError(t, err)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	_, s := otel.Tracer("t").Start(context.Background(), "buffered")
	s.End()
	began := time.Now()
	assert.Error(t, flush(context.Background()), "the span was not exported")
	assert.Less(t, time.Since(began), 10*time.Second)
}

// An endpoint that is no URL stops the process at start, naming the variable: the SDK would log it and export to
// localhost instead.
func TestSetupRefusesAnEndpointThatIsNoURL(t *testing.T) {
	for _, bad := range []string{"collector:4318", "http://[::1", "::::", "/v1/traces"} {
		for _, key := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv(key, bad)
			_, _, err := Setup(context.Background(), "test")
			if assert.Error(t, err, bad) {
				assert.Contains(t, err.Error(), key)
			}
		}
	}
}

// A query's value may hold a quote or a space (a notify_url is the customer's): it is cut all the same, from
// url.full and from an error that quotes the URL (%q escapes the quote).
func TestAQueryWithQuotesOrSpacesIsCutWhole(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(scrubbing{mem}))
	for _, hook := range []string{`http://127.0.0.1:1/x?a="&secret=S1`, `http://127.0.0.1:1/x?a=b c&secret=S1`,
		`http://127.0.0.1:1/x?a='&secret=S1`} {
		_, s := tp.Tracer("t").Start(context.Background(), "deliver")
		s.SetAttributes(attribute.String("url.full", hook))
		_, err := http.Post(hook, "text/plain", strings.NewReader("")) // refused: its error quotes the URL
		require.Error(t, err)
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
		s.End()
	}
	spans := mem.GetSpans()
	require.Len(t, spans, 3)
	for _, sp := range spans {
		text := strings.Join(append([]string{sp.Status.Description}, flatten(sp)...), " ")
		assert.NotContains(t, text, "S1")
		assert.Contains(t, text, "url.full=http://127.0.0.1:1/x?REDACTED")
	}
}

// The SDK's own errors (an export that failed) are log records of the process's logger, not stray text lines.
func TestExportErrorsAreLogRecords(t *testing.T) {
	var buf bytes.Buffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(was) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	_, flush, err := Setup(context.Background(), "test")
	require.NoError(t, err)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	_, s := otel.Tracer("t").Start(context.Background(), "refused")
	s.End()
	_ = flush(context.Background())
	assert.Contains(t, buf.String(), `"level":"WARN","msg":"traces not exported"`)
}
