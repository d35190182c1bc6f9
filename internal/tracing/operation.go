package tracing

import (
	"bytes"
	"context"
	"io"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Operation starts the root span of a long command of the control plane
// (a move of shards, a failover, a backup), when tracing is on: each line
// the command writes to progress (its phases and steps, as the operator
// reads them) becomes an event on the span, at the time it was written.
// It returns the context, the writer the command should use for progress,
// and end, which ends the span with the command's error. Off, it returns
// ctx, progress and an end that does nothing.
func Operation(ctx context.Context, name string, progress io.Writer) (context.Context, io.Writer, func(error)) {
	if !on.Load() {
		return ctx, progress, func(error) {}
	}
	ctx, span := Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	w := &eventWriter{w: progress, span: span}
	return ctx, w, func(err error) {
		w.flush()
		Fail(span, err)
		span.End()
	}
}

// eventWriter passes writes on and adds each whole line as an event.
type eventWriter struct {
	w    io.Writer
	span trace.Span
	mu   sync.Mutex
	buf  []byte
}

func (e *eventWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	e.buf = append(e.buf, p...)
	for {
		i := bytes.IndexByte(e.buf, '\n')
		if i < 0 {
			break
		}
		e.event(string(e.buf[:i]))
		e.buf = e.buf[i+1:]
	}
	e.mu.Unlock()
	return e.w.Write(p)
}

func (e *eventWriter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.buf) > 0 {
		e.event(string(e.buf))
		e.buf = nil
	}
}

func (e *eventWriter) event(line string) {
	if line != "" {
		e.span.AddEvent("progress", trace.WithAttributes(attribute.String("pinstore.progress", line)))
	}
}
