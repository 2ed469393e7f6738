# etcdscope build. `make` builds bin/etcdscope without clang: the bpf2go
# output (*_bpfel.go/.o, *_bpfeb.go/.o) is committed. `make generate`
# rebuilds it from bpf/*.bpf.c and needs clang-19 and libbpf-dev.

GO       ?= go
CLANG    ?= clang-19
ETCD_DIR := tools/etcd
ETCD35_DIR := tools/etcd35

# The version the binary reports (--version, etcdscope_build_info):
# `git describe` of the checkout; internal/buildinfo falls back to the Go
# toolchain's build data when these are empty (go install).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X github.com/etcdscope/etcdscope/internal/buildinfo.version=$(VERSION) \
            -X github.com/etcdscope/etcdscope/internal/buildinfo.revision=$(REVISION)

# IMAGE is what `make image` tags; push it to your registry and put it in
# deploy/daemonset.yaml (docs/deploy.md). IMAGE_BUILDER: buildah, podman
# or docker, whichever is installed (all three take `build -f -t`).
IMAGE         ?= localhost/etcdscope:$(or $(VERSION),devel)
IMAGE_BUILDER ?= $(shell command -v buildah || command -v podman || command -v docker)

N ?= 10
.PHONY: flake-hunt fresh-root all build install generate test test-go vmtest vmtest-kernels scenario scenarios demo etcd etcd35 bench clean check-generate deps promtool prometheus prometheusrule image image-test fuzz kubelet node-test jaeger test-otlp

all: build

# build: a static binary (CGO_ENABLED=0: nothing in etcdscope needs cgo;
# the BPF objects are embedded), so the image needs no libc.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/etcdscope ./cmd/etcdscope

# image builds the container image from the static binary (Dockerfile,
# FROM scratch: no base image is pulled). Then:
#   make image IMAGE=registry.example.com/etcdscope:v0.1.0
#   buildah push registry.example.com/etcdscope:v0.1.0   (or podman/docker push)
image: build
	@test -n "$(IMAGE_BUILDER)" || { echo "make image: no buildah, podman or docker; apt-get install buildah" >&2; exit 2; }
	$(IMAGE_BUILDER) build -f Dockerfile -t $(IMAGE) --build-arg VERSION=$(or $(VERSION),devel) .

# image-test builds the image with Debian's buildah and runs the binary
# from the image's own root filesystem: --version must match the build,
# and `serve` must load its BPF programs and export etcdscope_build_info
# (scripts/image-test.sh; root; ~1 min; part of test: the README test command runs it).
image-test:
	./scripts/deps.sh image
	$(MAKE) build # after deps: VERSION is git describe's only once git is there
	./scripts/image-test.sh

