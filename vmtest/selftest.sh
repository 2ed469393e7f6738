#!/usr/bin/env bash
# vmtest/selftest.sh: proves vmtest/run.sh reports failure correctly. It
# writes a throw-away vmtest package under vmtest/out/ (gitignored, outside
# run.sh's discovery) whose tests fail, hang, panic the guest kernel, and read
# an attached disk, runs the rig on each, and checks the exit code and the
# message. About a minute with a warm cache. Not part of `make vmtest`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PKG=vmtest/out/selftest
rm -rf "$PKG"
mkdir -p "$PKG"
trap 'rm -rf "$PKG" vmtest/out/selftest-disk.img' EXIT

cat >"$PKG/self_test.go" <<'EOF'
//go:build vmtest

package selftest

import (
	"bytes"
	"os"
	"testing"
	"time"
)

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) { t.Fatal("deliberate failure") }

func TestHangs(t *testing.T) { time.Sleep(time.Hour) }

// TestPanicsKernel crashes the guest: sysrq c.
func TestPanicsKernel(t *testing.T) {
	os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0)
	time.Sleep(time.Minute)
}

// TestReadsDisk reads the first VMTEST_DRIVES disk, which the host filled.
func TestReadsDisk(t *testing.T) {
	b := make([]byte, 16)
	f, err := os.Open("/dev/vda")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, []byte("VMTEST-SELFTEST.")) {
		t.Fatalf("/dev/vda starts %q", b)
	}
}
EOF

fails=0
# expect NAME WANT_RC WANT_PATTERN [ENV=VALUE ...]
expect() {
	local name=$1 want=$2 pattern=$3 rc=0
	shift 3
	env VMTEST_PKGS="./$PKG" "$@" ./vmtest/run.sh >"vmtest/out/selftest-$name.log" 2>&1 || rc=$?
	if [[ $rc == "$want" ]] && grep -qE "$pattern" "vmtest/out/selftest-$name.log"; then
		echo "selftest $name: ok (rc $rc)"
	else
		echo "selftest $name: FAILED: rc $rc (want $want), pattern /$pattern/ $(grep -qE "$pattern" "vmtest/out/selftest-$name.log" && echo found || echo missing); see vmtest/out/selftest-$name.log"
		fails=$((fails + 1))
	fi
}

expect pass 0 '^vmtest: PASS$' VMTEST_RUN='^TestPasses$'
expect fail 1 'RESULT pkg=.*selftest rc=1' VMTEST_RUN='^(TestPasses|TestFails)$'
expect test-timeout 1 'panic: test timed out after 3s' VMTEST_RUN='^TestHangs$' VMTEST_TEST_TIMEOUT=3s
expect vm-timeout 1 'VM timed out after 20s' VMTEST_RUN='^TestHangs$' VMTEST_TIMEOUT=20
expect kernel-panic 1 'no RESULT line came from the VM' VMTEST_RUN='^TestPanicsKernel$'
expect bad-run 2 'must not contain spaces' VMTEST_RUN='a b'
printf 'VMTEST-SELFTEST.' >vmtest/out/selftest-disk.img
truncate -s 16M vmtest/out/selftest-disk.img
expect drive 0 '^vmtest: PASS$' VMTEST_RUN='^TestReadsDisk$' \
	VMTEST_DRIVES="file=vmtest/out/selftest-disk.img,format=raw,if=virtio"

[[ $fails == 0 ]] && echo "selftest: PASS" || { echo "selftest: $fails FAILED"; exit 1; }
