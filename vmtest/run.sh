#!/usr/bin/env bash
# vmtest/run.sh: `make vmtest`. Boots a Debian cloud kernel under QEMU TCG
# with an initramfs (busybox-static, the qdisc/classifier/fs modules,
# iproute2's ip and tc, fio, and the project's vmtest-tagged test binaries),
# runs the tests inside, and exits non-zero if any failed, if the VM hung,
# or if it printed no result. See docs/vmtest.md.
#
# Environment (all optional):
#   VMTEST_RUN=regex        -test.run for every binary (default: the Test
#                           functions declared in each package's vmtest files)
#   VMTEST_PKGS="./a ./b"   only these packages (default: every package with a
#                           //go:build vmtest test file)
#   VMTEST_DRIVES="spec;spec"  extra `-drive` options, ';'-separated, e.g.
#                           file=vmtest/out/raw.img,format=raw,if=virtio
#                           (paths relative to the repository root; the
#                           guest sees them as /dev/vda, /dev/vdb, ...)
#   VMTEST_MODULES="m ..."  extra kernel modules to insmod (deps resolved)
#   VMTEST_TIMEOUT=seconds  kill QEMU after this long (default 900)
#   VMTEST_TEST_TIMEOUT=dur -test.timeout per binary (default 6m)
#   VMTEST_MEM=MiB          guest memory (default 1024)
#   VMTEST_QEMU_ARGS="..."  extra QEMU options, split on spaces
#   VMTEST_SHELL=1          drop to a guest shell after the tests (no timeout)
#   VMTEST_KEEP=1           keep vmtest/out/run.*/ (initramfs tree, console)
#   VMTEST_KERNEL_SERIES=6.1  the kernel: 5.10 (Debian 11), 6.1 (Debian 12,
#                           the default) or 6.12 (Debian 13), the suite's
#                           linux-image-cloud-amd64 (docs/vmtest.md)
#   VMTEST_MIRROR, VMTEST_SECURITY_MIRROR  the Debian mirrors (default
#                           http://deb.debian.org/debian{,-security})
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=$ROOT/vmtest/cache
OUT=$ROOT/vmtest/out
SERIES=${VMTEST_KERNEL_SERIES:-6.1}
META=linux-image-cloud-amd64
MIRROR=${VMTEST_MIRROR:-http://deb.debian.org/debian}
SECURITY=${VMTEST_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
TIMEOUT=${VMTEST_TIMEOUT:-900}
TEST_TIMEOUT=${VMTEST_TEST_TIMEOUT:-6m}
MEM=${VMTEST_MEM:-1024}
GO=${GO:-go}

# The modules the tests need, by name; their dependencies are added from
# modules.dep. Built-in ones (modules.builtin) are skipped (mq-deadline is
# built into 5.10 and 6.1, a module in 6.12).
MODULES="veth sch_prio sch_netem sch_tbf sch_ingress sch_fq cls_u32 cls_bpf act_gact
loop virtio_pci virtio_blk xfs btrfs dm-mod dm-delay null_blk mq-deadline ${VMTEST_MODULES:-}"

log() { printf 'vmtest: %s\n' "$*" >&2; }
die() { printf 'vmtest: %s\n' "$*" >&2; exit 1; }
usage() { printf 'vmtest: %s\n' "$*" >&2; exit 2; }

for tool in qemu-system-x86_64 busybox cpio apt-get apt-cache dpkg-deb flock timeout "$GO"; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install qemu-system-x86 busybox-static cpio; Go for $GO)"
done
case ${VMTEST_RUN:-} in *[[:space:]\"\']*) usage "VMTEST_RUN must not contain spaces or quotes (it travels on the kernel command line); use . or \\s in the regex" ;; esac
[[ $TIMEOUT =~ ^[0-9]+$ ]] || usage "VMTEST_TIMEOUT must be whole seconds, e.g. VMTEST_TIMEOUT=600"
[[ $MEM =~ ^[0-9]+$ ]] || usage "VMTEST_MEM must be MiB, e.g. VMTEST_MEM=2048"
# The series the rig boots, each the cloud kernel of one Debian suite.
case $SERIES in
5.10) SUITE=bullseye ;; # Debian 11 (LTS); bullseye-security has the newest 5.10
6.1) SUITE=bookworm ;;  # Debian 12
6.12) SUITE=trixie ;;   # Debian 13
*) usage "VMTEST_KERNEL_SERIES=$SERIES: the rig boots 5.10 (bullseye), 6.1 (bookworm) or 6.12 (trixie)" ;;
esac

