#!/usr/bin/env bash
# node-test.sh: a single control-plane node on this machine, as kubeadm lays
# out its etcd, with etcdscope from deploy/daemonset.yaml as a static pod
# (make node-test; root; docs/deploy.md "The node test").
#
# It builds the parts, then runs node/node_test.go (build tag nodetest),
# which starts containerd and a standalone kubelet, checks the pods and
# tears everything down:
#   - bin/kubelet from the Go module proxy (tools/kubelet, k8s.io/kubernetes
#     v1.34: the last release whose kubelet starts on cgroup v1 without
#     being told to; 1.35 defaults failCgroupV1 to true);
#   - images with buildah, exported as docker archives for
#     `ctr images import`: etcdscope by `make image` under the reference
#     deploy/daemonset.yaml names, etcd from tools/etcd (static), and the
#     sandbox image from node/images/pause.c (gcc -static).
# The node's host network is a network namespace of its own (loopback and a
# veth pair, one end with the node's address and the default route): the test,
# containerd, the kubelet and the hostNetwork pods run in it, so etcd's
# 2379-2381 do not collide with another etcd on this machine.
# NODE_TEST_RUN narrows the Go tests; ETCDSCOPE_NODE_KEEP_LOGS=DIR keeps the
# kubelet's and containerd's logs.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "node-test: needs root (containerd, kubelet, BPF)" >&2; exit 1; }
./scripts/deps.sh node

t0=$(date +%s)
make -s kubelet
t1=$(date +%s)
echo "node-test: bin/kubelet ($(bin/kubelet --version)) in $((t1 - t0)) s"

work=$(mktemp -d /tmp/etcdscope-node.XXXXXX)
pause=localhost/etcdscope-node/pause:1
etcd_version=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 //p' tools/etcd/go.mod)
etcd=localhost/etcdscope-node/etcd:$etcd_version
scope=$(sed -n 's/^ *image: *//p' deploy/daemonset.yaml | head -1)
netns=etcdscope-node-$$
cleanup() {
	ip netns delete "$netns" 2>/dev/null || true
	for img in "$pause" "$etcd" "$scope"; do buildah rmi "$img" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT

gcc -static -O2 -Wall -o "$work/pause" node/images/pause.c
(cd tools/etcd && CGO_ENABLED=0 go build -trimpath -o "$work/etcd" .)
buildah build -q -f node/images/Containerfile.pause -t "$pause" "$work" >/dev/null
buildah build -q -f node/images/Containerfile.etcd -t "$etcd" "$work" >/dev/null
make -s image IMAGE="$scope" IMAGE_BUILDER=buildah >/dev/null
mkdir -p "$work/images"
buildah push -q "$pause" "docker-archive:$work/images/pause.tar:$pause" >/dev/null
buildah push -q "$etcd" "docker-archive:$work/images/etcd.tar:$etcd" >/dev/null
buildah push -q "$scope" "docker-archive:$work/images/etcdscope.tar:$scope" >/dev/null
t2=$(date +%s)
echo "node-test: images $pause $etcd $scope in $((t2 - t1)) s"

ip netns add "$netns"
ip -n "$netns" link set lo up
ip -n "$netns" link add node0 type veth peer name node1 # no dummy module here
node_ip=10.250.1.1
ip -n "$netns" addr add "$node_ip/24" dev node0
ip -n "$netns" link set node1 up
ip -n "$netns" link set node0 up
ip -n "$netns" route add default dev node0

go test -tags nodetest -c -o "$work/node.test" ./node
cd node # the test reads ../deploy
ETCDSCOPE_NODE_KUBELET=$PWD/../bin/kubelet ETCDSCOPE_NODE_IMAGES=$work/images \
	ETCDSCOPE_NODE_PAUSE=$pause ETCDSCOPE_NODE_ETCD_IMAGE=$etcd ETCDSCOPE_NODE_IP=$node_ip \
	nsenter --net="/run/netns/$netns" "$work/node.test" -test.count=1 -test.v -test.timeout 15m ${NODE_TEST_RUN:+-test.run "$NODE_TEST_RUN"} |
	tee "$work/node.out"
# A check the node could not judge (netem on a kernel without sch_netem)
# says SKIPPED in the result line, never a bare PASS.
skipped=$(sed -n 's/.*SKIPPED: \([^:]*\):.*/\1/p' "$work/node.out" | paste -sd ';' -)
echo "node-test: PASS${skipped:+ (SKIPPED: $skipped)} in $(($(date +%s) - t0)) s (kubelet $((t1 - t0)) s, images $((t2 - t1)) s)"
