package tracer

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// pollInterval is how often a quietRing looks at its ring buffer: the
// programs commit records without waking the reader (bpf/ring.h) unless
// the ring is an eighth full, so events reach userspace within this much
// time while they keep coming (an empty ring may be polled less often:
// idlePoll). Each poll costs the Go runtime ~150 µs of CPU here (make bench):
// 10 ms was ~1.5% of a core for an idle tracer, 50 ms is ~0.5-0.9%. A
// report is read in seconds, and a burst wakes the reader at once, so the
// latency is free.
const pollInterval = 50 * time.Millisecond

// idlePoll is every quiet ring's longest poll: after a poll that found
// its ring empty the next waits twice as long, up to this, and one that
// found a record puts it back to pollInterval. An idle tracer then wakes 5
// times a second instead of 20 (each poll wakes ~6 of the runtime's
// threads here: bench/findings.md 26, 28, 34, 36). The loss bound is the
// kernel's wake-up at an eighth full (bpf/ring.h), which no poll length
// changes; what it costs is latency: the first record after a quiet spell
// reaches the sinks (an interval line, serve's metrics and
// /commit/entries) up to this late. Under load the poll stays
// pollInterval: 200 ms there too cost 4% more CPU per call at 10k
// fsync/s (findings 28). The peers reader looks a socket's owner up in
// /proc when it reads the socket's first record that needs it, which must
// be while the socket is open: that record wakes it at once
// (bpf/peers.bpf.c, peer_submit), so the owner look-up does not wait for
// the poll (findings 34). The commit and hypervisor readers need no such
// wake-up (findings 36): the commit pipeline's joins are by Raft entry and
// by time within the records, whatever order and delay they are read in,
// and a run's end drains the ring; the hypervisor pipeline names an image
// by its fd in /proc, which the hypervisor holds open while it runs, and
// else by the names the kernel captured, as the fsync tracer's.
const idlePoll = 4 * pollInterval

// quietRing reads a ring buffer whose programs commit quietly (bpf/ring.h):
// the fsync, hypervisor, commit and peers tracers'. Between records it waits
// in Go's netpoller (ringWait), at most its poll, rather than in the
// reader's epoll_wait: a thread blocked in a syscall keeps the runtime's
// sysmon waking every 20 µs to 10 ms, which was most of etcdscope's CPU at
// 10k fsync/s (docs/performance.md). The reader then only collects.
type quietRing struct {
	rd   *ringbuf.Reader
	m    *ebpf.Map
	wait ringWait
	// poll is the next wait for an empty ring: pollInterval, doubled
	// after each poll that found nothing, up to idlePoll. found: a record
	// was read since the last wait.
	poll  time.Duration
	found bool
	// reads counts records read; every peakEvery-th read, and after each
	// wait, samples the unread bytes into peak (atomic loads of the ring's
	// positions): how full a starved or slow reader let the ring get.
	reads uint64
	peak  atomic.Uint64
	// mu orders samplePeak with close: the reader's AvailableBytes reads
	// its ring mapping without its lock, and Close unmaps it.
	mu     sync.Mutex
	closed bool
	// drained is set by drain before it flushes the reader: from then on a
	// read that finds the ring empty returns ringbuf.ErrFlushed, every
	// time. The reader reports its flush once, so a caller that consumed
	// that one report (PeersTracer.Read handing out a learned owner first)
	// would otherwise wait on an empty ring for good.
	drained atomic.Bool
}

// peakEvery: records between two samples of the ring's fill level.
const peakEvery = 64

// openQuietRing opens m's reader. An empty ring is polled less often the
// longer it stays empty: pollInterval, then up to idlePoll.
func openQuietRing(m *ebpf.Map) (*quietRing, error) {
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("opening ring buffer: %w", err)
	}
	rd.SetDeadline(time.Now().Add(pollInterval))
	return &quietRing{rd: rd, m: m, poll: pollInterval}, nil
}

// nextPoll returns how long the next wait for an empty ring may last and
// starts counting the records read after it.
func (q *quietRing) nextPoll() time.Duration {
	if q.found {
		q.poll = pollInterval
	} else {
		q.poll = min(2*q.poll, idlePoll)
	}
	q.found = false
	return q.poll
}

