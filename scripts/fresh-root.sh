#!/usr/bin/env bash
# fresh-root.sh: run the README's test command on a machine that has only Go
# and gcc, as a user's fresh Debian would. It builds a minimal Debian root
# with debootstrap (variant minbase, Debian's packages only), installs gcc in
# it, copies in the Go toolchain this machine has (Debian's own Go is older
# than go.mod asks), clones the committed tree (git clone of HEAD: what a
# clean clone has, nothing built or installed by hand), and runs the README's
# test command in a root of its own on this kernel, so BPF, loop devices and tracefs
# work as on the host. Every Debian package the tests need must then come
# from scripts/deps.sh: a missing install step fails here.
#
# It is a check to run before saying a change is done, not a CI step (it
# takes as long as CI plus ~3 minutes of debootstrap). Needs root.
#
#   scripts/fresh-root.sh [--keep] [COMMAND...]
#
# COMMAND defaults to the README's test command. --keep leaves the root in
# place for a look afterwards (it is removed at the next start anyway).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

keep=0
if [[ ${1:-} == --keep ]]; then
	keep=1
	shift
fi
[[ $# -gt 0 ]] || set -- ./scripts/test.sh
[[ $(id -u) == 0 ]] || {
	echo "fresh-root: needs root (debootstrap, chroot, mounts); run: sudo $0" >&2
	exit 2
}
command -v debootstrap >/dev/null || {
	echo "fresh-root: debootstrap not found; run: apt-get install -y debootstrap" >&2
	exit 2
}
GOROOT=${GOROOT:-$(go env GOROOT 2>/dev/null || echo /usr/local/go)}
[[ -x $GOROOT/bin/go ]] || {
	echo "fresh-root: no Go toolchain at $GOROOT; set GOROOT" >&2
	exit 2
}

# A root-owned directory of our own, never one another user could plant.
base=/var/lib/etcdscope-fresh-root
root=$base/root
install -d -m 0700 -o root -g root "$base"

umount_all() {
	# Unmount everything below the root, deepest first.
	local m
	for m in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}
cleanup() {
	umount_all
	# Loop devices the tests left attached to files inside the root.
	losetup -l -n -O NAME,BACK-FILE 2>/dev/null | awk -v r="$root" 'index($2, r "/") == 1 {print $1}' |
		xargs -r -n1 losetup -d 2>/dev/null || true
	if [[ $keep == 0 ]]; then rm -rf --one-file-system "$root"; fi
}
# A root left by a killed run is removed first.
keep_saved=$keep
keep=0
cleanup
keep=$keep_saved
trap cleanup EXIT

suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
mirror=${MIRROR:-http://deb.debian.org/debian}
echo "fresh-root: debootstrap $suite (minbase) into $root" >&2
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$base/debootstrap.log" 2>&1 || {
	tail -20 "$base/debootstrap.log" >&2
	exit 1
}
# apt sources as the host has them (security and updates too).
cp -a /etc/apt/sources.list.d/. "$root/etc/apt/sources.list.d/" 2>/dev/null || true
[[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The site's TLS trust is the machine's network set-up, not a package: a
# fresh machine behind the same egress proxy trusts the same CAs (here a
# custom one), so the root gets the host's bundle, and nothing else.
# The site's own CAs go where update-ca-certificates keeps them too, so
# that deps.sh installing ca-certificates rebuilds a bundle that has them.
mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
[[ -d /usr/local/share/ca-certificates ]] && cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"

# The root is a mount point of its own, as / is on a machine: `ip netns`
# (mount --make-rslave /) fails on a bare chroot directory.
mount --bind "$root" "$root"
mount --make-private "$root"
for m in proc sys dev dev/pts; do
	mkdir -p "$root/$m"
done
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mkdir -p "$root/run" "$root/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
chmod 1777 "$root/tmp"

echo "fresh-root: installing gcc (the machine's only package besides Go)" >&2
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
	sh -c 'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends gcc libc6-dev >/dev/null'

mkdir -p "$root/usr/local"
cp -a "$GOROOT" "$root/usr/local/go"
mkdir -p "$root/src/etcdscope"
git clone -q --no-local "$top" "$root/src/etcdscope"
# .ci/run reads shared/ beside the clone in CI; copy it the same way if here.
[[ -d $top/../shared ]] && cp -a "$top/../shared" "$root/src/shared"

# The command runs with the root as its mount namespace's "/", not in a
# chroot: pivot_root in a namespace of its own, as a machine boots. In a
# chroot, a container's pivot_root (runc) lands under the chroot's path
# while the namespace's root stays the host's "/", so `runc exec` (what
# `ctr tasks exec` and `kubectl exec` do) setns'es into the host's "/" and
# finds nothing of the image ("stat /etcdscope: no such file or
# directory" in the node test). Mounts the command makes die with the
# namespace; loop devices are cleaned up below.
echo "fresh-root: running '$*' in the root (pivot_root in a mount namespace of its own)" >&2
rc=0
mkdir -p "$root/.oldroot"
unshare --mount --propagation private sh -c '
	cd "$1" && pivot_root . .oldroot && umount -l /.oldroot && shift && exec chroot . "$@"' sh "$root" \
	/usr/bin/env -i HOME=/root TERM=dumb \
	PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	GOFLAGS=-buildvcs=false ETCDSCOPE_REQUIRE_BPF=1 CI=true \
	SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
	sh -c 'cd /src/etcdscope && mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; exec "$@"' sh "$@" || rc=$?
echo "fresh-root: '$*' exited $rc" >&2
exit $rc
