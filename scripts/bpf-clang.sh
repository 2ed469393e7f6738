#!/bin/sh
# bpf-clang.sh: clang for bpf2go (make generate sets BPF_CLANG to it), run
# with every path under the work tree rewritten to a symlink whose path has
# the same length on every machine. Why: clang 19 lays out an object's BTF
# (the forward declarations for a kernel struct's pointer members) in heap
# address order, and the heap moves with the length of the source path it
# was given, so the committed objects changed with the checkout's location
# (CI's clean clone failed make check-generate). The real compiler is
# $BPF_CLANG_REAL (default clang-19).
set -eu
real=${BPF_CLANG_REAL:-clang-19}
top=$(cd "$(dirname "$0")/.." && pwd -P)
link=$(mktemp -d /tmp/etcdscope-bpfcc.XXXXXXXXXX)
trap 'rm -rf "$link"' EXIT
ln -s "$top" "$link/t"
here=$(pwd -P)
case $here in
"$top"*) cd "$link/t${here#"$top"}" ;;
esac
n=$#
for a do
	case $a in
	*"$top"*) a=$(printf '%s' "$a" | sed "s|$top|$link/t|g") ;;
	esac
	set -- "$@" "$a"
done
shift "$n"
"$real" "$@"
