package tracer

import (
	"errors"
	"testing"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestCloseTwiceReadAfterClose: every tracer, built for real, closes
// twice without error, and Read after Close returns ErrClosed (which
// callers stop on) rather than blocking or decoding stale memory. A
// zero-value tracer (what a constructor that failed first closes) closes
// too, and Drain on it says ErrClosed instead of panicking.
func TestCloseTwiceReadAfterClose(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name string
		zero interface {
			Close() error
			Drain() error
		}
		open func() (interface{ Close() error }, func() error, error)
	}{
		{"fsync", &FsyncTracer{}, func() (interface{ Close() error }, func() error, error) {
			tr, err := NewFsync(FsyncConfig{})
			if err != nil {
				return nil, nil, err
			}
			return tr, func() error { return tr.Read(&event.Any{}) }, nil
		}},
		{"fsync --writes --sched", &FsyncTracer{}, func() (interface{ Close() error }, func() error, error) {
			tr, err := NewFsync(FsyncConfig{Writes: true, Sched: true})
			if err != nil {
				return nil, nil, err
			}
			return tr, func() error { return tr.Read(&event.Any{}) }, nil
		}},
		{"peers", &PeersTracer{}, func() (interface{ Close() error }, func() error, error) {
			tr, err := NewPeers(PeersConfig{})
			if err != nil {
				return nil, nil, err
			}
			return tr, func() error { return tr.Read(&event.Peer{}) }, nil
		}},
		{"hypervisor", &HypervisorTracer{}, func() (interface{ Close() error }, func() error, error) {
			tr, err := NewHypervisor(HypervisorConfig{})
			if err != nil {
				return nil, nil, err
			}
			return tr, func() error { return tr.Read(&event.HypervisorIO{}) }, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.zero.Close(); err != nil {
				t.Errorf("Close of a zero tracer: %v", err)
			}
			if err := c.zero.Drain(); !errors.Is(err, ErrClosed) {
				t.Errorf("Drain of a zero tracer: %v, want ErrClosed", err)
			}
			tr, read, err := c.open()
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := read(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestCloseConcurrent: Close is safe from several goroutines at once (the
// Tracer contract), on the zero value a failed constructor closes; under
// -race a plain closed flag fails here (CommitTracer's did).
func TestCloseConcurrent(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   interface{ Close() error }
	}{
		{"fsync", &FsyncTracer{}}, {"peers", &PeersTracer{}}, {"hypervisor", &HypervisorTracer{}}, {"commit", &CommitTracer{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := make(chan error, 8)
			for range cap(errs) {
				go func() { errs <- c.tr.Close() }()
			}
			for range cap(errs) {
				if err := <-errs; err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
}