# kubelet: the Kubernetes kubelet from the Go module proxy (tools/kubelet:
# k8s.io/kubernetes v1.34.4 and each k8s.io staging module at v0.34.4, one
# release for all), static, for make node-test. 1.34, not 1.35: from 1.35 the
# kubelet refuses cgroup v1 unless failCgroupV1 is set false (docs/deploy.md).
# --version reports the module's version (the ldflags Kubernetes' own build
# sets; without them it says v0.0.0-master). ~5.5 min on 2 shared cores
# with empty caches (modules ~10 s of it).
KUBELET_DIR := tools/kubelet
KUBELET_VERSION = $(shell sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[^ ]*\)$$/\1/p' $(KUBELET_DIR)/go.mod)
KUBELET_LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(KUBELET_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(patsubst v%,%,$(word 1,$(subst ., ,$(KUBELET_VERSION)))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBELET_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean
kubelet: bin/kubelet
bin/kubelet: $(KUBELET_DIR)/go.mod $(KUBELET_DIR)/go.sum $(KUBELET_DIR)/main.go
	cd $(KUBELET_DIR) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBELET_LDFLAGS)" -o ../../bin/kubelet .

# node-test: a single control-plane node on this machine (containerd, runc,
# the kubelet above, kubeadm's etcd static pod and deploy/daemonset.yaml's pod
# as a static pod) and etcdscope's WAL fdatasync count against etcd's
# (scripts/node-test.sh, node/node_test.go; root; not part of test).
node-test:
	./scripts/node-test.sh

# The docs/ paths etcdscope prints are the source tree's; make install puts
# the same tree under $(DOCDIR) so they resolve there too.
DOCDIR ?= /usr/local/share/doc/etcdscope
install: build
	install -m 0755 bin/etcdscope /usr/local/bin/etcdscope
	install -d -m 0755 $(DOCDIR)/docs $(DOCDIR)/bench
	install -m 0644 README.md $(DOCDIR)/README.md
	install -m 0644 docs/*.md $(DOCDIR)/docs/
	install -m 0644 bench/findings.md $(DOCDIR)/bench/findings.md

# vmlinux.h is this kernel's BTF as C (Linux 6.18 guest kernel, bpftool
# v7.1.0); CO-RE relocates field offsets, so one header serves every kernel
# with BTF. Regenerate it only on purpose: it is committed.
vmlinux.h:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@

# bpf2go runs clang through scripts/bpf-clang.sh so that the objects do
# not depend on where the tree is checked out (see that script); llvm-strip
# carries clang's version suffix, as bpf2go would derive it from clang-19.
generate:
	BPF_CLANG=$(CURDIR)/scripts/bpf-clang.sh BPF_CLANG_REAL=$(CLANG) \
	BPF2GO_STRIP=llvm-strip$(subst clang,,$(notdir $(CLANG))) $(GO) generate ./...

# check-generate fails if the committed objects drift from their C (.ci/run
# runs it; scripts/deps.sh generate installs clang-19, llvm-19, libbpf-dev).
# Objects generated but not committed (a new probe) fail it too, and so
# does an object that changes with the checkout's path (generate-elsewhere.sh).
check-generate: generate
	git diff --exit-code -- '*_bpfel.go' '*_bpfeb.go' '*_bpfel.o' '*_bpfeb.o'
	@new=$$(git ls-files --others --exclude-standard -- '*_bpfel.go' '*_bpfeb.go' '*_bpfel.o' '*_bpfeb.o'); \
	if [ -n "$$new" ]; then echo "generated but not committed:" $$new; exit 1; fi
	BPF_CLANG_REAL=$(CLANG) BPF2GO_STRIP=llvm-strip$(subst clang,,$(notdir $(CLANG))) ./scripts/generate-elsewhere.sh

# etcd is built from the Go module proxy at the version pinned in
# tools/etcd/go.mod (v3.6.16: a tiny main that calls etcdmain.Main, because
# `go install` of etcd's server module fails on its replace directives).
# Build time on 2 cores: empty module and build caches (fresh CI) ~1m45s,
# modules cached but cold build cache ~51 s, warm ~2 s.
etcd: bin/etcd
bin/etcd: $(ETCD_DIR)/go.mod $(ETCD_DIR)/go.sum $(ETCD_DIR)/main.go
	cd $(ETCD_DIR) && $(GO) build -o ../../bin/etcd .

# etcd35 is etcd v3.5 (tools/etcd35/go.mod, v3.5.35), built the same way
# but position-independent (-buildmode=pie, as Fedora's and RHEL's etcd are):
# e2e's TestCommitSplit runs `etcdscope commit` against v3.6 (an ordinary
# executable), v3.5 (PIE) and Debian's v3.4, so that a function etcd renamed,
# or a uprobe offset computed from an address instead of the file, shows up
# as a failing test. ~1 min on 2
# cores with its modules cached.
etcd35: bin/etcd35
bin/etcd35: $(ETCD35_DIR)/go.mod $(ETCD35_DIR)/go.sum $(ETCD35_DIR)/main.go
	cd $(ETCD35_DIR) && $(GO) build -buildmode=pie -o ../../bin/etcd35 .

# promtool built from the Go module proxy, with Kubernetes service
# discovery, which Debian's promtool leaves out: go test ./deploy prefers
# bin/promtool to check deploy/prometheus.yaml in full (docs/deploy.md).
# Module v0.316.0 is Prometheus 3.16. ~8 min on 2 cores with empty caches.
PROMTOOL_VERSION ?= v0.316.0
promtool: bin/promtool
bin/promtool:
	GOBIN=$(CURDIR)/bin $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

# prometheus: a Prometheus 3 server built from the Go module proxy (same
# version as promtool), which go test ./deploy and ./e2e then run beside
# Debian's 2.42 (the dashboard and rules in both histogram modes, diagnose
# against a fleet). Built without the cloud service discoveries
# (Prometheus's own remove_all_sd tag; the tests scrape static targets):
# 4m06s with empty module and build caches on 2 cores at load 5-6, 2m21s
# with the modules cached (2026-12-06), against ~15 min for the full
# server, so test-go builds it and CI checks a current 3.x in every run.
prometheus: bin/prometheus
bin/prometheus:
	GOBIN=$(CURDIR)/bin $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@$(PROMTOOL_VERSION)

# jaeger: Jaeger's all-in-one (`cmd/jaeger`, the OpenTelemetry Collector
# based Jaeger v2 of the Go module github.com/jaegertracing/jaeger v1.75.0),
# built from the Go module proxy in its own module (tools/jaeger: a `tool`
# directive, so Jaeger's dependencies stay out of etcdscope's go.mod), for
# e2e's TestClusterOTLPJaeger (make test-otlp): the collector the agents'
# spans go to, and whose query API the test reads them back from. On 2
# shared cores (2026-12-06): 25 s to download the modules, 7m31s to build
# with them cached and an empty build cache (load average 5-12 from other
# jobs), 9 s with both caches warm. Too slow for test-go (Prometheus, its
# model, adds ~2.5 min cold): its test skips without bin/jaeger.
JAEGER_DIR := tools/jaeger
JAEGER_VERSION = $(shell sed -n 's/^[[:space:]]*github.com\/jaegertracing\/jaeger \(v[^ ]*\).*$$/\1/p' $(JAEGER_DIR)/go.mod)
jaeger: bin/jaeger
bin/jaeger: $(JAEGER_DIR)/go.mod $(JAEGER_DIR)/go.sum
	cd $(JAEGER_DIR) && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$(JAEGER_VERSION)" \
		-o ../../bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

# test-otlp runs the OTLP traces' test against a real Jaeger (root; ~1 min
# once bin/jaeger is built): three etcd members on loopback, an agent with
# --otlp-endpoint on each, the traces read back from Jaeger's query API.
test-otlp: build etcd jaeger
	ETCDSCOPE_REQUIRE_BPF=1 $(GO) test -count=1 -run 'TestClusterOTLPJaeger' -v ./e2e

# prometheusrule regenerates deploy/prometheusrule.yaml (Prometheus
# Operator) from deploy/alerts.yaml; go test ./deploy fails when they differ.
prometheusrule:
	{ sed '/^spec:$$/q' deploy/prometheusrule.yaml; sed -n '/^groups:/,$$p' deploy/alerts.yaml | sed 's/^/  /; s/^  $$//'; } > deploy/prometheusrule.yaml.tmp
	mv deploy/prometheusrule.yaml.tmp deploy/prometheusrule.yaml

# flake-hunt runs the privileged suites N times, each round a fresh
# `go test -json -count=1` as root under ETCDSCOPE_REQUIRE_BPF=1, and
# prints each test's pass rate, worst time and smallest margin to a bound
# (tools/flakehunt; docs/testing.md keeps the latest table):
#   make flake-hunt PKGS="./e2e ./tracer" N=10 [RUN=regexp]
flake-hunt: build etcd etcd35
	ETCDSCOPE_REQUIRE_BPF=1 $(GO) run ./tools/flakehunt -n $(N) $(if $(RUN),-run '$(RUN)') $(or $(PKGS),./...)

# test-go runs every Go test; privileged ones skip unless root, and fail
# instead of skipping under ETCDSCOPE_REQUIRE_BPF=1 (CI). One package at a
# time (-p 1): the privileged tests compare latencies with fio's and etcd's
# and share etcd's ports, and on two cores a parallel package skews them.
test-go: build etcd etcd35 prometheus
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 40m ./...

# deps installs the Debian packages the tests need when one is missing
# (scripts/deps.sh; needs root, as the privileged tests do).
deps:
	./scripts/deps.sh

# test is the README's test command (scripts/test.sh, which needs no make
# on a fresh machine): the packages it needs, the Go tests here, then the VM
# rig.
test:
	./scripts/test.sh

# vmtest boots Debian 12's cloud kernel (6.1) under QEMU TCG and runs every
# package's //go:build vmtest tests inside (docs/vmtest.md). It needs no
# root; VMTEST_RUN=regex narrows the tests.
vmtest:
	./vmtest/run.sh

# vmtest-kernels runs the tracer's VM tests (the rig's smoke test; fsync,
# block, journal, writes, scheduler and peers in ./tracer; the dm level
# against ftrace in ./e2e) on each Debian kernel the README claims, one VM
# after another, and fails naming the kernels where any failed
# (docs/vmtest.md). KERNELS and KERNEL_PKGS narrow it.
KERNELS ?= 5.10 6.1 6.12
KERNEL_PKGS ?= ./vmtest/smoke ./tracer ./e2e
vmtest-kernels:
	@failed=; for k in $(KERNELS); do \
		echo "vmtest-kernels: Linux $$k ($(KERNEL_PKGS))"; \
		VMTEST_KERNEL_SERIES=$$k VMTEST_PKGS="$(KERNEL_PKGS)" ./vmtest/run.sh || failed="$$failed $$k"; \
	done; \
	if [ -n "$$failed" ]; then echo "vmtest-kernels: FAILED on$$failed" >&2; exit 1; fi; \
	echo "vmtest-kernels: PASS on $(KERNELS)"

# fuzz runs every Go fuzz target (the readers of outside input: recordings,
# merge inputs, etcd metrics text, netlink replies, netem options) for
# FUZZTIME each, one after another. `go test` runs their seed corpora and
# the crashers under testdata/fuzz as ordinary tests; this explores.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./analysis/jsonl:FuzzScan ./analysis:FuzzReadJSONL ./analysis/peers:FuzzReadEvents \
	./analysis/merge:FuzzMerge ./analysis/etcdmetric:FuzzParse ./analysis/diagnose:FuzzDiagnose \
	./netem:FuzzDecodeTcmsg ./netem:FuzzSpec ./analysis:FuzzAppendJSONString ./tracer:FuzzOpenGoBinary
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel 1 $$pkg; \
	done

# The field's cluster scenarios (docs/scenarios.md): three real etcd members
# in network namespaces of the VM rig, faults applied with etcdscope's own
# `netem --netns`, a write and read load, etcdscope peers, and a table of
# p50/p99 per phase against the same run's baseline and the model.
# `make vmtest` runs the stretched one (CI); `make scenario NAME=degraded`
# runs one, `make scenarios` all. Needs bin/etcd (make etcd).
SCENARIO_TIMEOUT ?= 1200
# The cluster split runs three members and three agents: 2 GiB in the guest.
SCENARIO_MEM ?= 2048
scenario: etcd
	@case "$(NAME)" in stretched|degraded|slowdisk|clustersplit) ;; *) echo "make scenario NAME=stretched|degraded|slowdisk|clustersplit (docs/scenarios.md)" >&2; exit 2 ;; esac
	VMTEST_PKGS=./vmtest/scenarios VMTEST_RUN='(?i)^TestVMScenario$(NAME)$$' VMTEST_MEM=$(SCENARIO_MEM) \
	VMTEST_TIMEOUT=$(SCENARIO_TIMEOUT) VMTEST_TEST_TIMEOUT=15m ./vmtest/run.sh

scenarios: etcd
	VMTEST_PKGS=./vmtest/scenarios VMTEST_RUN='^TestVMScenario' VMTEST_MEM=$(SCENARIO_MEM) \
	VMTEST_TIMEOUT=$(SCENARIO_TIMEOUT) VMTEST_TEST_TIMEOUT=15m ./vmtest/run.sh

# demo is the main job on the built-in default: an etcd-WAL-like writer
# traced by etcdscope itself.
demo:
	./scripts/demo.sh

# bench measures what etcdscope costs the machine it traces, interleaved
# against no tracer and bpftrace, and writes docs/performance.md (bench/run.sh).
# Needs root; installs fio and bpftrace if missing (scripts/deps.sh bench);
# ~4 min on 2 cores; not part of test.
bench: build etcd
	./scripts/deps.sh bench
	./bench/run.sh

# fresh-root runs the README's test command in a minimal Debian root made
# by debootstrap with only Go and gcc (scripts/fresh-root.sh; root, ~CI time).
fresh-root:
	./scripts/fresh-root.sh

clean:
	rm -rf bin
