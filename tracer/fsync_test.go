package tracer

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestFsyncTracerSeesOwnFdatasync checks the raw event stream: every
// fdatasync this test makes arrives with its file's inode, device and fd,
// and flush requests of the file's disk arrive too (this machine's vda has
// a volatile write cache; tmpfs would show none). Twice: on the syscall
// tracepoints, and with FSTypes ext4 (/var/tmp's filesystem here) on ext4's
// sync_file tracepoints alone, where writes to an O_DSYNC file of the
// same process (ext4_sync_file runs inside each) must not count as calls.
func TestFsyncTracerSeesOwnFdatasync(t *testing.T) {
	testenv.RequireRoot(t)
	for _, fstypes := range [][]string{nil, {"ext4"}} {
		t.Run(fmt.Sprintf("fstypes=%v", fstypes), func(t *testing.T) {
			if fstypes != nil {
				if fs, err := host.FSTypeOf("/var/tmp"); err != nil || fs != "ext4" {
					testenv.Missing(t, fmt.Sprintf("/var/tmp is on %q (%v), not ext4", fs, err))
				}
			}
			seesOwnFdatasync(t, fstypes)
		})
	}
}

func seesOwnFdatasync(t *testing.T, fstypes []string) {
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid()), FSTypes: fstypes})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	syscalls := slices.ContainsFunc(tr.Probes(), func(p event.Probe) bool {
		return p.Attached && strings.HasPrefix(p.Name, "tracepoint/syscalls/")
	})
	if syscalls != (fstypes == nil) {
		t.Fatalf("FSTypes %v: syscall tracepoints attached %v; probes %+v", fstypes, syscalls, tr.Probes())
	}

	f, err := os.CreateTemp("/var/tmp", "etcdscope-tracer-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	dsync, err := os.OpenFile(f.Name()+".dsync", os.O_CREATE|os.O_WRONLY|unix.O_DSYNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dsync.Name())
	defer dsync.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	const n = 20
	go func() {
		buf := make([]byte, 2300)
		for i := 0; i < n; i++ {
			f.Write(buf)
			unix.Fdatasync(int(f.Fd()))
			dsync.Write(buf)
		}
		time.Sleep(200 * time.Millisecond)
		tr.Close()
	}()
	var fsyncs, blocks, flushes int
	enters := map[uint32]int{} // kernel threads' fsyncs (loop workers) enter too
	mine := map[uint32]bool{}
	for {
		var a event.Any
		if err := tr.Read(&a); err != nil {
			break
		}
		ev := a.Value()
		switch e := ev.(type) {
		case event.Fsync:
			if e.Syscall != event.SysFdatasync || e.Ino != st.Ino || e.Dev != event.DevFromUnix(st.Dev) || e.FD != int32(f.Fd()) {
				t.Errorf("unexpected fsync event %+v (want ino %d dev %v)", e, st.Ino, event.DevFromUnix(st.Dev))
				continue
			}
			if e.EndNs <= e.StartNs || e.Ret != 0 || e.FSType == "" || len(e.Names) == 0 {
				t.Errorf("bad fsync event %+v", e)
			}
			fsyncs++
			mine[e.TID] = true
		case event.FsyncEnter:
			enters[e.TID]++
		case event.Block:
			blocks++
			if e.IsFlush() {
				flushes++
			}
		}
	}
	myEnters := 0
	for tid := range mine {
		myEnters += enters[tid]
	}
	if fsyncs != n || myEnters != n {
		t.Fatalf("traced %d fdatasync exits and %d entries, made %d", fsyncs, myEnters, n)
	}
	if blocks == 0 || flushes == 0 {
		t.Fatalf("saw %d block requests, %d flushes; want some of each", blocks, flushes)
	}
	lost, err := tr.Lost()
	if err == nil && lost != 0 {
		t.Fatalf("lost %d events", lost)
	}
	t.Logf("%d fdatasync, %d block requests, %d flushes; probes %+v", fsyncs, blocks, flushes, tr.Probes())
}

