// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// variables and holds the few helpers pinstore's hand-written spans use.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED is not
// true). Off, the global tracer provider stays OpenTelemetry's no-op one
// and On reports false, so call sites skip their spans with one atomic
// load: a request allocates nothing for tracing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of pinstore's own spans.
const Name = "github.com/pinstore/pinstore"

var on atomic.Bool

// On reports whether tracing is set up: spans are worth starting.
func On() bool { return on.Load() }

// Configured reports whether the environment getenv reads asks for
// tracing: an OTLP endpoint is set and the SDK is not disabled.
func Configured(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup starts tracing when the environment asks for it (Configured):
// spans go in batches over OTLP/HTTP to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// else OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces, sampled as
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG say (default:
// parentbased_always_on), from a service named by OTEL_SERVICE_NAME
// (default: service). The variables are read through getenv, so a test
// can give them; the exporter's other OTEL_EXPORTER_OTLP_* settings
// (headers, timeout, compression) it reads from the process environment
// itself. It returns the shutdown that flushes the spans still queued;
// when tracing stays off, a shutdown that does nothing.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	if !Configured(getenv) {
		return nothing, nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = strings.TrimRight(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	sampler, err := samplerFrom(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nothing, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nothing, fmt.Errorf("tracing: %w", err)
	}
	if name := getenv("OTEL_SERVICE_NAME"); name != "" {
		service = name
	}
	res, err := resource.New(ctx,
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nothing, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(requestRooted{sampler}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// requestRooted is a sampler that drops client spans without a parent
// (a Redis command of a background loop, such as the object cache's
// heartbeat): the spans worth sampling start at a request or an
// operation's own span, and their children follow their decision. The
// span of queued work (Queued) follows its links: it is sampled when a
// request it is linked to was.
type requestRooted struct{ sdktrace.Sampler }

func (s requestRooted) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	parent := trace.SpanContextFromContext(p.ParentContext)
	if !parent.IsValid() {
		switch p.Kind {
		case trace.SpanKindClient:
			return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: parent.TraceState()}
		case trace.SpanKindConsumer:
			for _, l := range p.Links {
				if l.SpanContext.IsSampled() {
					return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
				}
			}
		}
	}
	return s.Sampler.ShouldSample(p)
}

func (s requestRooted) Description() string { return "RequestRooted{" + s.Sampler.Description() + "}" }

// samplerFrom is the sampler OTEL_TRACES_SAMPLER (name) and
// OTEL_TRACES_SAMPLER_ARG (arg, a ratio for the traceidratio samplers,
// default 1) name; "" is parentbased_always_on.
func samplerFrom(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch strings.TrimSpace(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	}
	return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER %q is not a sampler pinstore knows", name)
}

// Tracer is pinstore's tracer, from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// StartRequest starts the server span of r, the child of the span its
// traceparent header names when the client sent one. Its name is the
// method until EndRequest names the route.
func StartRequest(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return Tracer().Start(ctx, r.Method, serverKind)
}

var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// EndRequest names the request's span by its route template and ends it
// with its status and the kind of principal it acted as ("" when none).
func EndRequest(span trace.Span, method, route string, status int, principalKind string) {
	if !span.IsRecording() { // not sampled: nothing to name
		span.End()
		return
	}
	span.SetName(method + " " + route)
	span.SetAttributes(
		attribute.String("http.request.method", method),
		attribute.String("http.route", route),
		attribute.Int("http.response.status_code", status),
	)
	if principalKind != "" {
		span.SetAttributes(attribute.String("pinstore.principal.kind", principalKind))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// Child starts a span named name under the span in ctx, when that span
// is recording; otherwise it returns ctx and a nil span, at no cost. End
// a non-nil span only.
func Child(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !on.Load() || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return Tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Fail records err on span, when both are non-nil.
func Fail(span trace.Span, err error) {
	if span != nil && err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "error")
	}
}

// StatementKind is the first word of a SQL text (SELECT, INSERT, ...):
// never its values, which travel as placeholders anyway.
func StatementKind(q string) string {
	q = strings.TrimLeft(q, " \t\n(")
	if i := strings.IndexAny(q, " \t\n("); i >= 0 {
		q = q[:i]
	}
	return strings.ToUpper(q)
}

// TraceID is the id of the trace of the span in ctx, "" when there is
// none.
func TraceID(span trace.Span) string {
	if span == nil {
		return ""
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
