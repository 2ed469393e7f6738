package otlp

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel/trace"
)

// idsKey is the context key of the IDs a span is to get.
type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs asks idGenerator for these IDs for the span started with ctx.
func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{t, s})
}

// idGenerator gives a span the IDs withIDs put in its context (derived
// from the write, so that every agent derives the same ones), else
// random IDs.
type idGenerator struct{}

// NewIDs returns the trace and span ID of a root span.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	var s trace.SpanID
	_, _ = rand.Read(t[:])
	_, _ = rand.Read(s[:])
	return t, s
}

// NewSpanID returns the span ID of a span under a parent in traceID.
func (g idGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok && v.trace == traceID {
		return v.span
	}
	_, s := g.NewIDs(context.Background())
	return s
}
