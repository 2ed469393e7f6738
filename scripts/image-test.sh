#!/usr/bin/env bash
# image-test.sh: build the etcdscope image with buildah and run the binary
# from the image's own root filesystem (make image-test; root).
#
# An OCI runtime (crun/runc) cannot start containers on every host (this
# one has hybrid cgroups, which crun refuses), so the binary is run from
# the image's rootfs in two ways that need none:
#   1. `buildah run --isolation=chroot`: --version must print the version
#      the Makefile stamped (the same line as bin/etcdscope --version).
#   2. chroot into the mounted rootfs with /proc and a read-only /sys
#      bound in, as the DaemonSet mounts them: `serve` must load and attach
#      its BPF programs and export etcdscope_build_info with that version.
# It also checks the image: one layer holding only /etcdscope, a static
# ELF, entrypoint /etcdscope.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "image-test: needs root (buildah, BPF)" >&2; exit 1; }

image=localhost/etcdscope-image-test:$$
make -s image IMAGE="$image" IMAGE_BUILDER=buildah >/dev/null
ctr=$(buildah from "$image")
mnt=
serve_pid=
cleanup() {
	[[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	if [[ -n $mnt ]]; then
		umount -R "$mnt/sys" 2>/dev/null || true
		umount "$mnt/proc" 2>/dev/null || true
		buildah umount "$ctr" >/dev/null || true
	fi
	buildah rm "$ctr" >/dev/null || true
	buildah rmi "$image" >/dev/null || true
	rm -f "${log:-}"
}
trap cleanup EXIT
fail() { echo "image-test: FAIL: $*" >&2; exit 1; }

want=$(bin/etcdscope --version)
[[ $want == "etcdscope $(git describe --tags --always --dirty) "* ]] || fail "bin/etcdscope --version is '$want', not git describe's"

# The image: entrypoint, one layer, nothing but the binary.
ep=$(buildah inspect --format '{{.OCIv1.Config.Entrypoint}}' "$image")
[[ $ep == '[/etcdscope]' ]] || fail "entrypoint $ep"
mnt=$(buildah mount "$ctr")
files=$(cd "$mnt" && find . -mindepth 1 -not -path ./proc -not -path ./sys | sort | tr '\n' ' ')
[[ $files == "./etcdscope " ]] || fail "image holds $files, want only ./etcdscope"
file -b "$mnt/etcdscope" | grep -q 'statically linked' || fail "/etcdscope is not statically linked: $(file -b "$mnt/etcdscope")"

# 1. --version through buildah's chroot isolation.
got=$(buildah run --isolation=chroot "$ctr" /etcdscope --version)
[[ $got == "$want" ]] || fail "image --version '$got', want '$want'"
echo "image-test: buildah run --isolation=chroot: $got"

# 2. serve from the rootfs: BPF programs attached, build_info exported.
mkdir -p "$mnt/proc" "$mnt/sys"
mount -t proc proc "$mnt/proc"
mount --rbind /sys "$mnt/sys"
mount -o remount,bind,ro "$mnt/sys"
log=$(mktemp)
chroot "$mnt" /etcdscope serve --listen 127.0.0.1:0 --comm etcdscope-imgt >"$log" 2>&1 &
serve_pid=$!
addr=
for _ in $(seq 100); do
	addr=$(sed -n 's#^etcdscope serve: metrics on http://\(.*\)/metrics$#\1#p' "$log")
	[[ -n $addr ]] && break
	kill -0 "$serve_pid" 2>/dev/null || fail "serve exited: $(cat "$log")"
	sleep 0.2
done
[[ -n $addr ]] || fail "serve not listening within 20 s: $(cat "$log")"
metrics=$(curl -sf --max-time 10 "http://$addr/metrics")
ver=$(sed -n 's/^etcdscope \([^ ]*\) .*/\1/p' <<<"$want")
grep -q "^etcdscope_build_info{.*version=\"$ver\"} 1$" <<<"$metrics" || fail "no etcdscope_build_info with version $ver"
fsync=$(sed -n 's/^etcdscope_bpf_programs_attached{tracer="fsync"} //p' <<<"$metrics")
peers=$(sed -n 's/^etcdscope_bpf_programs_attached{tracer="peers"} //p' <<<"$metrics")
[[ ${fsync:-0} -gt 0 && ${peers:-0} -gt 0 ]] || fail "programs attached: fsync ${fsync:-none}, peers ${peers:-none}"
echo "image-test: serve from the image rootfs on $addr: $fsync fsync and $peers peers programs attached; $(grep '^etcdscope_build_info' <<<"$metrics")"
echo "image-test: PASS"
