package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/workload"
)

// WALScratchPrefix names the WAL workload's private directories.
const WALScratchPrefix = "etcdscope-wal-"

// WALWorkload is `etcdscope fsync --workload wal`, run in this process
// (so that a PID filter of ours traces it) until its context ends or it
// fails.
type WALWorkload struct {
	// Ended is closed when the workload ends; nil without a workload
	// (never ready: a Session's Wait ignores it).
	Ended <-chan struct{}
	// Done is closed when it ended, or at once without one.
	Done chan struct{}
	// Dir is the private directory it writes in ("" without one);
	// Stale the ones a killed run left, removed before it started.
	Dir   string
	Stale []string
	// Stats, Latencies (each fdatasync as timed in userspace, ns) and Err
	// are its outcome, to read after Done.
	Stats     workload.WALStats
	Latencies []int64
	Err       error
	scratch   *safefile.Scratch
}

// StartWALWorkload starts the WAL workload when run is set, in a private
// directory (0700, a fresh name) under parent (/var/tmp when ""): nothing
// another user planted there is written through, and scratch a killed run
// left is removed first. rate is appends per second (0: as fast as
// fdatasync returns). Without run the workload is one that never runs.
func StartWALWorkload(ctx context.Context, run bool, parent string, rate float64) (*WALWorkload, error) {
	w := &WALWorkload{Done: make(chan struct{})}
	if !run {
		close(w.Done)
		return w, nil
	}
	if parent == "" {
		parent = "/var/tmp"
	}
	scratch, stale, err := safefile.NewScratch(parent, WALScratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating workload directory: %w", err)
	}
	w.scratch, w.Ended, w.Dir, w.Stale = scratch, w.Done, scratch.Path, stale
	go func() {
		defer close(w.Done)
		w.Stats, w.Err = workload.RunWAL(ctx, workload.WALOptions{Dir: w.Dir, Root: scratch.Root, Rate: rate,
			Observe: func(d time.Duration) { w.Latencies = append(w.Latencies, int64(d)) }})
	}()
	return w, nil
}

// Running reports whether a workload was started.
func (w *WALWorkload) Running() bool { return w.scratch != nil }

// Remove deletes the workload's scratch directory.
func (w *WALWorkload) Remove() {
	if w.scratch != nil {
		w.scratch.Remove()
	}
}
