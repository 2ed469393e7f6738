package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type hv_event -type hv_op -type hv_file_flag hypervisor ../bpf/hypervisor.bpf.c

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// HypervisorConfig selects the hypervisor process whose image-file I/O the
// hypervisor tracer records. One of PID or Comm is usually set; zero values
// mean "any process".
type HypervisorConfig struct {
	PID  uint32 // only this process (tgid), e.g. QEMU's pid
	Comm string // only threads with this comm (≤ 15 bytes), e.g. "qemu-system-x86"
	// RingBytes is the ring buffer size (a power of two ≥ page size); 0
	// means DefaultRingBytes, ~7k events.
	RingBytes uint32
}

// HypervisorTracer records the image-file I/O of a hypervisor process into
// its own ring buffer (the fsync/fdatasync calls come from FsyncTracer).
// It has the shape of Tracer[event.HypervisorIO].
type HypervisorTracer struct {
	objs    hypervisorObjects
	links   []link.Link
	progs   map[string]*ebpf.Program // loaded, by name; kept open for Missed and ProgramStats
	ring    *quietRing
	untrace func()
	probes  []event.Probe
	rec     ringbuf.Record
	dec     decoder

	closeOnce sync.Once
	closeErr  error
}

// NewHypervisor loads and attaches the hypervisor programs. The read/write,
// io_submit and io_uring_enter syscall tracepoints are required; the
// io_uring request tracepoints are optional (CONFIG_IO_URING=n or an older
// kernel without io_uring_submit_req) and reported through Probes. Errors
// wrap ErrNoPrivilege or ErrNoBTF where those are the cause.
func NewHypervisor(cfg HypervisorConfig) (_ *HypervisorTracer, err error) {
	if err := prepare(cfg.Comm); err != nil {
		return nil, err
	}
	t := &HypervisorTracer{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.untrace, err = host.Tracefs(); err != nil {
		return nil, err
	}
	spec, err := loadHypervisor()
	if err != nil {
		return nil, fmt.Errorf("reading hypervisor object: %w", err)
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = DefaultRingBytes
	}
	spec.Maps["hv_events"].MaxEntries = ring
	if err := setVariables(spec, map[string]any{"targ_tgid": cfg.PID, "filter_comm": cfg.Comm != "", "targ_comm": commBytes(cfg.Comm),
		"hv_wake_bytes": uint64(ring / 8)}); err != nil {
		return nil, err
	}
	if err := applyCompat(spec); err != nil {
		return nil, err
	}
	// The io_uring tracepoints exist only with CONFIG_IO_URING (and under
	// these names since Linux 5.19); without them aio=io_uring shows only
	// as io_uring_enter calls.
	uring := true
	for _, name := range []string{"io_uring_submit_req", "io_uring_complete"} {
		if !host.TracepointExists("io_uring", name) {
			uring = false
		}
	}
	if !uring {
		delete(spec.Programs, "io_uring_submit_req")
		delete(spec.Programs, "io_uring_complete")
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, explainLoad("hypervisor programs", err)
	}
	// Assign by hand: the optional programs may be missing.
	t.objs.HvEvents, t.objs.HvLost = coll.Maps["hv_events"], coll.Maps["hv_lost"]
	t.objs.HvInflight, t.objs.HvRequests, t.objs.HvScratch = coll.Maps["hv_inflight"], coll.Maps["hv_requests"], coll.Maps["hv_scratch"]
	progs := coll.Programs
	t.progs = progs // Close closes them
	for _, name := range []string{"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "io_submit", "io_uring_enter"} {
		for _, dir := range []string{"sys_enter_", "sys_exit_"} {
			p := progs[dir+name]
			l, err := link.Tracepoint("syscalls", dir+name, p, nil)
			if err != nil {
				return nil, fmt.Errorf("attaching tracepoint/syscalls/%s%s (needs CONFIG_FTRACE_SYSCALLS): %w", dir, name, err)
			}
			t.links = append(t.links, l)
			t.probes = append(t.probes, event.Probe{Name: "tracepoint/syscalls/" + dir + name, Attached: true})
		}
	}
	for _, name := range []string{"io_uring_submit_req", "io_uring_complete"} {
		p, ok := progs[name]
		if !ok {
			t.probes = append(t.probes, event.Probe{Name: "tracepoint/io_uring/" + name, Dark: event.DarkIOUring, Reason: event.ReasonNoIOUringTracepoint})
			continue
		}
		l, err := link.Tracepoint("io_uring", name, p, nil)
		if err != nil {
			return nil, fmt.Errorf("attaching tracepoint/io_uring/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tracepoint/io_uring/" + name, Attached: true})
	}
	if t.ring, err = openQuietRing(t.objs.HvEvents); err != nil {
		return nil, err
	}
	return t, nil
}

// Probes lists every probe with whether it is attached.
func (t *HypervisorTracer) Probes() []event.Probe { return t.probes }

// Lost returns how many events did not fit in the ring buffer or in a map
// (summed over CPUs) since the tracer started.
func (t *HypervisorTracer) Lost() (uint64, error) {
	return sumPerCPU(t.objs.HvLost, "hv_lost")
}

// Read blocks until the next event and decodes it into ev (struct
// hv_event through its bpf2go type, without reflection or allocation once
// its strings have been seen; strings and Names are shared with other
// events: read only). It returns ErrClosed after Close and ErrDrained once
// Drain has emptied the ring buffer.
func (t *HypervisorTracer) Read(ev *event.HypervisorIO) error {
	e, err := readFixed[hypervisorHvEvent](t.ring, &t.rec, "hypervisor")
	if err != nil {
		return err
	}
	t.dec.hypervisor(ev, e)
	return nil
}

// hypervisor decodes struct hv_event (bpf/hypervisor.h).
func (d *decoder) hypervisor(io *event.HypervisorIO, e *hypervisorHvEvent) {
	flags := event.HVFileFlags(e.FileFlags)
	*io = event.HypervisorIO{
		Op: event.HVOp(e.Op), PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])), FD: e.Fd,
		Dev: event.Dev(e.Dev), IsBlockdev: e.IsBlockdev != 0, Ino: e.Ino, FSType: d.intern(cbytes(e.Fstype[:])),
		Names:   d.pathNames(e.Names[:]),
		ODirect: flags&event.HVODirect != 0, ODsync: flags&event.HVODsync != 0, OSync: flags&event.HVOSync != 0,
		Opcode: e.Opcode, Nr: e.Nr, StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret,
	}
}

