// Package pipeline is the one data path of each tracer, written once:
//
//	source (tracer, or a capture) ─► read event ─► analysis.Attributor
//	  ─► resolve names (Host: device and disk names, loop backing files,
//	     the fsync's path and its file kind) ─► finished analysis.FsyncRecord
//	  ─► sinks (the report builder, JSON Lines, Prometheus metrics, a capture)
//
// `etcdscope fsync`, `serve` and `report` differ only in the source they
// hand to Fsync.Run and the sinks they attach: the live tracer or a
// capture (package capture) as the source; the report table and JSON
// Lines (package render), or the metrics (package exporter) as sinks.
//
// One error policy: a record that does not decode is counted
// (DecodeErrors, and the OnDecodeError hook) and the loop goes on; the CLI
// reports the count and fails at exit, serve exports it and shows it on
// /healthz. A source that fails maxConsecutiveErrors times in a row without
// one good event ends the loop with its last error (a broken ring buffer
// would otherwise spin).
package pipeline
