package merge

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// TestGuestIndexCaps: a GuestIndex takes MaxGuestCalls calls and
// MaxGuestFlushes flush requests, and refuses the next with
// ErrGuestTooLarge; calls on another device than Options.GuestDev are not
// counted.
func TestGuestIndexCaps(t *testing.T) {
	g := NewGuestIndex(Options{GuestDev: "vda"})
	r := analysis.FsyncRecord{DevName: "vda"}
	other := analysis.FsyncRecord{DevName: "vdb"}
	for i := 0; i < MaxGuestCalls; i++ {
		if err := g.Add(&r, jsonl.Span{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if err := g.Add(&other, jsonl.Span{}); err != nil {
			t.Fatalf("another device's call %d: %v", i+1, err)
		}
	}
	if err := g.Add(&r, jsonl.Span{}); !errors.Is(err, ErrGuestTooLarge) || !strings.Contains(err.Error(), "1048576 fsync calls") {
		t.Fatalf("call %d: %v", MaxGuestCalls+1, err)
	}
	flush := analysis.Request{Role: analysis.RoleFlush, IssueNs: 1, CompleteNs: 2}
	r.Requests = []analysis.Request{flush, flush, flush, flush}
	g = NewGuestIndex(Options{})
	for i := 0; i < MaxGuestFlushes/4; i++ {
		if err := g.Add(&r, jsonl.Span{}); err != nil {
			t.Fatalf("call %d with 4 flushes: %v", i+1, err)
		}
	}
	if err := g.Add(&r, jsonl.Span{}); !errors.Is(err, ErrGuestTooLarge) || !strings.Contains(err.Error(), "flush requests") {
		t.Fatalf("flush %d: %v", MaxGuestFlushes+1, err)
	}
}

// TestGuestIndexDevicesBounded (issue 25): a guest recording without
// --guest-dev whose calls name 10,000 distinct devices (a 150-byte name
// each) keeps MaxGuestDevices names and counts the rest; before, every
// name was held and all went into one error line (79 MB for 500,000).
func TestGuestIndexDevicesBounded(t *testing.T) {
	g := NewGuestIndex(Options{})
	pad := strings.Repeat("x", 150)
	for i := range 10000 {
		r := analysis.FsyncRecord{DevName: fmt.Sprintf("d%d%s", i, pad)}
		if err := g.Add(&r, jsonl.Span{}); err != nil {
			t.Fatal(err)
		}
	}
	names, more := g.Devices()
	if len(names) != MaxGuestDevices || !more || len(g.devs) != MaxGuestDevices {
		t.Errorf("%d names kept (%d in the index), more %v; want %d and more", len(names), len(g.devs), more, MaxGuestDevices)
	}
	g = NewGuestIndex(Options{})
	for _, d := range []string{"vdb", "vda", "vda"} {
		g.Add(&analysis.FsyncRecord{DevName: d}, jsonl.Span{})
	}
	if names, more := g.Devices(); strings.Join(names, ",") != "vda,vdb" || more {
		t.Errorf("Devices() = %v, %v; want [vda vdb], false", names, more)
	}
}

// TestHostIndexCap: a HostIndex holds MaxHostRecords flushes and image
// writes, and refuses the next with ErrHostTooLarge; records it does not
// hold (reads, failed flushes) are not counted.
func TestHostIndexCap(t *testing.T) {
	x := &HostIndex{paths: map[string]string{}, records: MaxHostRecords - 1}
	if err := x.addIO(&HostIO{Op: "pread64", Path: "/i", StartNs: 1, EndNs: 2}); err != nil {
		t.Fatalf("a read: %v", err)
	}
	if err := x.addFsync(&analysis.FsyncRecord{Path: "/i", Ret: -5}); err != nil {
		t.Fatalf("a failed fsync: %v", err)
	}
	if err := x.addFsync(&analysis.FsyncRecord{Path: "/i", StartNs: 1, EndNs: 2}); err != nil {
		t.Fatalf("the last flush held: %v", err)
	}
	if err := x.addIO(&HostIO{Op: "pwrite64", Path: "/i", StartNs: 1, EndNs: 2}); !errors.Is(err, ErrHostTooLarge) {
		t.Fatalf("one write more: %v", err)
	}
}

// TestHostIndexFilesCap: reads of MaxHostFiles distinct files are
// indexed (no flush or write among them: MaxHostRecords does not count
// them); one file more fails with ErrHostTooLarge.
func TestHostIndexFilesCap(t *testing.T) {
	x := &HostIndex{paths: map[string]string{}}
	for i := range MaxHostFiles {
		if err := x.addIO(&HostIO{Op: "pread64", Path: fmt.Sprintf("/f%d", i), StartNs: 1, EndNs: 2, Ret: 1}); err != nil {
			t.Fatalf("file %d: %v", i+1, err)
		}
	}
	if err := x.addFsync(&analysis.FsyncRecord{Path: "/f0", Ret: -5}); err != nil {
		t.Fatalf("a failed fsync of a file counted: %v", err)
	}
	if err := x.addFsync(&analysis.FsyncRecord{Path: "/one-more", Ret: -5}); !errors.Is(err, ErrHostTooLarge) {
		t.Fatalf("one file more: %v", err)
	}
}

// TestHostIndexThreadsBounded (issue 25): a host recording whose calls on
// one file come from 200,000 distinct threads holds MaxHostThreads of
// them and counts the calls of the rest; before, every thread was held
// (10.5 M of them 335 MiB).
func TestHostIndexThreadsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"hypervisor","v":1,"clock":"CLOCK_MONOTONIC","start_ns":1}` + "\n")
	const n = 200_000
	for i := range n {
		fmt.Fprintf(&b, `{"type":"hv_io","v":1,"op":"pwrite64","tid":%d,"path":"/i","start_ns":%d,"end_ns":%d,"ret":1}`+"\n", i+1, 10+i, 11+i)
	}
	x, err := ScanHost(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if held := len(x.images.threads["/i"]); held > MaxHostThreads {
		t.Errorf("%d threads held, want at most %d", held, MaxHostThreads)
	}
	im := x.Images()
	if len(im) != 1 || im[0].Threads != MaxHostThreads || im[0].ThreadsNotCounted != n-MaxHostThreads || im[0].Writes != n {
		t.Errorf("images %+v, want %d threads, %d calls not counted, %d writes", im, MaxHostThreads, n-MaxHostThreads, n)
	}
}

// TestHostPathBounded (issue 25): a path or syscall name longer than
// MaxHostPath is no recording etcdscope wrote: refused with
// ErrHostPathTooLong, before it is held; a path of MaxHostPath bytes is
// taken. Distinct syscall names past analysis.MaxSyscallNames are held as
// analysis.MoreSyscalls.
func TestHostPathBounded(t *testing.T) {
	head := `{"type":"hypervisor","v":1,"clock":"CLOCK_MONOTONIC","start_ns":1}` + "\n"
	long := "/" + strings.Repeat("p", MaxHostPath)
	for _, c := range []struct {
		name, line string
		err        error
	}{
		{"hv_io path", fmt.Sprintf(`{"type":"hv_io","v":1,"op":"pwrite64","tid":1,"path":%q,"start_ns":1,"end_ns":2,"ret":1}`, long), ErrHostPathTooLong},
		{"fsync path", fmt.Sprintf(`{"type":"fsync","v":1,"syscall":"fdatasync","tid":1,"path":%q,"start_ns":1,"end_ns":2}`, long), ErrHostPathTooLong},
		{"fsync syscall", fmt.Sprintf(`{"type":"fsync","v":1,"syscall":%q,"tid":1,"path":"/i","start_ns":1,"end_ns":2}`, long), ErrHostPathTooLong},
		{"PATH_MAX", fmt.Sprintf(`{"type":"hv_io","v":1,"op":"pwrite64","tid":1,"path":%q,"start_ns":1,"end_ns":2,"ret":1}`, long[:MaxHostPath]), nil},
	} {
		_, err := ScanHost(strings.NewReader(head + c.line + "\n"))
		if !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	var b strings.Builder
	b.WriteString(head)
	for i := range 100 {
		fmt.Fprintf(&b, `{"type":"fsync","v":1,"syscall":"s%d","tid":1,"path":"/i","start_ns":%d,"end_ns":%d}`+"\n", i, 10+i, 11+i)
	}
	x, err := ScanHost(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range x.fsyncs {
		names[f.Syscall] = true
	}
	if len(names) != analysis.MaxSyscallNames+1 || !names[analysis.MoreSyscalls] {
		t.Errorf("%d distinct syscall names held, want %d and %q", len(names), analysis.MaxSyscallNames, analysis.MoreSyscalls)
	}
}
