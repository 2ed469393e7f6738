#!/usr/bin/env bash
# demo.sh: the main job on the built-in default, on a machine with only Go
# and gcc (no clang: the BPF objects are committed). It builds bin/etcdscope
# and traces its own etcd-WAL-like writer (2300-byte appends + fdatasync into
# a preallocated segment, as etcd's WAL does) for 10 s. Needs root (or
# CAP_BPF + CAP_PERFMON); extra arguments go to `etcdscope fsync`.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/etcdscope ./cmd/etcdscope
exec ./bin/etcdscope fsync --workload wal --duration 10s "$@"
