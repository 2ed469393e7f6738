package tracer

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
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

// HVOp is the system call (or io_uring request) of a HypervisorIO event.
type HVOp uint8

// Hypervisor I/O operations (enum hv_op in bpf/hypervisor.h).
const (
	HVPread64      HVOp = 1
	HVPwrite64     HVOp = 2
	HVPreadv       HVOp = 3
	HVPwritev      HVOp = 4
	HVPreadv2      HVOp = 5
	HVPwritev2     HVOp = 6
	HVIOSubmit     HVOp = 7 // aio=native: Nr iocbs; FD/Opcode of the first
	HVIOUringEnter HVOp = 8 // aio=io_uring: FD is the ring
	HVIOUringReq   HVOp = 9 // one io_uring request, submit to completion
)

// String returns the system call's name ("pwritev", "io_submit",
// "io_uring_enter") or "io_uring_req".
func (o HVOp) String() string {
	switch o {
	case HVPread64:
		return "pread64"
	case HVPwrite64:
		return "pwrite64"
	case HVPreadv:
		return "preadv"
	case HVPwritev:
		return "pwritev"
	case HVPreadv2:
		return "preadv2"
	case HVPwritev2:
		return "pwritev2"
	case HVIOSubmit:
		return "io_submit"
	case HVIOUringEnter:
		return "io_uring_enter"
	case HVIOUringReq:
		return "io_uring_req"
	}
	return fmt.Sprintf("op%d", uint8(o))
}

// HypervisorIO is one I/O call of the hypervisor process on a file, entry
// to exit (for HVIOUringReq: io_uring_submit_req to io_uring_complete).
type HypervisorIO struct {
	Op         HVOp
	PID, TID   uint32
	Comm       string
	FD         int32     // the file (io_uring_enter: the ring's fd)
	Dev        event.Dev // the file's filesystem (s_dev), or the device if IsBlockdev
	IsBlockdev bool
	Ino        uint64
	FSType     string
	Names      []string // d_name of the file, its parent, ... (innermost first)
	// ODirect, ODsync, OSync: the file was opened with O_DIRECT (QEMU's
	// cache=none/directsync), O_DSYNC, O_SYNC (read from f_flags at entry).
	ODirect, ODsync, OSync bool
	Opcode                 uint8  // io_submit: aio_lio_opcode of iocb 0 (IOCB_CMD_*); io_uring: IORING_OP_*
	Nr                     uint32 // io_submit: iocbs passed; io_uring_enter: to_submit
	StartNs, EndNs         uint64 // CLOCK_MONOTONIC ns
	Ret                    int64  // bytes, count, or -errno (io_uring: the cqe's res)
}

