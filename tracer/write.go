package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type write_event write ../bpf/write.bpf.c

import (
	"fmt"
	"maps"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// writeSyscalls are the write(2) family write.bpf.c follows: etcd's WAL
// appends with write(2), bbolt with pwrite64(2); writev and the pwritev
// pair for other writers of the same files.
var writeSyscalls = []string{"write", "pwrite64", "writev", "pwritev", "pwritev2"}

// loadWrite loads the write object (bpf/write.bpf.c) over the shared ring
// and the fsync object's file cache (bpf/filecache.h), with the same
// process filter as the fsync programs, and attaches its syscall and
// writeback tracepoints (all required once asked for: FsyncConfig.Writes).
func (t *FsyncTracer) loadWrite(shared ebpf.CollectionOptions, cfg FsyncConfig) error {
	spec, err := loadWrite()
	if err != nil {
		return fmt.Errorf("reading write object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	if err := setVariables(spec, filterVariables(cfg)); err != nil {
		return err
	}
	if err := applyCompat(spec); err != nil {
		return err
	}
	opts := shared
	opts.MapReplacements = maps.Clone(shared.MapReplacements)
	opts.MapReplacements["files"] = t.fsync.Files
	opts.MapReplacements["inflight"] = t.fsync.Inflight
	if err := spec.LoadAndAssign(&t.write, &opts); err != nil {
		return explainLoad("write programs", err)
	}
	for _, tp := range []struct {
		group, name string
		prog        *ebpf.Program
	}{
		{"syscalls", "sys_enter_write", t.write.SysEnterWrite},
		{"syscalls", "sys_enter_pwrite64", t.write.SysEnterPwrite64},
		{"syscalls", "sys_enter_writev", t.write.SysEnterWritev},
		{"syscalls", "sys_enter_pwritev", t.write.SysEnterPwritev},
		{"syscalls", "sys_enter_pwritev2", t.write.SysEnterPwritev2},
		// One exit program serves the five calls.
		{"syscalls", "sys_exit_write", t.write.SysExitWrite},
		{"syscalls", "sys_exit_pwrite64", t.write.SysExitWrite},
		{"syscalls", "sys_exit_writev", t.write.SysExitWrite},
		{"syscalls", "sys_exit_pwritev", t.write.SysExitWrite},
		{"syscalls", "sys_exit_pwritev2", t.write.SysExitWrite},
		{"writeback", "balance_dirty_pages", t.write.BalanceDirtyPages},
		{"writeback", writebackTracepoint("folio_wait_writeback", "wait_on_page_writeback"), t.write.FolioWaitWriteback},
		{"writeback", writebackTracepoint("writeback_dirty_folio", "writeback_dirty_page"), t.write.WritebackDirtyFolio},
	} {
		group, name, prog := tp.group, tp.name, tp.prog
		if err := t.addThreadProbe(func() (link.Link, error) {
			l, err := link.Tracepoint(group, name, prog, nil)
			if err != nil {
				return nil, fmt.Errorf("attaching tracepoint/%s/%s (--writes needs it): %w", group, name, err)
			}
			return l, nil
		}); err != nil {
			return err
		}
		t.probes = append(t.probes, event.Probe{Name: "tracepoint/" + tp.group + "/" + tp.name, Attached: true})
	}
	return nil
}

// writebackTracepoint returns the writeback tracepoint named folio, or
// page where this kernel has only that one (the folio names are Linux
// 5.17+; their programs read no argument, so one program serves both).
func writebackTracepoint(folio, page string) string {
	if !host.TracepointExists("writeback", folio) && host.TracepointExists("writeback", page) {
		return page
	}
	return folio
}

// writeRecord decodes struct write_event (bpf/write.h).
func (d *decoder) writeRecord(w *event.Write, e *writeWriteEvent) {
	*w = event.Write{
		Call: event.Fsync{
			Syscall: event.Syscall(e.Syscall), PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
			FD: e.Fd, Dev: event.Dev(e.Dev), IsBlockdev: e.IsBlockdev != 0, Ino: e.Ino,
			FSType: d.intern(cbytes(e.Fstype[:])), CgroupID: e.CgroupId, StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret,
			Names: d.pathNames(e.Names[:]),
		},
		ThrottledNs: e.ThrottledNs, Throttles: e.Throttles,
		WritebackWaitNs: e.WritebackWaitNs, WritebackWaits: e.WritebackWaits,
	}
}
