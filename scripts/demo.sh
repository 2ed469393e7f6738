#!/usr/bin/env bash
# demo.sh: the main job on the built-in default, on a machine with only Go
# and gcc (no clang: the BPF objects are committed). It builds bin/etcdscope
# and traces its own etcd-WAL-like writer (2300-byte appends + fdatasync into
# a preallocated segment, as etcd's WAL does) for 10 s. Needs root (or
# CAP_BPF + CAP_PERFMON); extra arguments go to `etcdscope fsync`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Built as make build builds it (static, CGO_ENABLED=0, -trimpath: the same
# bin/etcdscope a node or the image gets) and stamped as it stamps it
# (--version: git describe), when git is there; without it buildinfo falls
# back to "devel".
pkg=github.com/etcdscope/etcdscope/internal/buildinfo
CGO_ENABLED=0 go build -trimpath -ldflags "-X $pkg.version=$(git describe --tags --always --dirty 2>/dev/null) -X $pkg.revision=$(git rev-parse HEAD 2>/dev/null)" \
	-o bin/etcdscope ./cmd/etcdscope
exec ./bin/etcdscope fsync --workload wal --duration 10s "$@"
