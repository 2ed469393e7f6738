// Package exporter serves etcdscope's numbers as Prometheus metrics: the
// fsync layer partition and block flushes from tracer.FsyncTracer, the peer
// round trips from tracer.PeersTracer, the inflation of etcd's own peer RTT metric
// (analysis/etcdmetric), and metrics about the tracers themselves (programs
// attached, lost and missed events, BPF run time).
//
// Metrics holds every collector and turns finished records into
// observations: it is a sink of package pipeline (Fsync, Block), needs no
// root and is what the tests lint. Run wires the tracers, their pipelines
// and the HTTP server (/metrics, /healthz) for `etcdscope serve`.
// docs/metrics.md lists every metric, its labels, units and source.
//
// Histograms of durations have classic buckets from 1.22 µs to 20.48 s (25
// powers of two times the 10 ms WAL budget, one bound at it; etcd's own disk histograms start at 1 ms,
// where a healthy NVMe fdatasync is invisible) and, alongside, native
// histograms (bucket factor 1.1) for a Prometheus that negotiates protobuf.
package exporter
