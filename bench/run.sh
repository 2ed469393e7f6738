#!/bin/sh
# make bench: what etcdscope costs (issue 7). Needs root, fio and bpftrace
# (Debian: apt-get install fio bpftrace; bpfcc-tools optional). Builds the
# load generator and runs bench/benchrun, which writes docs/performance.md.
# Not part of `make test`: it takes ~4 minutes on 2 cores.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF, kernel.bpf_stats_enabled); run: sudo make bench" >&2
	exit 2
fi
for p in fio bpftrace; do
	command -v "$p" >/dev/null || { echo "bench: $p not found (apt-get install $p)" >&2; exit 2; }
done
GO=${GO:-go}
tmp=$(mktemp -d /tmp/etcdscope-bench-bin.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
$GO build -o "$tmp/fsyncgen" ./bench/fsyncgen
$GO build -o "$tmp/benchrun" ./bench/benchrun
"$tmp/benchrun" -etcdscope bin/etcdscope -etcd bin/etcd -commit-script bench/commit.bt -fsyncgen "$tmp/fsyncgen" -bpftrace-script bench/fsync.bt -fdatasync-script bench/fdatasync.bt -findings bench/findings.md \
	-out docs/performance.md -save bench/results.json -repo . "$@"
