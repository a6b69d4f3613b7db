// Package telemetry decides whether and how the processes export traces: off unless an OTLP endpoint is set, then by the
// standard OTEL_* variables (autoexport, the batch processor, the service name); spans are scrubbed of URL queries first.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.temporal.io/api/common/v1"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// endpointVars name the OTLP endpoints; either turns tracing on.
var endpointVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// Enabled: an OTLP endpoint is set and OTEL_TRACES_EXPORTER is not "none".
func Enabled() bool {
	return os.Getenv("OTEL_TRACES_EXPORTER") != "none" && slices.ContainsFunc(endpointVars, func(k string) bool { return os.Getenv(k) != "" })
}

// Setup installs the tracer provider when Enabled; it returns the client interceptors and the flush (bounded at 5 s).
func Setup(ctx context.Context, service string) ([]interceptor.ClientInterceptor, func(context.Context) error, error) {
	if !Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	for _, k := range endpointVars { // the SDK would log a bad one and export to localhost; its value may hold credentials
		if u, err := url.Parse(os.Getenv(k)); err != nil || (u.Host == "" && u.String() != "") {
			return nil, nil, fmt.Errorf("%s is not a URL such as http://collector:4318", k)
		}
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, err
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read last, override the default name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv())
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(scrubbing{exp}), sdktrace.WithResource(res)) // OTEL_BSP_*
	otel.SetTracerProvider(tp)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { slog.Warn("traces not exported", "error", err) }))
	t, err := temporalotel.NewTracer(temporalotel.TracerOptions{DisableBaggage: true, HeaderKey: headerKey})
	if err != nil {
		return nil, nil, err
	}
	flush := func(ctx context.Context) error { // within a bound a stuck collector cannot stretch (the SDK's: 30 s or more)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	}
	return []interceptor.ClientInterceptor{interceptor.NewTracingInterceptor(tracer{t})}, flush, nil
}

// headerKey names the Temporal header that carries a workflow's or an activity's trace context.
const headerKey = "_tracer-data"

// LinkStarter links ctx's span to the trace a workflow was started in, read from its start event's header (a span
// drops the invalid link of an untraced start).
func LinkStarter(ctx context.Context, header *commonpb.Header) {
	trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: StarterSpan(header)})
}

// StarterSpan is the span that started a workflow, from its start event's header (invalid without tracing).
func StarterSpan(header *commonpb.Header) trace.SpanContext {
	var data map[string]string
	if p := header.GetFields()[headerKey]; p == nil || converter.GetDefaultDataConverter().FromPayload(p, &data) != nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(FromTraceparent(context.Background(), data["traceparent"]))
}

// Round records refresh round n (started until now) as a span under the run's, once, outside replay: it adds no command.
func Round(ctx workflow.Context, n int, started time.Time, err error) {
	run, ok := temporalotel.SpanFromWorkflowContext(ctx)
	if !ok || workflow.IsReplaying(ctx) {
		return
	}
	_, span := run.TracerProvider().Tracer("captchaflow").Start(trace.ContextWithSpan(context.Background(), run),
		"refresh "+strconv.Itoa(n), trace.WithTimestamp(started), trace.WithAttributes(attribute.Int("captchaflow.refresh", n),
			attribute.String("captchaflow.workflow_id", workflow.GetInfo(ctx).WorkflowExecution.ID)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(workflow.Now(ctx)))
}

// tracer is the SDK's, its loggers keyed trace_id like every other log line.
type tracer struct{ interceptor.Tracer }

func (tracer) GetLogger(l log.Logger, ref interceptor.TracerSpanRef) log.Logger {
	if s, ok := ref.(interface{ SpanContext() trace.SpanContext }); ok && s.SpanContext().IsValid() {
		return log.With(l, "trace_id", s.SpanContext().TraceID().String())
	}
	return l
}

// Traceparent is the W3C traceparent of ctx's span, "" without one.
func Traceparent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// FromTraceparent is ctx with tp's remote span as its parent (ctx unchanged if tp is no traceparent).
func FromTraceparent(ctx context.Context, tp string) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// Annotate names the task, provider and provider task ID (non-empty ones) on ctx's span and its requests' (Transport).
func Annotate(ctx context.Context, workflowID, provider, providerTaskID string) context.Context {
	attrs, _ := ctx.Value(taskKey{}).([]attribute.KeyValue)
	for k, v := range map[string]string{"captchaflow.workflow_id": workflowID, "captchaflow.provider": provider,
		"captchaflow.provider_task_id": providerTaskID} {
		if v != "" {
			attrs = append(slices.Clip(attrs), attribute.String(k, v))
		}
	}
	trace.SpanFromContext(ctx).SetAttributes(attrs...)
	return context.WithValue(ctx, taskKey{}, attrs)
}

type taskKey struct{}

// Transport is base with a client span per request, named by name, naming the task (Annotate), sending prop's headers.
func Transport(base http.RoundTripper, prop propagation.TextMapPropagator, name func(*http.Request) string) http.RoundTripper {
	annotated := roundTripper(func(r *http.Request) (*http.Response, error) {
		attrs, _ := r.Context().Value(taskKey{}).([]attribute.KeyValue)
		// url.full names the host only: a path may be a secret (a Slack or Discord webhook's); the span's name says the call.
		attrs = append(slices.Clip(attrs), attribute.String("url.full", r.URL.Scheme+"://"+r.URL.Host+"/REDACTED"))
		trace.SpanFromContext(r.Context()).SetAttributes(attrs...) // the request's own span: otelhttp's
		return base.RoundTrip(r)
	})
	return otelhttp.NewTransport(annotated, otelhttp.WithPropagators(prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return name(r) }))
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// LogHandler adds the trace_id of the record's context to every record.
type LogHandler struct{ slog.Handler }

func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h LogHandler) WithAttrs(a []slog.Attr) slog.Handler { return LogHandler{h.Handler.WithAttrs(a)} }
func (h LogHandler) WithGroup(name string) slog.Handler   { return LogHandler{h.Handler.WithGroup(name)} }

// query is a URL's query in any text, to the end of the text or of the %q quoting it (an error quoting a request):
// res.php's key=, a callback's t= and code=, a notify_url's own, whatever they hold.
var query = regexp.MustCompile(`\?(?:[^"\\=]|\\.)*=(?:[^"\\]|\\.)*`)

// scrubbing drops url.query and cuts every query out of the other strings of a span (attributes, status, events).
type scrubbing struct{ sdktrace.SpanExporter }

func (e scrubbing) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		stub := tracetest.SpanStubFromReadOnlySpan(s)
		stub.Attributes = scrub(stub.Attributes)
		stub.Status.Description = query.ReplaceAllString(stub.Status.Description, "?REDACTED")
		for j := range stub.Events {
			stub.Events[j].Attributes = scrub(stub.Events[j].Attributes)
		}
		out[i] = stub.Snapshot()
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

func scrub(attrs []attribute.KeyValue) []attribute.KeyValue {
	out := attrs[:0:0]
	for _, kv := range attrs {
		switch {
		case kv.Key == "url.query" || kv.Key == "http.target":
			continue
		case kv.Key == "url.full" || kv.Key == "http.url": // all URL: its query goes whole, a raw quote in it too
			if bare, _, cut := strings.Cut(kv.Value.AsString(), "?"); cut {
				kv.Value = attribute.StringValue(bare + "?REDACTED")
			}
		case kv.Value.Type() == attribute.STRING:
			kv.Value = attribute.StringValue(query.ReplaceAllString(kv.Value.AsString(), "?REDACTED"))
		}
		out = append(out, kv)
	}
	return out
}
