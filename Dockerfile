# etcdscope image: the static binary alone, no base image (FROM scratch).
# Build it with `make image IMAGE=registry.example.com/etcdscope:v0.1.0`,
# which builds bin/etcdscope (static: CGO_ENABLED=0, version stamped from
# `git describe`) and then this file with buildah (or podman/docker build
# with the same context). The BPF objects are embedded in the binary; the
# kernel's BTF, bpffs and tracefs come from the host (deploy/daemonset.yaml).
FROM scratch
ARG VERSION=devel
LABEL org.opencontainers.image.title="etcdscope" \
      org.opencontainers.image.description="Where etcd's commit latency goes: WAL fdatasync by kernel layer, Raft peer RTT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/etcdscope/etcdscope"
COPY bin/etcdscope /etcdscope
# Root: the tracers need CAP_BPF/CAP_PERFMON and read root-owned /sys and
# /proc files; the DaemonSet drops every other capability.
USER 0:0
ENTRYPOINT ["/etcdscope"]
CMD ["serve"]
