// Package pipeline is the one data path of each tracer, written once:
//
//	source (tracer, or a capture) ─► read event ─► analysis.Attributor
//	  ─► resolve names (Host: device and disk names, loop backing files,
//	     the fsync's path and its file kind) ─► finished analysis.FsyncRecord
//	  ─► sinks (the report builder, JSON Lines, Prometheus metrics, a capture)
//
// `etcdscope fsync`, `serve` and `report` differ only in the source they
// hand to FsyncLoop.Run and the sinks they attach: the live tracer or a
// capture (package capture) as the source; the report table and JSON
// Lines (package render), or the metrics (package exporter) as sinks.
// The peers path (Peers: every peer-port event to its sinks, the CLI's
// PeerConns that folds them into connections as they come, also report's
// replay of a capture, or serve's metrics and comparison window) and the hypervisor
// path (Hypervisor: each image I/O named, as a merge.HostIO) share the
// same read loop; Members and CompareEtcd are the one way `peers` and
// `serve` compare etcd's peer RTT metric with the traced connections.
// RunCommit is the commit path (`etcdscope commit`, serve's commit
// metrics): the commit tracer's records joined into writes
// (analysis/commit), member names and the role from etcd, the fsync
// tracer's split of the WAL fdatasyncs, and the model from etcd's metrics
// when etcd's functions cannot be probed. FsyncOutput is what a live
// `etcdscope fsync` writes (its sinks, interval lines, capture, and the
// report at the end); CaptureFile a --capture file, put in place at the
// end. The commands in cmd/etcdscope only turn flags into an options
// struct and pick the sinks.
//
// Session is the one lifecycle of a live run (fsync, peers, hypervisor):
// open the tracers and write the ready file, run the loops until a
// signal or --duration, then drain, wait for the loops, read the
// counters and close, in the order its Finish documents.
//
// The package loads no BPF and does not import package tracer: a tracer is
// just a source with a Read method, so the sinks' packages (exporter) do
// not depend on the loaders.
//
// One error policy: a record that does not decode is counted
// (DecodeErrors, and the OnDecodeError hook) and the loop goes on; the CLI
// reports the count and fails at exit, serve exports it and shows it on
// /healthz. A source that fails maxConsecutiveErrors times in a row without
// one good event ends the loop with its last error (a broken ring buffer
// would otherwise spin).
package pipeline
