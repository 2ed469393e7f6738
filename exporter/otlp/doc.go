// Package otlp exports each member's part of every sampled etcd write as
// OpenTelemetry spans over OTLP gRPC (serve --otlp-endpoint). Every
// member's agent exports only its own spans; the trace and span IDs are
// derived from (cluster, term, index, member, part), so that the spans of
// all agents land in one trace per write without the agents talking to
// each other: the write (root, on the member that ran it) and its parts;
// the leader's replication, its WAL append and one vote per follower; and
// under each vote, that follower's receive-to-answer and its parts
// (docs/commit.md, "OpenTelemetry traces").
//
// Span times are each member's CLOCK_MONOTONIC records converted to wall
// time by an offset read again for each trace's spans (so a step of the
// wall clock is followed): each span's duration is exact, the offsets
// between members' spans carry their clocks' skew.
//
// plan.go is pure (the span tree and IDs from records); sink.go runs the
// OpenTelemetry SDK off the trace path.
package otlp
