#!/bin/busybox sh
# /init of the vmtest initramfs (built by vmtest/run.sh). Mounts the
# pseudo-filesystems, loads the modules listed in /etc/vmtest/modules (in
# dependency order), runs each test binary listed in /etc/vmtest/tests from
# its package directory under /src, prints one "RESULT pkg=... rc=N" line per
# binary and a final "VMTEST DONE" line, then powers off.
#
# Kernel command-line words key=value that the kernel does not know arrive
# here as environment variables: VMTEST_RUN (a -test.run regex) and
# VMTEST_SHELL=1 (a shell after the tests).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp
rig=ok

mnt() { # mnt TYPE DIR
	mkdir -p "$2"
	mount -t "$1" "$1" "$2" || { echo "VMTEST mount $1 on $2 failed"; rig=fail; }
}
mnt proc /proc
mnt sysfs /sys
mnt devtmpfs /dev
mnt tmpfs /tmp
mnt tmpfs /run # netem keeps its state under /run/etcdscope
mnt bpf /sys/fs/bpf
mnt tracefs /sys/kernel/tracing
mnt debugfs /sys/kernel/debug
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
ip link set lo up || rig=fail

. /etc/vmtest/env
export VMTEST_KERNEL_PACKAGE VMTEST_KERNEL_VERSION VMTEST_KERNEL_RELEASE
export ETCDSCOPE_REQUIRE_BPF=1

t0=$(cut -d' ' -f1 /proc/uptime)
while read -r ko; do
	insmod "$ko" || { echo "VMTEST insmod $ko failed"; rig=fail; }
done </etc/vmtest/modules

echo "VMTEST /init started at ${t0}s uptime, modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
echo "VMTEST kernel package=$VMTEST_KERNEL_PACKAGE version=$VMTEST_KERNEL_VERSION uname=$(uname -r) rig=$rig"
echo "VMTEST $(cat /proc/version)"

n=0
failed=0
while read -r pkg dir bin run; do
	[ -n "${VMTEST_RUN:-}" ] && run=$VMTEST_RUN
	echo "VMTEST run pkg=$pkg -test.run=$run"
	cd "/src/$dir"
	"./$bin" -test.v -test.count=1 -test.timeout="$VMTEST_TEST_TIMEOUT" -test.run="$run" </dev/null
	rc=$?
	cd /
	# A leading newline: the test output may not end with one.
	printf '\nRESULT pkg=%s rc=%d\n' "$pkg" "$rc"
	n=$((n + 1))
	[ "$rc" -eq 0 ] || failed=$((failed + 1))
done </etc/vmtest/tests

echo "VMTEST DONE binaries=$n failed=$failed rig=$rig kernel=$VMTEST_KERNEL_PACKAGE/$VMTEST_KERNEL_VERSION"
if [ "${VMTEST_SHELL:-}" = 1 ]; then
	echo "VMTEST shell: exit or Ctrl-D powers off"
	setsid cttyhack sh
fi
poweroff -f