// HypervisorTracer records the image-file I/O of a hypervisor process into
// its own ring buffer (the fsync/fdatasync calls come from FsyncTracer).
type HypervisorTracer struct {
	objs    hypervisorObjects
	links   []link.Link
	progs   []*ebpf.Program // attached, kept open for Missed
	ring    *quietRing
	untrace func()
	probes  []Probe
	rec     ringbuf.Record
	closed  bool
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
	if t.untrace, err = Tracefs(); err != nil {
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
	// The io_uring tracepoints exist only with CONFIG_IO_URING (and under
	// these names since Linux 5.19); without them aio=io_uring shows only
	// as io_uring_enter calls.
	uring := true
	for _, name := range []string{"io_uring_submit_req", "io_uring_complete"} {
		if !tracepointExists("io_uring", name) {
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
	for _, name := range []string{"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "io_submit", "io_uring_enter"} {
		for _, dir := range []string{"sys_enter_", "sys_exit_"} {
			p := progs[dir+name]
			l, err := link.Tracepoint("syscalls", dir+name, p, nil)
			if err != nil {
				closeProgs(progs)
				return nil, fmt.Errorf("attaching tracepoint/syscalls/%s%s (needs CONFIG_FTRACE_SYSCALLS): %w", dir, name, err)
			}
			t.links = append(t.links, l)
			t.probes = append(t.probes, Probe{Name: "tracepoint/syscalls/" + dir + name, Attached: true})
		}
	}
	for _, name := range []string{"io_uring_submit_req", "io_uring_complete"} {
		p, ok := progs[name]
		if !ok {
			t.probes = append(t.probes, Probe{Name: "tracepoint/io_uring/" + name, Why: "no io_uring tracepoint (CONFIG_IO_URING=n or a kernel before 5.19): io_uring requests not timed"})
			continue
		}
		l, err := link.Tracepoint("io_uring", name, p, nil)
		if err != nil {
			closeProgs(progs)
			return nil, fmt.Errorf("attaching tracepoint/io_uring/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, Probe{Name: "tracepoint/io_uring/" + name, Attached: true})
	}
	for _, p := range progs {
		t.progs = append(t.progs, p)
	}
	if t.ring, err = openQuietRing(t.objs.HvEvents); err != nil {
		return nil, err
	}
	return t, nil
}

func closeProgs(progs map[string]*ebpf.Program) {
	for _, p := range progs {
		p.Close()
	}
}

// tracepointExists reports whether tracefs lists the tracepoint
// system/name.
func tracepointExists(system, name string) bool {
	for _, r := range tracefsRoots {
		if _, err := os.Stat(r + "/events/" + system + "/" + name); err == nil {
			return true
		}
	}
	return false
}

// Probes lists every probe with whether it is attached.
func (t *HypervisorTracer) Probes() []Probe { return t.probes }

// Lost returns how many events did not fit in the ring buffer or in a map
// (summed over CPUs) since the tracer started.
func (t *HypervisorTracer) Lost() (uint64, error) {
	var perCPU []uint64
	if err := t.objs.HvLost.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading hv_lost: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// Read blocks until the next event and returns it. It returns ErrClosed
// after Close and ErrDrained once Drain has emptied the ring buffer.
// Records are decoded by fixed layout (the bpf2go struct).
func (t *HypervisorTracer) Read() (HypervisorIO, error) {
	for {
		if err := t.ring.read(&t.rec); err != nil {
			return HypervisorIO{}, err
		}
		raw := t.rec.RawSample
		if len(raw) == 0 {
			continue
		}
		if len(raw) < int(unsafe.Sizeof(hypervisorHvEvent{})) {
			return HypervisorIO{}, errShort("hypervisor", len(raw))
		}
		return decodeHypervisor((*hypervisorHvEvent)(unsafe.Pointer(&raw[0]))), nil
	}
}

func decodeHypervisor(e *hypervisorHvEvent) HypervisorIO {
	io := HypervisorIO{
		Op: HVOp(e.Op), PID: e.Pid, TID: e.Tid, Comm: cstr(e.Comm[:]), FD: e.Fd,
		Dev: event.Dev(e.Dev), IsBlockdev: e.IsBlockdev != 0, Ino: e.Ino, FSType: cstr(e.Fstype[:]),
		ODirect: e.FileFlags&1 != 0, ODsync: e.FileFlags&2 != 0, OSync: e.FileFlags&4 != 0,
		Opcode: e.Opcode, Nr: e.Nr, StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret,
	}
	for i := range e.Names {
		n := cstr(e.Names[i][:])
		if n == "" {
			break
		}
		io.Names = append(io.Names, n)
	}
	return io
}

// Missed returns how many times the kernel skipped one of the tracer's
// programs because a BPF program was already running on that CPU
// (bpf_prog_info.recursion_misses summed; 0 where the kernel does not
// count them). Each miss is an event lost.
func (t *HypervisorTracer) Missed() uint64 {
	var n uint64
	for _, p := range t.progs {
		if st, err := p.Stats(); err == nil {
			n += st.RecursionMisses
		}
	}
	return n
}

// Drain makes a Read in progress, and the ones after it, return every
// record already in the ring buffer and then ErrDrained.
func (t *HypervisorTracer) Drain() error { return t.ring.drain() }

// Close detaches every probe and frees every object; it is safe to call
// more than once and on a half-built tracer.
func (t *HypervisorTracer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	if t.ring != nil {
		errs = append(errs, t.ring.close())
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
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
