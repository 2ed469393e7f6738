// Package tracer loads etcdscope's BPF programs, attaches them to kernel
// tracepoints, and streams decoded Go events (package event). It knows
// nothing of reports: attribution, statistics and output live in package
// analysis and cmd.
//
// Every tracer here follows one life cycle: New (feature-probe, load,
// attach; on any error everything already created is closed), Read (one
// event at a time from the ring buffer, until Close), Close (idempotent).
package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type fsync_event -type fsync_enter_event fsync ../bpf/fsync.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type blk_event -type flush_bio_event block ../bpf/block.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type journal_event journal ../bpf/journal.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 stacked ../bpf/stacked.bpf.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 extras ../bpf/extras.bpf.c
