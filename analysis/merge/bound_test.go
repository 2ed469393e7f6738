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
