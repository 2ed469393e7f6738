#!/bin/sh
# generate-elsewhere.sh: regenerate the BPF objects in a copy of the work
# tree at a path of another length and fail if any object differs from the
# tree's. Why: clang 19 can lay an object's BTF out by heap address (the
# forward declarations of a kernel struct's pointer members), and the heap
# moves with the length of the source's absolute path, so an object made in
# one checkout differed from CI's clean clone. scripts/bpf-clang.sh hides
# the path; this checks that it does. make check-generate runs it after its
# diff, with BPF_CLANG_REAL and BPF2GO_STRIP as make generate sets them.
set -eu
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A path longer than the tree's by at least 40 bytes: other malloc size classes.
copy="$tmp/$(printf '%*s' $(( ${#top} % 7 + 40 )) '' | tr ' ' x)"
mkdir "$copy"
cd "$top"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$copy"
(cd "$copy" && BPF_CLANG="$copy/scripts/bpf-clang.sh" go generate ./... >/dev/null)
bad=0
for f in $(git ls-files --cached --others --exclude-standard -- '*_bpfel.o' '*_bpfeb.o'); do
	if ! cmp -s "$f" "$copy/$f"; then
		echo "generate-elsewhere: $f differs when generated under $copy (the object depends on the checkout's path: see this script's comment)" >&2
		bad=1
	fi
done
exit $bad
