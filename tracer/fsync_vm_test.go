//go:build vmtest

package tracer

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
)

// TestFsyncTracerOnVMKernel runs inside the VM rig (Debian's 5.10, 6.1
// or 6.12: make vmtest-kernels): the fsync, block and journal programs,
// compiled against the 6.18 BTF of the build machine, load there by CO-RE
// with the fallbacks this kernel's probes choose (bpf/compat.h, logged),
// and see fdatasync on a raw loop device (the guest has only tmpfs; loop
// turns each flush into an fsync of its backing file, so flush requests
// appear). Then again with the opt-in write and scheduler programs
// (--writes, --sched): each pwrite64 after the device node's first
// fdatasync arrives, and the fdatasync thread's scheduler changes do,
// among them a switch out asleep (it sleeps on the loop worker: the state
// comes from sched_switch's prev_state argument, or from the task where
// the tracepoint has none). Every probe not attached says why.
func TestFsyncTracerOnVMKernel(t *testing.T) {
	for _, cfg := range []FsyncConfig{{}, {Writes: true, Sched: true}} {
		t.Run(fmt.Sprintf("writes=%v,sched=%v", cfg.Writes, cfg.Sched), func(t *testing.T) { vmFsyncs(t, cfg) })
	}
}

func vmFsyncs(t *testing.T, cfg FsyncConfig) {
	dev := tempLoop(t)
	cfg.PID = uint32(os.Getpid())
	tr, err := NewFsync(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, p := range tr.Probes() {
		t.Logf("probe %s attached=%v %+v", p.Name, p.Attached, p)
		if !p.Attached && p.Reason == "" {
			t.Errorf("probe %s is not attached and says not why", p.Name)
		}
	}
	qArgs, _ := blockQueueArgs(btf.NewCache())
	switchArgs, _ := tracepointArgs(btf.NewCache(), "sched_switch")
	t.Logf("this kernel: task storage for tracing programs %v, block tracepoints with the queue first %v, sched_switch arguments %d",
		haveTaskBTF(), qArgs, switchArgs)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 10
	go func() {
		buf := make([]byte, 4096)
		for i := 0; i < n; i++ {
			f.WriteAt(buf, int64(i)*4096)
			unix.Fdatasync(int(f.Fd()))
		}
		time.Sleep(200 * time.Millisecond)
		tr.Drain()
	}()
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	loopDev := event.DevFromUnix(st.Rdev)
	var fsyncs, flushes, flushBios, writes, scheds, blocked int
	for {
		var a event.Any
		if err := tr.Read(&a); err != nil {
			break
		}
		ev := a.Value()
		switch e := ev.(type) {
		case event.Fsync:
			if e.IsBlockdev && e.Syscall == event.SysFdatasync {
				fsyncs++
			}
		case event.Block:
			if e.IsFlush() {
				flushes++
			}
		case event.FlushBio:
			// block_getrq's bio read right (getrq_q_arg): the flush
			// each fdatasync of the node asks for, on its disk.
			if e.Dev == loopDev {
				flushBios++
			}
		case event.Write:
			if e.Call.IsBlockdev && e.Call.Syscall == event.SysPwrite64 && e.Call.Ret == 4096 {
				writes++
			}
		case event.Sched:
			scheds++
			if e.State == event.SchedBlocked {
				blocked++
			}
		}
	}
	t.Logf("%d fdatasync, %d flush requests, %d flush bios, %d writes, %d scheduler events (%d asleep) on %s", fsyncs, flushes, flushBios, writes, scheds, blocked, dev)
	if fsyncs != n || flushes < n || flushBios < n {
		t.Fatalf("saw %d fdatasync (want %d), %d flushes and %d flush bios on %v (want ≥ %d each)", fsyncs, n, flushes, flushBios, loopDev, n)
	}
	// The first write comes before the node's first fdatasync: not
	// followed yet.
	if cfg.Writes && writes != n-1 {
		t.Errorf("saw %d writes, want %d", writes, n-1)
	}
	if cfg.Sched && (scheds == 0 || blocked == 0) {
		t.Errorf("%d scheduler events in the fdatasync calls, %d of them switched out asleep: want some of each", scheds, blocked)
	}
}

// TestFsyncJBD2WaitOnVMKernel: the optional jbd2wait probes this build
// machine cannot run (fentry is refused, kprobes are compiled out) load and
// attach on Debian's 5.10, 6.1 and 6.12 (make vmtest-kernels), in both
// variants.
func TestFsyncJBD2WaitOnVMKernel(t *testing.T) {
	for _, variant := range []string{"fentry", "kprobe"} {
		tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid()), JBD2Wait: variant})
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, p := range tr.Probes() {
			if p.Name == variant+"/jbd2_log_wait_commit" && p.Attached {
				ok = true
			}
			if !p.Attached {
				t.Logf("%s: unavailable %s: %+v", variant, p.Name, p)
			}
		}
		tr.Close()
		if !ok {
			t.Errorf("%s/jbd2_log_wait_commit did not attach on this kernel", variant)
		}
	}
}

// tempLoop returns a loop device over a new 64 MiB file on the guest's
// tmpfs, detached at cleanup.
func tempLoop(t *testing.T) string {
	t.Helper()
	img, err := os.CreateTemp("/tmp", "vm-loop-*.img")
	if err != nil {
		t.Fatal(err)
	}
	img.Truncate(64 << 20)
	img.Close()
	dev, detach, err := attachLoop(img.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(detach)
	return dev
}

// attachLoop binds file to a free loop device through /dev/loop-control
// (busybox's losetup lacks --show) and returns its path and an undo.
func attachLoop(file string) (string, func(), error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	defer ctl.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return "", nil, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	lf, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	bf, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		lf.Close()
		return "", nil, err
	}
	defer bf.Close()
	if err := unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_SET_FD, int(bf.Fd())); err != nil {
		lf.Close()
		return "", nil, fmt.Errorf("LOOP_SET_FD: %w", err)
	}
	return dev, func() {
		unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		lf.Close()
	}, nil
}
