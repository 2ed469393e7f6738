package merge

import (
	"errors"
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
