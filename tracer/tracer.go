package tracer

import (
	"sync"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
)

// Tracer is the shape every tracer of this package has, for its event
// type E (event.Any for FsyncTracer, event.Peer for PeersTracer,
// event.HypervisorIO for HypervisorTracer, event.Commit for CommitTracer). A pipeline can read any of
// them through it. Each is built by NewX(XConfig) (*X, error), which closes
// whatever it made when it fails.
type Tracer[E any] interface {
	// Read blocks until the next event and decodes it into ev, a value
	// the caller owns and may reuse (strings and slices in it are shared
	// with later events: read only). It returns ErrClosed after Close,
	// ErrDrained once Drain has emptied the ring buffer, and a decoding
	// error for a record it cannot decode (that record is consumed; the
	// next Read goes on).
	Read(ev *E) error
	// Lost returns how many events the kernel dropped because the ring
	// buffer (or a map) was full, summed over CPUs since the start. Read
	// it before Close.
	Lost() (uint64, error)
	// Missed returns how many program runs the kernel skipped because a
	// BPF program was already running on that CPU
	// (bpf_prog_info.recursion_misses summed; 0 where the kernel does not
	// count them). Each is an event lost.
	Missed() uint64
	// Probes lists every attachment point, attached or not (and why not).
	Probes() []event.Probe
	// ProgramStats returns the kernel's statistics of every loaded
	// program, sorted by name.
	ProgramStats() []event.ProgramStats
	// Drain makes a Read in progress, and the ones after it, return every
	// record already in the ring buffer and then ErrDrained: how a caller
	// stops without losing the events of calls that have already returned.
	Drain() error
	// Close detaches every probe and frees every object. It is safe to
	// call more than once, concurrently with Read, and on a half-built
	// tracer.
	Close() error
}

// Every tracer has the shape.
var (
	_ Tracer[event.Any]          = (*FsyncTracer)(nil)
	_ Tracer[event.Peer]         = (*PeersTracer)(nil)
	_ Tracer[event.HypervisorIO] = (*HypervisorTracer)(nil)
	_ Tracer[event.Commit]       = (*CommitTracer)(nil)
)

// ErrClosed is returned by Read after Close (it is os.ErrClosed).
var ErrClosed = ringbuf.ErrClosed

// ErrDrained is returned by Read once Drain has emptied the ring buffer.
var ErrDrained = ringbuf.ErrFlushed

// closeLinks detaches every link at once and returns their errors. The
// kernel's detach waits for RCU grace periods (a syscall tracepoint's perf
// event ~60 ms here, a uprobe more): one goroutine per link lets those
// waits overlap where the kernel allows it (the hypervisor tracer's 18
// syscall tracepoints: 1.10-1.15 s one after another, 0.68-0.70 s at once).
func closeLinks(links []link.Link) []error {
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return errs
}
