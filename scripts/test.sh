#!/usr/bin/env bash
# test.sh: the README's test command, as CI runs it (.ci/run). It needs only
# Go and gcc on the machine: scripts/deps.sh installs every Debian package the
# tests use (make among them) when one is missing, then every Go test runs
# (privileged ones as root; under ETCDSCOPE_REQUIRE_BPF=1 a missing
# capability fails them), then the container image is built and run (make
# image-test, ~1 min), then the QEMU rig boots Debian's kernel for the
# netem tests and the tracer on another kernel (make vmtest), and Debian's
# 5.10, the oldest kernel the README claims, for the tracer's VM tests alone
# (about 1.5 min; make vmtest-kernels runs more packages on 5.10, 6.1, 6.12).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
make test-go
make image-test
make vmtest
make vmtest-kernels KERNELS=5.10 KERNEL_PKGS=./tracer
