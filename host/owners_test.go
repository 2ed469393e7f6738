package host

import (
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// fakeScan is a SocketOwners for the resolver's tests: it answers held,
// and, if gate is not nil, signals entered and waits on gate first.
type fakeScan struct {
	held    map[uint64]uint32
	entered chan struct{}
	gate    chan struct{}
	fullNs  int64        // a full scan's CPU time
	cpuNs   atomic.Int64 // the worker's CPU clock: full scans only
}

func (f *fakeScan) cpu() time.Duration { return time.Duration(f.cpuNs.Load()) }

func (f *fakeScan) scan() map[uint64]uint32 {
	if f.gate != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	f.cpuNs.Add(f.fullNs)
	return f.held
}

// pids is SocketsOf over held.
func (f *fakeScan) pids(pids []uint32) map[uint64]uint32 {
	out := map[uint64]uint32{}
	for ino, pid := range f.held {
		if slices.Contains(pids, pid) {
			out[ino] = pid
		}
	}
	return out
}

func newTestResolver(t *testing.T, cfg SocketOwnerConfig, f *fakeScan) *SocketOwnerResolver {
	t.Helper()
	if cfg.MinScanInterval == 0 {
		cfg.MinScanInterval = time.Millisecond
	}
	if cfg.MaxScanShare == 0 {
		cfg.MaxScanShare = 1 // a gated scan's wait is not its cost
	}
	r := newSocketOwnerResolver(cfg, scanner{f.scan, f.pids, func(pid uint32) string { return "comm" + string(rune('0'+pid%10)) }, f.cpu})
	t.Cleanup(r.Close)
	return r
}

// waitScans waits until the resolver has done n scans.
func waitScans(t *testing.T, r *SocketOwnerResolver, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Scans < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d scans after 5 s, want %d: %+v", r.Stats().Scans, n, r.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSocketOwnerResolverLateOwner: the first Lookup of an inode is
// unknown (not a guess, not a block); after the worker's scan the owner is
// known and comes back once through TakeLearned with the caller's key; an
// inode no process holds is known as unowned and is not "learned".
func TestSocketOwnerResolverLateOwner(t *testing.T) {
	f := &fakeScan{held: map[uint64]uint32{100: 7}}
	r := newTestResolver(t, SocketOwnerConfig{}, f)
	if o, known := r.Lookup(0xa, 100); known || o != (SocketOwner{}) {
		t.Fatalf("first Lookup = %+v, %v; want unknown", o, known)
	}
	if _, known := r.Lookup(0xb, 200); known {
		t.Fatal("first Lookup of 200 known")
	}
	waitScans(t, r, 1)
	if o, known := r.Lookup(0xa, 100); !known || o != (SocketOwner{PID: 7, Comm: "comm7"}) {
		t.Errorf("Lookup after the scan = %+v, %v; want pid 7", o, known)
	}
	if o, known := r.Lookup(0xb, 200); !known || o.PID != 0 {
		t.Errorf("Lookup of an unheld inode = %+v, %v; want known, pid 0", o, known)
	}
	got := r.TakeLearned(nil)
	if len(got) != 1 || got[0] != (LearnedOwner{Key: 0xa, Ino: 100, Owner: SocketOwner{PID: 7, Comm: "comm7"}}) {
		t.Errorf("TakeLearned = %+v; want the owner of 100 with key 0xa", got)
	}
	if got := r.TakeLearned(got); len(got) != 0 || r.HasLearned() {
		t.Errorf("second TakeLearned = %+v; want nothing", got)
	}
	if s := r.Stats(); s.Scans != 1 || s.Resolved != 1 || s.Unowned != 1 || s.Hits != 2 || s.Queued != 2 {
		t.Errorf("stats %+v: want 1 scan, 1 resolved, 1 unowned, 2 hits, 2 queued", s)
	}
}

// TestSocketOwnerResolverQueueDrops: while a scan runs, misses beyond
// QueueLen are dropped and counted (each Lookup that finds it full), a
// miss already queued is not queued twice, and a dropped one is asked
// again at its next Lookup.
func TestSocketOwnerResolverQueueDrops(t *testing.T) {
	f := &fakeScan{held: map[uint64]uint32{1: 1, 2: 2, 3: 3, 4: 4}, entered: make(chan struct{}), gate: make(chan struct{})}
	r := newTestResolver(t, SocketOwnerConfig{QueueLen: 2}, f)
	r.Lookup(1, 1)
	<-f.entered // the worker holds inode 1 and scans
	for _, ino := range []uint64{2, 3, 2, 4, 4} {
		r.Lookup(ino, ino)
	}
	s := r.Stats()
	if s.Queued != 3 || s.QueueDrops != 2 || s.Misses != 6 {
		t.Errorf("stats %+v: want 3 queued (1, 2, 3), 2 drops (4 twice), 6 misses", s)
	}
	if n := len(r.queue); n != 2 {
		t.Errorf("queue holds %d, want its bound 2", n)
	}
	f.gate <- struct{}{} // first scan: inode 1
	<-f.entered          // second: 2 and 3
	f.gate <- struct{}{}
	waitScans(t, r, 2)
	if _, known := r.Lookup(4, 4); known {
		t.Error("dropped inode 4 known without a scan")
	}
	<-f.entered // third: 4, asked again
	f.gate <- struct{}{}
	waitScans(t, r, 3)
	for ino := uint64(1); ino <= 4; ino++ {
		if o, known := r.Lookup(ino, ino); !known || o.PID != uint32(ino) {
			t.Errorf("inode %d: %+v, %v; want pid %d", ino, o, known, ino)
		}
	}
}

// TestSocketOwnerResolverBounds: the cache never holds more than
// MaxEntries (oldest evicted, counted: asked again later) and learned
// owners not taken stop at MaxLearned (the rest counted as dropped).
func TestSocketOwnerResolverBounds(t *testing.T) {
	held := map[uint64]uint32{}
	for ino := uint64(1); ino <= 10; ino++ {
		held[ino] = uint32(ino)
	}
	f := &fakeScan{held: held}
	r := newTestResolver(t, SocketOwnerConfig{MaxEntries: 4, MaxLearned: 3}, f)
	for ino := uint64(1); ino <= 10; ino++ {
		r.Lookup(ino, ino)
		waitScans(t, r, ino) // one scan each, so eviction order is known
		r.mu.Lock()
		n := len(r.cache)
		r.mu.Unlock()
		if n > 4 {
			t.Fatalf("cache holds %d after inode %d, bound 4", n, ino)
		}
	}
	s := r.Stats()
	if s.Evicted != 6 || s.Resolved != 10 || s.LearnedDrops != 7 {
		t.Errorf("stats %+v: want 6 evicted, 10 resolved, 7 learned dropped", s)
	}
	if got := r.TakeLearned(nil); len(got) != 3 || got[0].Ino != 1 || got[2].Ino != 3 {
		t.Errorf("learned %+v: want inodes 1-3", got)
	}
	if _, known := r.Cached(6); known {
		t.Error("inode 6 still cached: the oldest entries were not the ones evicted")
	}
	if o, known := r.Cached(10); !known || o.PID != 10 {
		t.Errorf("inode 10: %+v, %v; want pid 10", o, known)
	}
}

// TestSocketOwnerResolverProc: with the real scan, a socket this process
// holds (its own fd, the oracle) resolves to this pid and comm.
func TestSocketOwnerResolverProc(t *testing.T) {
	ino := testenv.OwnSocket(t)
	r := NewSocketOwnerResolver(SocketOwnerConfig{})
	defer r.Close()
	if _, known := r.Lookup(1, ino); known {
		t.Fatal("known before any scan")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, known := r.Lookup(1, ino)
		if known {
			comm, _ := os.ReadFile("/proc/self/comm")
			if o.PID != uint32(os.Getpid()) || o.Comm+"\n" != string(comm) {
				t.Errorf("owner %+v, want pid %d comm %q", o, os.Getpid(), comm)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("not resolved in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSocketOwnerResolverScanShare: a full scan that used 20 ms of CPU holds the
// next one back 20 ms / MaxScanShare (here 2 s), while a socket of an
// owner found before is answered from that owner's fds alone meanwhile;
// one of another process stays unknown until the next full scan.
func TestSocketOwnerResolverScanShare(t *testing.T) {
	f := &fakeScan{held: map[uint64]uint32{1: 7, 2: 7, 3: 8}, fullNs: int64(20 * time.Millisecond)}
	r := newTestResolver(t, SocketOwnerConfig{MaxScanShare: 0.01}, f)
	r.Lookup(1, 1)
	waitScans(t, r, 1)
	t0 := time.Now()
	r.Lookup(2, 2) // pid 7's: a hot look-up
	r.Lookup(3, 3) // pid 8's: needs a full scan
	deadline := time.Now().Add(time.Second)
	for {
		if o, known := r.Lookup(2, 2); known {
			if o.PID != 7 {
				t.Errorf("inode 2: pid %d, want 7", o.PID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inode 2 not answered from the hot pid in 1 s: %+v", r.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if s := r.Stats(); s.Scans != 1 || s.HotScans == 0 {
		t.Errorf("stats %+v: want inode 2 answered by a hot look-up, no second full scan", s)
	}
	if _, known := r.Cached(3); known {
		t.Error("inode 3 answered without a full scan")
	}
	waitScans(t, r, 2)
	if d := time.Since(t0); d < 1800*time.Millisecond {
		t.Errorf("second full scan %v after the first, want ≥ 2 s (20 ms at 1%%)", d)
	}
	if o, known := r.Cached(3); !known || o.PID != 8 {
		t.Errorf("inode 3: %+v, %v; want pid 8", o, known)
	}
}

// TestThreadCPU: the worker's clock counts this thread's CPU, not the
// wall: a sleep adds (almost) nothing, a busy loop adds about its length.
func TestThreadCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	time.Sleep(50 * time.Millisecond)
	slept := threadCPU() - t0
	t1, w := threadCPU(), time.Now()
	for time.Since(w) < 30*time.Millisecond {
	}
	busy := threadCPU() - t1
	if slept > 5*time.Millisecond || busy < 5*time.Millisecond || busy > 40*time.Millisecond {
		t.Errorf("thread CPU %v over a 50 ms sleep, %v over a 30 ms busy loop", slept, busy)
	}
}