// ProgramStats returns the statistics of the hypervisor tracer's loaded
// programs, sorted by name.
func (t *HypervisorTracer) ProgramStats() []event.ProgramStats {
	return programStats(t.progs)
}

// Missed returns how many times the kernel skipped one of the tracer's
// programs because a BPF program was already running on that CPU
// (bpf_prog_info.recursion_misses summed; 0 where the kernel does not
// count them). Each miss is an event lost.
func (t *HypervisorTracer) Missed() uint64 {
	var n uint64
	for _, p := range t.progs {
		n += missed(p)
	}
	return n
}

// Drain makes a Read in progress, and the ones after it, return every
// record already in the ring buffer and then ErrDrained.
func (t *HypervisorTracer) Drain() error { return t.ring.drain() }

// Close detaches every probe and frees every object; it is safe to call
// more than once and on a half-built tracer.
func (t *HypervisorTracer) Close() error {
	t.closeOnce.Do(func() { t.closeErr = t.close() })
	return t.closeErr
}

func (t *HypervisorTracer) close() error {
	var errs []error
	if t.ring != nil {
		errs = append(errs, t.ring.close())
	}
	errs = append(errs, closeLinks(t.links)...)
	t.links = nil
	for _, p := range t.progs {
		errs = append(errs, p.Close())
	}
	t.progs = nil
	errs = append(errs, t.objs.Close())
	if t.untrace != nil {
		t.untrace()
	}
	return errors.Join(errs...)
}