mkdir -p "$CACHE/debs" "$CACHE/kernel" "$OUT"
# Runs may overlap (several engineers, one tree): each stages in its own
# directory; the kernel cache is filled under a lock.
RUN=$(mktemp -d "$OUT/run.XXXXXX")
CONSOLE=$RUN/console.log
cleanup() {
	[[ -f $CONSOLE ]] && cp "$CONSOLE" "$OUT/console.log"
	[[ ${VMTEST_KEEP:-} == 1 ]] && log "kept $RUN" || rm -rf "$RUN"
}
trap cleanup EXIT
exec 8>"$CACHE/.lock"
flock 8

# --- 1. The kernel package: resolve, download once, unpack once. ----------
# Each series is one Debian suite's cloud kernel. Its package lists live in
# a private apt directory under the cache (its own apt.conf, sources,
# lists and state; the host's apt configuration, sources and lists are
# neither read nor changed), verified like the host's: InRelease against
# the Debian archive keyring, the .deb against the hashes it signs.
# Names change with every Debian security update (old ones leave the
# mirror), so the metapackage's dependency names the current one.
APTDIR=$CACHE/apt/$SUITE
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
apt_setup() {
	mkdir -p "$APTDIR"/{etc/parts,state/lists/partial,cache/archives/partial}
	: >"$APTDIR/state/status" # no installed packages: the host's do not matter
	printf 'deb [signed-by=%s] %s %s main\n' \
		"$KEYRING" "$MIRROR" "$SUITE" "$KEYRING" "$SECURITY" "$SUITE-security" >"$APTDIR/etc/sources.list"
	cat >"$APTDIR/etc/apt.conf" <<-EOF
		Dir::Etc::main "/dev/null";
		Dir::Etc::parts "$APTDIR/etc/parts";
		Dir::Etc::sourcelist "$APTDIR/etc/sources.list";
		Dir::Etc::sourceparts "$APTDIR/etc/parts";
		Dir::Etc::preferences "/dev/null";
		Dir::Etc::preferencesparts "$APTDIR/etc/parts";
		Dir::State "$APTDIR/state";
		Dir::State::status "$APTDIR/state/status";
		Dir::Cache "$APTDIR/cache";
		APT::Architecture "amd64";
		APT::Architectures { "amd64"; };
		Acquire::Languages "none";
		APT::Sandbox::User "$(id -un)";
	EOF
}
papt() { APT_CONFIG=$APTDIR/etc/apt.conf "$@"; } # apt with the private config
apt_update() {
	log "apt-get update of $SUITE and $SUITE-security (private lists in ${APTDIR#"$ROOT"/})"
	papt apt-get update -q >/dev/null || return 1
}
resolve_kernel() {
	papt apt-cache depends "$META" 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}
[[ -f $KEYRING ]] || die "$KEYRING not found (apt-get install debian-archive-keyring)"
apt_setup
KPKG=$(resolve_kernel || true)
if [[ -z $KPKG ]]; then
	apt_update || log "apt-get update of $SUITE failed"
	KPKG=$(resolve_kernel || true)
fi
if [[ -z $KPKG ]]; then
	# Offline with a warm cache: use the newest kernel of the series
	# already unpacked.
	KPKG=$(ls -1 "$CACHE/kernel" 2>/dev/null | grep -E "^linux-image-${SERIES//./\\.}\.[0-9]+[-+]" | sort -V | tail -1 || true)
	[[ -n $KPKG ]] || die "cannot resolve $META in $SUITE (apt-get update failed or names nothing; is $MIRROR reachable?)"
	log "cannot resolve $META in $SUITE; using cached $KPKG"
