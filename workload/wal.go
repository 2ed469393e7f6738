// Package workload holds etcdscope's built-in writers: load shaped like
// etcd's WAL, so the tracer can be tried on a machine with no etcd
// (RunWAL), and the put load of `etcdscope commit --load` at a real etcd
// (Load).
package workload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// WAL workload defaults, from etcd's WAL (server/storage/wal): segments are
// preallocated to SegmentSizeBytes = 64 MiB with fallocate, and every
// record append is followed by fdatasync. 2300 bytes is the write size of
// the fio job etcd's maintainers recommend for checking a disk.
const (
	DefaultWALWriteBytes   = 2300
	DefaultWALSegmentBytes = 64 << 20
)

// WALOptions shapes the WAL workload.
type WALOptions struct {
	Dir string // data directory; segments go to Dir/member/wal
	// Root, if set, is Dir opened (e.g. safefile.Scratch's Root): segments
	// are made through it, so a look-alike put at Dir's path since is never
	// written. Without it Dir is opened as a Root at the start; either way
	// no link inside leads out of the directory.
	Root         *os.Root
	WriteBytes   int           // bytes per append; default DefaultWALWriteBytes
	SegmentBytes int64         // preallocated segment size; default DefaultWALSegmentBytes
	Rate         float64       // appends per second; 0 = as fast as fdatasync allows
	Duration     time.Duration // 0 = until ctx ends
	// Observe, if set, is called with each fdatasync's latency as measured
	// around the syscall in userspace (what fio and etcd measure).
	Observe func(time.Duration)
}

// WALStats counts what the workload did.
type WALStats struct {
	Appends  int64 // write+fdatasync pairs completed
	Segments int   // segment files created
}

// RunWAL appends WriteBytes records to preallocated segment files under
// Dir/member/wal, each followed by fdatasync(2), until ctx ends or Duration
// passes. When a segment fills it starts the next one, as etcd's WAL cut
// does (fsyncing the directory), and removes the one before it so the
// workload's disk use stays at two segments. It returns the first I/O
// error.
func RunWAL(ctx context.Context, o WALOptions) (WALStats, error) {
	if o.WriteBytes <= 0 {
		o.WriteBytes = DefaultWALWriteBytes
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultWALSegmentBytes
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	var st WALStats
	root := o.Root
	if root == nil {
		r, err := os.OpenRoot(o.Dir)
		if err != nil {
			return st, fmt.Errorf("opening %s: %w", o.Dir, err)
		}
		defer r.Close()
		root = r
	}
	w := walDir{root: root, dir: filepath.Join("member", "wal"), shown: filepath.Join(o.Dir, "member", "wal")}
	if err := root.MkdirAll(w.dir, 0o700); err != nil {
		return st, fmt.Errorf("creating %s: %w", w.shown, err)
	}
	buf := make([]byte, o.WriteBytes)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	var tick *time.Ticker
	if o.Rate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer tick.Stop()
	}
	var f *os.File
	var prev string
	var off int64
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for seq := 0; ; {
		if f == nil || off+int64(o.WriteBytes) > o.SegmentBytes {
			nf, name, err := w.newSegment(seq, o.SegmentBytes)
			if err != nil {
				return st, err
			}
			if f != nil {
				f.Close()
				root.Remove(prev)
			}
			f, prev, off = nf, name, 0
			seq++
			st.Segments++
		}
		if ctx.Err() != nil {
			return st, nil
		}
		if tick != nil {
			select {
			case <-ctx.Done():
				return st, nil
			case <-tick.C:
			}
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return st, fmt.Errorf("writing %s: %w", f.Name(), err)
		}
		off += int64(o.WriteBytes)
		t0 := time.Now()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return st, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		d := time.Since(t0)
		if o.Observe != nil {
			o.Observe(d)
		}
		st.Appends++
	}
}

// walDir is the segments' directory, reached through a Root.
type walDir struct {
	root  *os.Root
	dir   string // relative to root
	shown string // its path, for messages
}

// newSegment creates and preallocates segment seq, named like etcd's
// (seq-index.wal, 16 hex digits each), and fsyncs the directory. It
// returns the segment's name relative to the root.
func (w walDir) newSegment(seq int, size int64) (*os.File, string, error) {
	name := filepath.Join(w.dir, fmt.Sprintf("%016x-%016x.wal", seq, seq*1000))
	f, err := w.root.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC|unix.O_NOFOLLOW, 0o600) // never through a planted link
	if err != nil {
		return nil, "", fmt.Errorf("creating segment: %w", err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil && err != unix.EOPNOTSUPP {
		f.Close()
		return nil, "", fmt.Errorf("preallocating %s (%d bytes): %w", filepath.Join(w.shown, filepath.Base(name)), size, err)
	}
	if d, err := w.root.Open(w.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return f, name, nil
}
