package tracer

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestFsyncThreadProbesDetachAttach: with Writes and Sched, a thread's
// writes to a followed file and its scheduler changes inside fdatasync are
// traced while the thread probes are on, not between DetachThreadProbes
// and AttachThreadProbes (its fdatasyncs are, throughout), and again after;
// the kernel (bpftool perf list, BPF_TASK_FD_QUERY) lists this process's
// write-family syscall tracepoints and scheduler programs only while on.
func TestFsyncThreadProbesDetachAttach(t *testing.T) {
	testenv.RequireRoot(t)
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid()), Writes: true, Sched: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// held counts this process's write-family syscall tracepoints and
	// scheduler programs, by the kernel's account.
	held := func() (writes, sched int) {
		writes, _, sched = testenv.SyscallTracepoints(t, os.Getpid())
		return writes, sched
	}
	f, err := os.CreateTemp("/var/tmp", "etcdscope-tracer-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const n = 10
	type phase struct {
		from, to       uint64
		writes, sched  int // held by this process, by bpftool
		wantOn         bool
		gotW, gotS     int
		fdatasyncsSeen int
	}
	var phases [3]phase
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // one thread: its tid names its events
		tids <- unix.Gettid()
		buf := make([]byte, 2300)
		unix.Fdatasync(int(f.Fd())) // from here on the file is followed
		for i := range phases {
			p := &phases[i]
			p.wantOn = i != 1
			p.writes, p.sched = held()
			p.from = host.MonotonicNs()
			for range n {
				unix.Write(int(f.Fd()), buf)
				unix.Fdatasync(int(f.Fd()))
			}
			p.to = host.MonotonicNs()
			var err error
			switch i {
			case 0:
				err = tr.DetachThreadProbes()
			case 1:
				err = tr.AttachThreadProbes()
			}
			if err != nil {
				errs <- err
				break
			}
		}
		errs <- nil
		// Every call above has returned, so its records are in the ring:
		// Drain hands them all to the reader, then ErrDrained. (Closing
		// 200 ms after the last call lost the last 2 of phase 2's 10
		// fdatasyncs once under load, stage2's tracer run.)
		if err := tr.Drain(); err != nil {
			t.Error(err)
		}
	}()
	tid := uint32(<-tids)
	in := func(ns uint64) *phase {
		for i := range phases {
			if ns >= phases[i].from && ns <= phases[i].to {
				return &phases[i]
			}
		}
		return nil
	}
	for {
		var a event.Any
		if err := tr.Read(&a); errors.Is(err, ErrDrained) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.Kind == event.KindWrite && a.Write.Call.TID == tid:
			if p := in(a.Write.Call.StartNs); p != nil {
				p.gotW++
			}
		case a.Kind == event.KindFsync && a.Fsync.TID == tid:
			if p := in(a.Fsync.StartNs); p != nil {
				p.fdatasyncsSeen++
			}
		case a.Kind == event.KindSched && a.Sched.TID == tid:
			if p := in(a.Sched.Ns); p != nil {
				p.gotS++
			}
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	for i, p := range phases {
		t.Logf("phase %d (probes on: %v): %d writes, %d scheduler events, %d fdatasyncs traced; held %d write tracepoints, %d scheduler programs", i, p.wantOn, p.gotW, p.gotS, p.fdatasyncsSeen, p.writes, p.sched)
		if p.fdatasyncsSeen != n {
			t.Errorf("phase %d: %d fdatasyncs traced of %d (the fsync probes stay on)", i, p.fdatasyncsSeen, n)
		}
		switch {
		case p.wantOn && (p.gotW != n || p.gotS == 0 || p.writes != 10 || p.sched != 2):
			t.Errorf("phase %d, probes on: %d writes of %d, %d scheduler events, held %d write tracepoints and %d scheduler programs; want %d, some, 10 (the five calls' enter and exit), 2", i, p.gotW, n, p.gotS, p.writes, p.sched, n)
		case !p.wantOn && (p.gotW != 0 || p.gotS != 0 || p.writes != 0 || p.sched != 0):
			t.Errorf("phase %d, probes off: %d writes, %d scheduler events, held %d write tracepoints and %d scheduler programs; want none", i, p.gotW, p.gotS, p.writes, p.sched)
		}
	}
}
