#!/usr/bin/env bash
# deps.sh: install the Debian packages the tests need, if any is missing.
# `make test` runs it first, so the README's test command works on a fresh
# machine that has only Go and gcc. Needs root (apt-get); without root it
# names the command to run and fails. `deps.sh bench` adds what make bench
# compares against: bpftrace, and bcc's biolatency if apt can install it
# (best effort: make bench reports why it could not run it). `deps.sh
# generate` adds what `make generate`/`make check-generate` need: clang-19,
# llvm-19 (llvm-strip), libbpf-dev (bpf_helpers.h) and git (the diff). `deps.sh image`
# adds buildah, which make image-test builds and unpacks the image with.
# `deps.sh node` adds what make node-test runs a node with: containerd (and
# ctr), runc, the CNI plugins, buildah and gcc (the pause image).
set -euo pipefail

# command -> Debian package
declare -A need=(
	[make]=make
	[fio]=fio
	[qemu-img]=qemu-utils
	[tc]=iproute2
	[ip]=iproute2
	[mkfs.ext4]=e2fsprogs
	[mke2fs]=e2fsprogs
	[dmsetup]=dmsetup
	[trace-cmd]=trace-cmd # e2e TestDMLevel reads its ftrace instance in ns
	[mkfs.xfs]=xfsprogs
	[mkfs.btrfs]=btrfs-progs
	[bindfs]=bindfs # e2e TestStackedLoopUntraced: a loop device over a FUSE file
	[losetup]=util-linux
	[setpriv]=util-linux
	[qemu-system-x86_64]=qemu-system-x86
	[busybox]=busybox-static
	[cpio]=cpio
	[xz]=xz-utils
	[prometheus]=prometheus
	[promtool]=prometheus
	[chromium]=chromium # report/chromium_test.go lays out the HTML page
	[zsh]=zsh           # cmd/etcdscope TestCompletion sources the zsh script
	[bpftool]=bpftool   # cmd/etcdscope TestBadInput: BPF objects left on tc/XDP/cgroups
	[systemd-analyze]=systemd # deploy TestSystemdUnit: systemd-analyze verify of the unit
)
if [[ ${1:-} == generate ]]; then
	need[clang-19]=clang-19
	need[llvm-strip-19]=llvm-19
	need[/usr/include/bpf/bpf_helpers.h]=libbpf-dev
	need[git]=git # make check-generate diffs the regenerated objects against HEAD
fi
if [[ ${1:-} == image ]]; then
	need[buildah]=buildah
	need[git]=git   # image-test compares --version with git describe
	need[file]=file # image-test checks the binary is statically linked
	need[curl]=curl # image-test scrapes serve's /metrics from the image
fi
if [[ ${1:-} == node ]]; then
	need[buildah]=buildah
	need[containerd]=containerd
	need[ctr]=containerd
	need[runc]=runc
	need[/usr/lib/cni/loopback]=containernetworking-plugins
	need[gcc]=gcc # the pause image: node/images/pause.c, gcc -static
	need[file]=file
fi
if [[ ${1:-} == bench ]]; then
	need[bpftrace]=bpftrace
	if [[ $(id -u) == 0 ]] && ! PATH=$PATH:/usr/sbin command -v biolatency-bpfcc >/dev/null; then
		echo "deps: trying bpfcc-tools (bcc's biolatency, optional)" >&2
		{ apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends bpfcc-tools; } >/dev/null 2>&1 ||
			echo "deps: bpfcc-tools not installed; make bench runs without biolatency" >&2
	fi
fi
# e2e TestCommitEtcd34 runs Debian's etcd v3.4 (the etcd-server package):
# its binary is extracted into bin/etcd34, not installed, since the package
# would start an etcd service on a host with systemd (holding :2379 and
# :2380 and a process named etcd, which the tests' own etcds need).
etcd34="$(dirname "$0")/../bin/etcd34"
if [[ ! -x $etcd34 && $(id -u) == 0 ]]; then
	tmp=$(mktemp -d)
	if (cd "$tmp" && { apt-get -o DPkg::Lock::Timeout=600 download etcd-server >/dev/null 2>&1 ||
		{ apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null && apt-get -o DPkg::Lock::Timeout=600 download etcd-server >/dev/null; }; } &&
		dpkg-deb -x etcd-server_*.deb x) && install -D -m 0755 "$tmp/x/usr/bin/etcd" "$etcd34"; then
		echo "deps: Debian's etcd v3.4 extracted to bin/etcd34" >&2
	else
		echo "deps: could not extract Debian's etcd-server into bin/etcd34 (e2e TestCommitEtcd34 needs it)" >&2
	fi
	rm -rf "$tmp"
fi
missing=()
# A key is a command, or an absolute path for a file that is no command.
for cmd in "${!need[@]}"; do
	if [[ $cmd == /* ]]; then
		[[ -e $cmd ]] || missing+=("${need[$cmd]}")
	else
		PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null || missing+=("${need[$cmd]}")
	fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [[ $(id -u) != 0 ]]; then
	echo "deps: missing packages: $pkgs; run: sudo apt-get install -y $pkgs" >&2
	exit 1
fi
echo "deps: installing $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt (unattended-upgrades, a second deps.sh) instead of
# failing on its lock.
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -q >/dev/null
# shellcheck disable=SC2086
apt-get "${lock[@]}" install -y -q --no-install-recommends $pkgs ca-certificates >/dev/null