// TestFsyncTracerWritesAndSched: with Writes and Sched, each write(2) on a
// file this process has fsynced arrives with its file, size and no wait
// longer than the call, writes to a file never fsynced do not, and the
// fdatasync thread's scheduler changes arrive only inside its calls.
func TestFsyncTracerWritesAndSched(t *testing.T) {
	testenv.RequireRoot(t)
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid()), Writes: true, Sched: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	open := func() (*os.File, unix.Stat_t) {
		f, err := os.CreateTemp("/var/tmp", "etcdscope-tracer-*")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return f, st
	}
	synced, st := open()
	unsynced, _ := open()
	const n = 20
	tids := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // one thread: its tid names its events
		tids <- unix.Gettid()
		buf := make([]byte, 2300)
		unix.Fdatasync(int(synced.Fd())) // from here on the file is followed
		for i := 0; i < n; i++ {
			unix.Write(int(unsynced.Fd()), buf)
			unix.Write(int(synced.Fd()), buf)
			unix.Fdatasync(int(synced.Fd()))
		}
		time.Sleep(200 * time.Millisecond)
		tr.Close()
	}()
	tid := uint32(<-tids)
	var writes, scheds int
	var calls [][2]uint64 // the thread's fdatasyncs and writes
	var states []event.Sched
	for {
		var a event.Any
		if err := tr.Read(&a); err != nil {
			break
		}
		switch a.Kind {
		case event.KindWrite:
			w := a.Write
			if w.Call.Syscall != event.SysWrite || w.Call.Ino != st.Ino || w.Call.Ret != 2300 || w.Call.TID != tid ||
				w.ThrottledNs+w.WritebackWaitNs > w.Call.EndNs-w.Call.StartNs || len(w.Call.Names) == 0 {
				t.Errorf("unexpected write event %+v (want ino %d of thread %d)", w, st.Ino, tid)
			}
			writes++
			calls = append(calls, [2]uint64{w.Call.StartNs, w.Call.EndNs})
		case event.KindFsync:
			if a.Fsync.TID == tid {
				calls = append(calls, [2]uint64{a.Fsync.StartNs, a.Fsync.EndNs})
			}
		case event.KindSched:
			if a.Sched.TID == tid {
				states = append(states, a.Sched)
			}
			scheds++
		}
	}
	if writes != n {
		t.Errorf("traced %d writes, made %d to the fsynced file (and %d to one never fsynced)", writes, n, n)
	}
	if len(states) == 0 {
		t.Errorf("no scheduler event of the fdatasync thread in %d calls (its fdatasyncs sleep on the disk)", len(calls))
	}
	for _, s := range states {
		in := false
		for _, c := range calls {
			in = in || (s.Ns >= c[0] && s.Ns <= c[1])
		}
		if !in {
			t.Errorf("scheduler event %+v outside the thread's traced calls", s)
		}
	}
	t.Logf("%d writes, %d scheduler events (%d of the thread)", writes, scheds, len(states))
}

// TestJBD2WaitMissingIsOptional: where neither jbd2_log_wait_commit probe
// attaches (this build machine: fentry refused, no kprobes), the probe
// says it is optional, that nothing is wrong and what measures the journal
// layer instead, and why each variant failed; where one attaches there is
// nothing to say.
func TestJBD2WaitMissingIsOptional(t *testing.T) {
	testenv.RequireRoot(t)
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, p := range tr.Probes() {
		if !strings.HasSuffix(p.Name, "/jbd2_log_wait_commit") {
			continue
		}
		if p.Attached {
			t.Logf("%s attached: no fallback to describe", p.Name)
			return
		}
		if p.Name != "fentry|kprobe/jbd2_log_wait_commit" || !p.Optional || p.Dark != event.DarkJournalWaitExact || p.Reason != event.ReasonRefused ||
			!strings.Contains(p.Err, "fentry") || !strings.Contains(p.Err, "kprobe") {
			t.Errorf("%s: %+v", p.Name, p)
		}
		return
	}
	t.Errorf("no jbd2_log_wait_commit probe in %+v", tr.Probes())
}
