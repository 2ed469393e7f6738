#!/bin/sh
# Records the golden captures under testdata/capture (root; makes
# filesystems on loop devices): for each of ext4, XFS and btrfs on a loop
# device, the built-in WAL workload traced with --dev loopN; ext4 on a loop
# device again without --dev, so the loop driver's fsyncs of the backing
# file on the host filesystem are traced too (stacked levels); and a peers
# run over loopback on a private port. Next to each capture it writes what
# the live run printed (--output json), and the outputs of
# `etcdscope report CAPTURE` (table and JSON) are the goldens the tests
# compare against. It refuses to overwrite goldens unless FORCE=1.
#
# usage: sudo scripts/record-captures.sh [BINARY]
set -eu
cd "$(dirname "$0")/.."
bin=${1:-bin/etcdscope}
out=testdata/capture
if [ -e "$out/ext4.capture.jsonl" ] && [ "${FORCE:-0}" != 1 ]; then
	echo "record-captures: $out already holds goldens; FORCE=1 to record again" >&2
	exit 2
fi
mkdir -p "$out"
work=$(mktemp -d /var/tmp/etcdscope-goldens.XXXXXX)
loops=""
cleanup() {
	for m in "$work"/mnt-*; do [ -d "$m" ] && umount "$m" 2>/dev/null || true; done
	for l in $loops; do losetup -d "$l" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

fsrun() { # name fstype devflag(yes|no)
	name=$1 fstype=$2 devflag=$3
	truncate -s 512M "$work/$name.img"
	loop=$(losetup --find --show "$work/$name.img")
	loops="$loops $loop"
	case $fstype in
	ext4) mkfs.ext4 -q -F "$loop" ;;
	xfs) mkfs.xfs -q -f "$loop" ;;
	btrfs) mkfs.btrfs -q -f "$loop" ;;
	esac
	mkdir -p "$work/mnt-$name"
	mount "$loop" "$work/mnt-$name"
	dev=""
	[ "$devflag" = yes ] && dev="--dev $(basename "$loop")"
	# shellcheck disable=SC2086
	"$bin" fsync --workload wal --dir "$work/mnt-$name" --rate 120 --duration 2s --interval 0 \
		$dev --output json --capture "$out/$name.capture.jsonl" >"$out/$name.live.jsonl"
	"$bin" report "$out/$name.capture.jsonl" >"$out/$name.report.txt"
	"$bin" report --output json "$out/$name.capture.jsonl" >"$out/$name.report.jsonl"
	cmp "$out/$name.live.jsonl" "$out/$name.report.jsonl" # the replay prints what the live run did
	rm "$out/$name.live.jsonl"
}
fsrun ext4 ext4 yes
fsrun xfs xfs yes
fsrun btrfs btrfs yes
fsrun ext4-stacked ext4 no

# peers: connections over loopback to a private port while peers traces it.
port=23917
"$bin" peers --port $port --duration 3s --output json --capture "$out/peers.capture.jsonl" \
	--ready-file "$work/peers.ready" >"$out/peers.live.json" &
tracer=$!
while [ ! -e "$work/peers.ready" ]; do sleep 0.1; done
go run ./scripts/peertraffic -port $port -conns 20 -for 2s
wait $tracer
"$bin" report "$out/peers.capture.jsonl" >"$out/peers.report.txt"
"$bin" report --output json "$out/peers.capture.jsonl" >"$out/peers.report.json"
cmp "$out/peers.live.json" "$out/peers.report.json"
rm "$out/peers.live.json"
ls -l "$out"