fi
check_pin() {
	KREL=${KPKG#linux-image-}
	KDIR=$CACHE/kernel/$KPKG
	# 5.10.0-46-cloud-amd64 (bullseye), 6.1.0-57-cloud-amd64 (bookworm),
	# 6.12.118+deb13-cloud-amd64 (trixie).
	[[ $KREL =~ ^${SERIES//./\\.}\.[0-9]+[-+][0-9a-z+.-]*-cloud-amd64$ ]] ||
		die "$META resolves to $KPKG in $SUITE, not the pinned ${SERIES} cloud-amd64 series"
}
download() { # download: the .deb of $KPKG into $CACHE/debs, or fail
	log "downloading $KPKG"
	(cd "$CACHE/debs" && papt apt-get download -q "$KPKG" >/dev/null)
}
check_pin
if [[ ! -f $KDIR/.ready ]]; then
	deb=$(ls -1 "$CACHE/debs/${KPKG}_"*.deb 2>/dev/null | tail -1 || true)
	if [[ -z $deb ]]; then
		if ! download; then
			# Stale package lists name a kernel the mirror has dropped.
			log "apt-get download $KPKG failed; refreshing the $SUITE lists"
			apt_update || die "apt-get update of $SUITE failed (is $MIRROR reachable?)"
			KPKG=$(resolve_kernel || true)
			[[ -n $KPKG ]] || die "cannot resolve $META in $SUITE after apt-get update"
			check_pin
			download || die "apt-get download $KPKG failed after apt-get update"
		fi
		deb=$(ls -1 "$CACHE/debs/${KPKG}_"*.deb | tail -1)
	fi
	rm -rf "$KDIR"
	mkdir -p "$KDIR"
	dpkg-deb -x "$deb" "$KDIR/root"
	dpkg-deb -f "$deb" Version >"$KDIR/version"
	# Merged-/usr packages (trixie) ship the modules under /usr/lib.
	[[ -d $KDIR/root/lib/modules/$KREL ]] || {
		mkdir -p "$KDIR/root/lib/modules"
		ln -s "../../usr/lib/modules/$KREL" "$KDIR/root/lib/modules/$KREL"
	}
	# The package ships no modules.dep (its postinst runs depmod);
	# busybox's depmod writes one from the modules' symbols.
	busybox depmod -b "$KDIR/root" "$KREL"
	touch "$KDIR/.ready"
	# Keep one kernel per series: the superseded ones have left the
	# mirror anyway.
	for old in "$CACHE/kernel/linux-image-$SERIES."* "$CACHE/debs/linux-image-$SERIES."*.deb; do
		[[ -e $old && $old != "$KDIR" && $old != "$deb" ]] && rm -rf "$old"
	done
fi
KVER=$(cat "$KDIR/version")
VMLINUZ=$KDIR/root/boot/vmlinuz-$KREL
MODROOT=$KDIR/root/lib/modules/$KREL
[[ -f $VMLINUZ && -f $MODROOT/modules.dep ]] || die "$KDIR is incomplete; rm -rf $KDIR and rerun"
flock -u 8
log "kernel $KPKG $KVER"

# --- 2. Test binaries: every package with a vmtest-tagged _test.go. -------
cd "$ROOT"
if [[ -n ${VMTEST_PKGS:-} ]]; then
	read -r -a pkgdirs <<<"$VMTEST_PKGS"
else
	mapfile -t pkgdirs < <(
		grep -rlE --include='*_test.go' --exclude-dir=testdata --exclude-dir=vendor --exclude-dir='.?*' \
			'^//go:build .*\bvmtest\b' . |
			grep -v -e '^./vmtest/cache/' -e '^./vmtest/out/' |
			xargs -r -n1 dirname | sort -u
	)
fi
[[ ${#pkgdirs[@]} -gt 0 ]] || die "no package has a //go:build vmtest test file"
pkgdirs=("${pkgdirs[@]#./}")

# `go vet ./...` on the host never sees vmtest-tagged files.
"$GO" vet -tags vmtest "${pkgdirs[@]/#/./}" || die "go vet -tags vmtest failed"

STAGE=$RUN/initramfs
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,lib64,etc/vmtest,proc,sys,dev,tmp,run,src,mnt,"lib/modules/$KREL"}
cp go.mod "$STAGE/src/go.mod" # testenv.RepoRoot looks for it
# Go's resolver reads /etc/hosts for "localhost"; iproute2 and
# vishvananda/netns keep named network namespaces under /var/run/netns.
mkdir -p "$STAGE/var"
ln -s /run "$STAGE/var/run"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$STAGE/etc/hosts"
printf 'root:x:0:0:root:/tmp:/bin/sh\n' >"$STAGE/etc/passwd"
printf 'root:x:0:\n' >"$STAGE/etc/group"
: >"$STAGE/etc/vmtest/tests"
for dir in "${pkgdirs[@]}"; do
	[[ -d $dir ]] || usage "VMTEST_PKGS: no directory $dir"
	imp=$("$GO" list -tags vmtest "./$dir")
	# The tests meant for the VM: Test functions in the vmtest-tagged
	# files. The package's other tests already ran on the host.
	names=$(grep -lE '^//go:build .*\bvmtest\b' "$dir"/*_test.go |
		xargs sed -nE 's/^func (Test[A-Za-z0-9_]*)\(.*/\1/p' | sort -u | paste -sd'|')
	[[ -n $names ]] || die "$dir: its vmtest files declare no Test functions"
	bin=$(basename "$dir").test
	log "building $imp"
	mkdir -p "$STAGE/src/$dir"
	CGO_ENABLED=0 "$GO" test -c -tags vmtest -o "$STAGE/src/$dir/$bin" "./$dir"
	[[ -d $dir/testdata ]] && cp -a "$dir/testdata" "$STAGE/src/$dir/"
	printf '%s %s %s ^(%s)$\n' "$imp" "$dir" "$bin" "$names" >>"$STAGE/etc/vmtest/tests"
done
# The tool itself, static, where tests look for it (bin/ under the repo
# root) and on PATH.
# A tree that does not build still boots: the rig's smoke test does not
# need the tool, and tests that do fail on their own, loudly.
mkdir -p "$STAGE/src/bin"
if CGO_ENABLED=0 "$GO" build -o "$STAGE/src/bin/etcdscope" ./cmd/etcdscope; then
	ln -s /src/bin/etcdscope "$STAGE/usr/bin/etcdscope"
else
	log "WARNING: ./cmd/etcdscope does not build; the guest has no etcdscope binary"
fi

# etcd (`make etcd`, as testenv.EtcdBinary finds it) when it was built:
# the tracer's peer tests run a real cluster. Its libraries are added below.
ETCD=
[[ -x $ROOT/bin/etcd ]] && ETCD=$ROOT/bin/etcd

# --- 3. Userland: busybox, iproute2, fio with the libraries ldd names. ----
cp "$(command -v busybox)" "$STAGE/bin/busybox"
copy_with_libs() { # copy_with_libs BINARY DEST
	cp -L "$1" "$STAGE$2"
	# ldd fails on a static binary: nothing to copy then.
	{ ldd "$1" || true; } | awk '/=> \//{print $3} /^[[:space:]]*\/[^ ]*ld-linux/{print $1}' |
		while read -r lib; do
			[[ -e $STAGE$lib ]] && continue
			mkdir -p "$STAGE$(dirname "$lib")"
			cp -L "$lib" "$STAGE$lib"
		done
}
for t in ip tc; do
	p=$(command -v "$t" || true)
	[[ -n $p ]] || p=/usr/sbin/$t
	[[ -x $p ]] || die "$t not found (apt-get install iproute2)"
	copy_with_libs "$p" "/usr/sbin/$t"
done
p=$(command -v fio || true)
[[ -n $p ]] || die "fio not found (apt-get install fio)"
copy_with_libs "$p" /usr/bin/fio
# dmsetup and mke2fs for the slow-device scenario (docs/scenarios.md) and
# e2e's TestDMLevel, trace-cmd for the latter's ftrace oracle in ns:
# optional, the tests fail naming them when they are missing.
for t in dmsetup mke2fs trace-cmd; do
	p=$(PATH=$PATH:/usr/sbin:/sbin command -v "$t" || true)
	if [[ -n $p ]]; then
		copy_with_libs "$p" "/usr/sbin/$t"
	else
		log "no $t on this host (apt-get install dmsetup e2fsprogs trace-cmd): the slow-device scenario or TestDMLevel will fail"
	fi
done
[[ -f /etc/mke2fs.conf ]] && cp /etc/mke2fs.conf "$STAGE/etc/mke2fs.conf"
if [[ -n $ETCD ]]; then
	copy_with_libs "$ETCD" /src/bin/etcd
else
	log "no bin/etcd (make etcd): tests that need etcd will fail in the guest"
fi
# netem's delay distribution tables, where tc looks for them.
for d in /usr/lib/x86_64-linux-gnu/tc /usr/lib/tc; do
	[[ -d $d ]] && mkdir -p "$STAGE$d" && cp -a "$d"/. "$STAGE$d/"
done
# busybox applets for everything not installed above (real ip/tc win).
busybox --list-full | while read -r a; do
	[[ -e $STAGE/$a || -L $STAGE/$a ]] || ln -s /bin/busybox "$STAGE/$a"
done

# --- 4. Modules in dependency order (deps before dependents). ------------
declare -A seen=()
order=()
add_module() { # add_module NAME-or-RELPATH
	local rel line dep
	if [[ $1 == */* ]]; then
		rel=$1
	else
		rel=$(grep -oE "^[^:]*/$1\.ko(\.xz|\.zst|\.gz)?:" "$MODROOT/modules.dep" | head -1 || true)
		rel=${rel%:}
		if [[ -z $rel ]]; then
			grep -qE "/$1\.ko(\.[a-z]+)?\$" "$MODROOT/modules.builtin" && return 0
			die "module $1 is neither in $KPKG's modules.dep nor built in"
		fi
	fi
	[[ -n ${seen[$rel]:-} ]] && return 0
	seen[$rel]=1
	line=$(grep -E "^${rel//./\\.}:" "$MODROOT/modules.dep" | head -1)
	for dep in ${line#*:}; do add_module "$dep"; done
	order+=("$rel")
}
for m in $MODULES; do add_module "$m"; done
: >"$STAGE/etc/vmtest/modules"
for rel in "${order[@]}"; do
	name=$(basename "$rel")
	# busybox insmod reads plain ELF only: decompress on the host.
	case $name in
	*.ko.xz) command -v xz >/dev/null || die "$name: xz not found (apt-get install xz-utils)"
		xz -dc "$MODROOT/$rel" >"$STAGE/lib/modules/$KREL/${name%.xz}"; name=${name%.xz} ;;
	*.ko.zst) command -v zstd >/dev/null || die "$name: zstd not found (apt-get install zstd)"
		zstd -qdc "$MODROOT/$rel" >"$STAGE/lib/modules/$KREL/${name%.zst}"; name=${name%.zst} ;;
	*.ko.gz) gzip -dc "$MODROOT/$rel" >"$STAGE/lib/modules/$KREL/${name%.gz}"; name=${name%.gz} ;;
	*) cp "$MODROOT/$rel" "$STAGE/lib/modules/$KREL/$name" ;;
	esac
	echo "/lib/modules/$KREL/$name" >>"$STAGE/etc/vmtest/modules"
done

cp "$ROOT/vmtest/init.sh" "$STAGE/init"
chmod 755 "$STAGE/init"
printf 'VMTEST_KERNEL_PACKAGE=%s\nVMTEST_KERNEL_VERSION=%s\nVMTEST_KERNEL_RELEASE=%s\nVMTEST_TEST_TIMEOUT=%s\n' \
	"$KPKG" "$KVER" "$KREL" "$TEST_TIMEOUT" >"$STAGE/etc/vmtest/env"

# Uncompressed: under TCG the kernel's gunzip costs more than QEMU's
# reading a bigger file.
INITRD=$RUN/initramfs.cpio
(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$INITRD"
log "initramfs $(du -m "$INITRD" | cut -f1) MiB, ${#order[@]} modules, ${#pkgdirs[@]} test binaries"

# --- 5. Boot. --------------------------------------------------------------
append="console=ttyS0 quiet panic=-1 softlockup_panic=1 oops=panic"
[[ -n ${VMTEST_RUN:-} ]] && append+=" VMTEST_RUN=$VMTEST_RUN"
[[ ${VMTEST_SHELL:-} == 1 ]] && append+=" VMTEST_SHELL=1"
qemu=(qemu-system-x86_64 -accel tcg -smp 1 -m "$MEM" -nographic -no-reboot -nic none
	-kernel "$VMLINUZ" -initrd "$INITRD" -append "$append")
# Extra QEMU options, split on spaces (e.g. "-icount shift=auto").
read -r -a extra <<<"${VMTEST_QEMU_ARGS:-}"
qemu+=("${extra[@]}")
IFS=';' read -r -a drives <<<"${VMTEST_DRIVES:-}"
for d in "${drives[@]}"; do
	[[ -n $d ]] && qemu+=(-drive "$d")
done

log "booting: ${qemu[*]}"
start=$(date +%s)
# The host's load is part of every timing a TCG guest reports (its vCPU
# is one host thread): said beside the verdict.
load_boot=$(cut -d' ' -f1-3 /proc/loadavg)
set +e
if [[ ${VMTEST_SHELL:-} == 1 ]]; then
	"${qemu[@]}" | tee "$CONSOLE"
	qrc=${PIPESTATUS[0]}
else
	# stdin from /dev/null: QEMU leaves the terminal alone and Ctrl-C
	# reaches it as SIGINT.
	# SeaBIOS's terminal resets (ESC c, ESC [2J) would wipe the screen
	# above: they go to the log, not to stdout.
	timeout -k 10 "$TIMEOUT" "${qemu[@]}" </dev/null | tee "$CONSOLE" |
		sed -u -e 's/\r$//' -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g'
	qrc=${PIPESTATUS[0]}
fi
set -e
elapsed=$(($(date +%s) - start))

# --- 6. Verdict from the console. -----------------------------------------
tr -d '\r' <"$CONSOLE" >"$RUN/console.txt"
mapfile -t results < <(grep -E '^RESULT pkg=[^ ]+ rc=[0-9]+$' "$RUN/console.txt" || true)
want=$(wc -l <"$STAGE/etc/vmtest/tests")
failed=0
for r in "${results[@]}"; do
	[[ $r == *" rc=0" ]] || failed=$((failed + 1))
done
echo "vmtest: kernel $KPKG $KVER, ${#results[@]}/$want binaries reported, $failed failed, ${elapsed}s in QEMU (rc $qrc); host load average $load_boot at boot, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
if [[ $qrc == 124 || $qrc == 137 ]]; then
	last=$(grep -E '^VMTEST run pkg=' "$RUN/console.txt" | tail -1 || true)
	die "VM timed out after ${TIMEOUT}s and QEMU was killed (last started: ${last:-none}); raise VMTEST_TIMEOUT or look at $OUT/console.log"
fi
[[ ${#results[@]} -gt 0 ]] || die "no RESULT line came from the VM (kernel panic or /init failure?); see $OUT/console.log"
grep -qE '^VMTEST DONE ' "$RUN/console.txt" || die "the VM stopped before its final line; see $OUT/console.log"
grep -qE '^VMTEST DONE .*rig=ok' "$RUN/console.txt" || die "the rig itself failed inside the VM (module load or mount); see $OUT/console.log"
[[ ${#results[@]} -eq $want ]] || die "$want test binaries built but ${#results[@]} reported"
if [[ $failed -gt 0 ]]; then
	printf '%s\n' "${results[@]}" | grep -v ' rc=0$' >&2
	die "$failed test binaries failed (their output is above and in $OUT/console.log)"
fi
[[ $qrc == 0 ]] || die "QEMU exited with $qrc"
# A scenario whose latency part the starvation gate left unjudged is not a
# pass (vmtest/scenarios finish): say SKIPPED, with what was not judged.
mapfile -t skipped < <(grep -E '^SCENARIO SKIPPED ' "$RUN/console.txt" || true)
if [[ ${#skipped[@]} -gt 0 ]]; then
	printf '%s\n' "${skipped[@]}"
	echo "vmtest: SKIPPED: ${#skipped[@]} scenario(s) not judged (starved guest); every judged check passed"
	exit 0
fi
echo "vmtest: PASS"