// read blocks until the next record and reads it into rec. It returns
// ringbuf.ErrClosed after close and ringbuf.ErrFlushed once drain has
// emptied the ring, on that read and every read after it.
func (q *quietRing) read(rec *ringbuf.Record) error {
	if q == nil { // a tracer that never opened its ring
		return ErrClosed
	}
	if q.reads++; q.reads%peakEvery == 0 {
		q.samplePeak()
	}
	for {
		err := q.rd.ReadInto(rec)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			q.found = q.found || err == nil
			return err
		}
		if q.drained.Load() { // empty after drain: its report may be gone
			return ringbuf.ErrFlushed
		}
		// The ring is empty: wait for the kernel's wake-up or the next poll.
		d := q.nextPoll()
		if q.wait.wait(q.m, d) {
			q.rd.SetDeadline(time.Now())
		} else { // no netpoller for this fd: the reader waits
			q.rd.SetDeadline(time.Now().Add(d))
		}
		q.samplePeak()
	}
}

func (q *quietRing) samplePeak() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if a := uint64(q.rd.AvailableBytes()); a > q.peak.Load() {
		q.peak.Store(a)
	}
}

// peakBytes returns the most unread data the reader has seen in the ring
// (sampled: a lower bound), in bytes including the ring's 8-byte record
// headers. Safe to call from any goroutine.
func (q *quietRing) peakBytes() uint64 {
	if q == nil {
		return 0
	}
	return q.peak.Load()
}

// readFixed reads the next non-empty record, which must hold a T (a
// bpf2go struct), and returns it in place: valid until the next read.
// what names the record in the error of a short one.
func readFixed[T any](q *quietRing, rec *ringbuf.Record, what string) (*T, error) {
	for {
		if err := q.read(rec); err != nil {
			return nil, err
		}
		if len(rec.RawSample) != 0 {
			return fixed[T](rec.RawSample, what)
		}
	}
}

// drain makes a read in progress, and the ones after it, return every
// record already in the ring and then ringbuf.ErrFlushed. (The reader's
// SetDeadline would wait for a blocked read to wake first.)
func (q *quietRing) drain() error {
	if q == nil {
		return ErrClosed
	}
	q.drained.Store(true)
	err := q.rd.Flush()
	q.wait.wake()
	return err
}

func (q *quietRing) close() error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	err := q.rd.Close()
	q.wait.close()
	return err
}

// ringWait waits for the ring buffer in Go's netpoller: a duplicate of the
// map's fd registered there (the map polls readable when the kernel wakes
// the ring: BPF_RB_FORCE_WAKEUP past an eighth full). The goroutine parks
// without a thread in a syscall. Safe for one waiter and concurrent
// wake/close.
type ringWait struct {
	mu     sync.Mutex
	f      *os.File // nil until the first wait
	rc     syscall.RawConn
	closed bool
}

// wait returns when the ring was woken, after d, or when wake or close
// is called. It returns false at once if the map's fd cannot be waited on
// this way (then the caller has the reader wait).
func (w *ringWait) wait(m *ebpf.Map, d time.Duration) bool {
	w.mu.Lock()
	if w.f == nil && !w.closed {
		if fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			unix.SetNonblock(fd, true)
			w.f = os.NewFile(uintptr(fd), "ringbuf")
			if w.rc, err = w.f.SyscallConn(); err != nil {
				w.f.Close()
				w.f, w.closed = nil, true
			}
		}
	}
	f, rc := w.f, w.rc
	w.mu.Unlock()
	if f == nil || f.SetReadDeadline(time.Now().Add(d)) != nil {
		return false
	}
	first := true
	rc.Read(func(uintptr) bool {
		if first { // wait for readiness once; return on the next call
			first = false
			return false
		}
		return true
	})
	return true
}

// wake ends a wait in progress; one that starts after it waits as usual
// (Drain's callers see ErrDrained within the ring's poll then).
func (w *ringWait) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.SetReadDeadline(time.Now())
	}
}

func (w *ringWait) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.f != nil {
		w.f.Close()
	}
}
