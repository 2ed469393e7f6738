package pipeline

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/tracer"
)

// fakeSource yields its events, failing where errs says so, then io.EOF.
type fakeSource struct {
	evs  []event.Any
	errs map[int]error // read index -> error instead of an event
	i, j int
}

func (s *fakeSource) Read(ev *event.Any) error {
	defer func() { s.i++ }()
	if err, ok := s.errs[s.i]; ok {
		return err
	}
	if s.j >= len(s.evs) {
		return io.EOF
	}
	*ev = s.evs[s.j]
	s.j++
	return nil
}

type fakeHost struct{}

func (fakeHost) Device(d event.Dev) capture.Device {
	return capture.Device{Dev: d, Name: "vd" + d.String(), Disks: []event.Dev{d}}
}
func (fakeHost) Backing(disk event.Dev) capture.Backing { return capture.Backing{Disk: disk} }
func (fakeHost) Path(f *event.Fsync) string             { return "/data/member/wal/" + f.Comm + ".wal" }

type collect struct{ recs []analysis.FsyncRecord }

func (c *collect) Fsync(r *analysis.FsyncRecord) error { c.recs = append(c.recs, *r); return nil }

func fsyncAt(dev event.Dev, start uint64) event.Any {
	return event.Any{Kind: event.KindFsync, Fsync: event.Fsync{Syscall: event.SysFdatasync, PID: 1, TID: 1, Comm: "etcd", Dev: dev, FSType: "ext4", StartNs: start, EndNs: start + 1000}}
}

// TestDecodeErrorsCounted: a record that does not decode is counted and
// the loop goes on; only a run of failures with no event between ends it.
func TestDecodeErrorsCounted(t *testing.T) {
	var c collect
	var hooked []error
	p := NewFsyncLoop(FsyncLoopConfig{Host: fakeHost{}, Sinks: []FsyncSink{&c}, OnDecodeError: func(err error) { hooked = append(hooked, err) }})
	bad := errors.New("decoding event: unknown kind 9")
	src := &fakeSource{evs: []event.Any{fsyncAt(event.MkDev(254, 1), 10), fsyncAt(event.MkDev(254, 1), 20)}, errs: map[int]error{0: bad, 2: bad}}
	if err := p.Run(src); err != nil {
		t.Fatal(err)
	}
	if len(c.recs) != 2 || p.DecodeErrors() != 2 || len(hooked) != 2 || p.Records() != 2 {
		t.Fatalf("records %d, decode errors %d (hook %d), want 2 and 2", len(c.recs), p.DecodeErrors(), len(hooked))
	}
	if r := c.recs[0]; r.Path != "/data/member/wal/etcd.wal" || r.FileKind != analysis.KindWAL || r.DevName != "vd254:1" {
		t.Errorf("record not named: %+v", r)
	}

	errs := map[int]error{}
	for i := 0; i < maxConsecutiveErrors; i++ {
		errs[i] = bad
	}
	p = NewFsyncLoop(FsyncLoopConfig{Host: fakeHost{}})
	if err := p.Run(&fakeSource{errs: errs}); !errors.Is(err, bad) || !strings.Contains(err.Error(), "in a row") {
		t.Fatalf("a source failing forever: %v", err)
	}
}

// TestStopAfterAndDisk: the drain stops at the first fsync that began
// after the stop time, and a disk filter keeps only records on it.
func TestStopAfterAndDisk(t *testing.T) {
	var c collect
	a, b := event.MkDev(254, 1), event.MkDev(7, 3)
	p := NewFsyncLoop(FsyncLoopConfig{Host: fakeHost{}, Sinks: []FsyncSink{&c}, Disk: a})
	p.StopAfter(25)
	src := &fakeSource{evs: []event.Any{fsyncAt(a, 10), fsyncAt(b, 15), fsyncAt(a, 20), fsyncAt(a, 30), fsyncAt(a, 5)}}
	if err := p.Run(src); err != nil {
		t.Fatal(err)
	}
	if len(c.recs) != 2 || c.recs[0].StartNs != 10 || c.recs[1].StartNs != 20 {
		t.Fatalf("records %+v, want the two on %v before the stop", c.recs, a)
	}
}

// TestEndErrorsAreTracers: the errors that end a stream are tracer's own
// (pipeline names them by value so that it does not import tracer).
func TestEndErrorsAreTracers(t *testing.T) {
	for _, err := range []error{tracer.ErrClosed, tracer.ErrDrained, fmt.Errorf("reading: %w", tracer.ErrClosed), io.EOF} {
		if !isEnd(err) {
			t.Errorf("%v does not end a stream", err)
		}
	}
	if isEnd(errors.New("decoding event: unknown kind 9")) {
		t.Error("a decoding error ends a stream")
	}
}
