package tracer

import (
	"errors"

	"github.com/cilium/ebpf/link"
)

// addThreadProbe attaches one of the probes that follow the traced
// threads' every write(2) and context switch, and keeps how to attach it
// again after DetachThreadProbes.
func (t *FsyncTracer) addThreadProbe(attach func() (link.Link, error)) error {
	l, err := attach()
	if err != nil {
		return err
	}
	t.threadMu.Lock()
	defer t.threadMu.Unlock()
	t.threadProbes = append(t.threadProbes, attach)
	t.threadLinks = append(t.threadLinks, l)
	return nil
}

// DetachThreadProbes takes off the probes that run at the traced threads'
// every write(2) and context switch (FsyncConfig.Writes and Sched: the
// write-family syscall tracepoints, which put every syscall of every task
// on the machine on the slow path while attached, the writeback
// tracepoints, sched_switch and sched_wakeup), keeping their programs and
// maps; the fsync, block and journal probes stay. A call in flight across
// a detach or an attach misses the waits and scheduler states of the time
// between: only calls wholly inside an attached stretch are whole, which
// is all serve --commit-duty joins (the commit probes go on after these
// and off before them, and a call is joined only inside a (*WAL).sync the
// commit probes saw). Without Writes or Sched it does nothing.
func (t *FsyncTracer) DetachThreadProbes() error {
	t.threadMu.Lock()
	defer t.threadMu.Unlock()
	if t.threadOff {
		return nil
	}
	err := errors.Join(closeLinks(t.threadLinks)...)
	t.threadLinks, t.threadOff = nil, true
	return err
}

// AttachThreadProbes puts back what DetachThreadProbes took off. On an
// error the probes attached by then are taken off again. After Close it
// returns ErrClosed.
func (t *FsyncTracer) AttachThreadProbes() error {
	t.threadMu.Lock()
	defer t.threadMu.Unlock()
	if t.threadClosed {
		return ErrClosed
	}
	if !t.threadOff {
		return nil
	}
	links := make([]link.Link, 0, len(t.threadProbes))
	for _, attach := range t.threadProbes {
		l, err := attach()
		if err != nil {
			return errors.Join(append(closeLinks(links), err)...)
		}
		links = append(links, l)
	}
	t.threadLinks, t.threadOff = links, false
	return nil
}
