package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestSchedSplitRunnable is the ftrace oracle of fsync --sched: this
// process's fdatasync thread, pinned to CPU 1 at nice 10, shares it with
// a busy loop at nice -10, so every wake-up from the disk waits for the
// CPU.
// An ftrace instance of its own (trace clock mono) records, for that
// thread only, its fdatasync calls and sched_switch/sched_wakeup; for every
// fsync record etcdscope printed, the same call's runnable time (woken or
// preempted until switched in) must equal the record's sched.call within
// ftrace's µs resolution (10 µs an edge; at most 5% of the calls off, and
// the sum within 1%), and the record's split must hold together
// (call sums to total, other's parts to other_ns, other's runnable within
// the call's).
func TestSchedSplitRunnable(t *testing.T) {
	testenv.RequireRoot(t)
	taskset := testenv.LookPath(t, "taskset", "util-linux")
	if runtime.NumCPU() < 2 {
		t.Fatalf("needs 2 CPUs (the hog and the writer share CPU 1), have %d", runtime.NumCPU())
	}
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-sched-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	tidc := make(chan int)
	var made atomic.Int64 // the writer's fdatasyncs
	start, stop := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread, pinned and niced, exits
		// with the goroutine.
		runtime.LockOSThread()
		tid := unix.Gettid()
		var set unix.CPUSet
		set.Set(1)
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			errc <- err
			tidc <- tid
			return
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 10); err != nil {
			errc <- err
			tidc <- tid
			return
		}
		tidc <- tid
		<-start
		errc <- appendAndFdatasync(filepath.Join(dir, "wal"), stop, &made)
	}()
	tid := <-tidc
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}

	ft := ftraceInstance(t, "etcdscope-sched", [][2]string{{"buffer_size_kb", "16384"}, {"trace_clock", "mono"},
		{"events/sched/sched_switch/filter", fmt.Sprintf("prev_pid == %d || next_pid == %d", tid, tid)},
		{"events/sched/sched_wakeup/filter", fmt.Sprintf("pid == %d", tid)},
		{"events/syscalls/sys_enter_fdatasync/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/syscalls/sys_exit_fdatasync/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/sched/sched_switch/enable", "1"}, {"events/sched/sched_wakeup/enable", "1"},
		{"events/syscalls/sys_enter_fdatasync/enable", "1"}, {"events/syscalls/sys_exit_fdatasync/enable", "1"}})
	t.Cleanup(func() { os.WriteFile(filepath.Join(ft, "events/enable"), []byte("0"), 0o644) })

	tr := startFsync(t, "--pid", strconv.Itoa(os.Getpid()), "--sched")
	hog := exec.Command(taskset, "-c", "1", "nice", "-n", "-10", "sh", "-c", "while :; do :; done")
	hog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	killHog := func() {
		syscall.Kill(-hog.Process.Pid, syscall.SIGKILL)
		hog.Wait()
	}
	t.Cleanup(killHog)
	close(start)
	// 6 s, longer until the writer made 150 calls (at most 30 s): under
	// other load (a hunt at load 9-12) the niced writer beside the hog
	// made 45 in 6 s, all traced and all in ftrace, and the test judged
	// too few to compare.
	for begin := time.Now(); time.Since(begin) < 6*time.Second || (made.Load() < 150 && time.Since(begin) < 30*time.Second); {
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	killHog()
	os.WriteFile(filepath.Join(ft, "tracing_on"), []byte("0"), 0o644)
	recs, rep := tr.stop()
	// Lost records are the tracer's to prevent: none. Missed runs are the
	// kernel's: a sched_switch/sched_wakeup program entered again on its
	// CPU (a wake-up from an interrupt while it runs for another task) is
	// skipped and counted (CI: 54 in 6 s with the hog, every traced call
	// still matching ftrace). Counted and reported is what the product
	// owes; one that hit the traced thread would break the per-call match
	// with ftrace below, which is the oracle for it.
	if rep.LostEvents != 0 {
		t.Errorf("lost %d events", rep.LostEvents)
	}
	t.Logf("missed %d program runs (counted and reported)", rep.MissedEvents)
	checkPartition(t, recs)
	calls := ftraceFdatasyncs(t, ft, tid)

	var mine, matched, off int
	var gotNs, wantUs, otherRunnableNs float64
	for _, r := range recs {
		if int(r.TID) != tid {
			continue
		}
		mine++
		s := r.Sched
		if s == nil {
			t.Fatalf("record without sched: %+v", r)
		}
		if s.Call.Sum() != r.TotalNs || s.Other.Sum() != r.Layers.OtherNs || s.Other.RunnableNs > s.Call.RunnableNs {
			t.Errorf("fdatasync at %d ns: sched %+v does not hold together with total %d, other %d", r.StartNs, *s, r.TotalNs, r.Layers.OtherNs)
		}
		c := callAt(calls, r.StartNs, r.EndNs)
		if c == nil {
			t.Logf("fdatasync at %d ns: no such call in ftrace", r.StartNs)
			continue
		}
		matched++
		gotNs += float64(s.Call.RunnableNs)
		wantUs += c.runnableUs
		otherRunnableNs += float64(s.Other.RunnableNs)
		// Each edge is the same tracepoint seen by ftrace (µs) and by the
		// program (ns): a few µs apart, more when the vCPU is preempted
		// between the two probes.
		if d := math.Abs(float64(s.Call.RunnableNs)/1e3 - c.runnableUs); d > 10*float64(c.edges)+2 {
			off++
			t.Logf("fdatasync at %d ns: runnable %.1f µs, ftrace %.1f µs (%d edges)", r.StartNs, float64(s.Call.RunnableNs)/1e3, c.runnableUs, c.edges)
		}
	}
	if mine < 100 {
		t.Fatalf("%d fdatasync records of the writer thread (ftrace saw %d), want ≥ 100", mine, len(calls))
	}
	n := float64(matched)
	t.Logf("%d fdatasyncs, %d matched in ftrace: runnable per call %.3f ms (%.3f ms of it in other), ftrace %.3f ms",
		mine, matched, gotNs/n/1e6, otherRunnableNs/n/1e6, wantUs/n/1e3)
	if matched < mine*99/100 {
		t.Errorf("only %d of %d calls found in ftrace", matched, mine)
	}
	if off > mine/20 {
		t.Errorf("%d of %d calls off ftrace's runnable time by more than 10 µs an edge", off, mine)
	}
	if d := math.Abs(gotNs/1e3 - wantUs); d > 0.01*wantUs {
		t.Errorf("runnable %.1f µs in all, ftrace %.1f µs: off by %.2f%%", gotNs/1e3, wantUs, 100*d/wantUs)
	}
	if wantUs/n < 200 {
		t.Fatalf("runnable %.1f µs per call: the hog did not make the writer wait for its CPU", wantUs/n)
	}
}

// appendAndFdatasync appends 4 KiB with write(2) and fdatasyncs after each
// append, truncating every 256, until stop closes.
func appendAndFdatasync(path string, stop chan struct{}, calls *atomic.Int64) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	for n := 1; ; n++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if _, err := unix.Write(fd, buf); err != nil {
			return err
		}
		if err := unix.Fdatasync(fd); err != nil {
			return err
		}
		if calls != nil {
			calls.Add(1)
		}
		if n%256 == 0 {
			if err := unix.Ftruncate(fd, 0); err != nil {
				return err
			}
		}
	}
}

// ftraceFdatasync is one fdatasync of the writer thread as ftrace recorded
// it, with the time it spent runnable.
type ftraceFdatasync struct {
	ftraceCall
	runnableUs float64 // woken or preempted, until switched in
	edges      int     // state changes in the call
}

// ftraceFdatasyncs parses the instance's trace: each sys_fdatasync
// enter/exit pair of thread tid and its scheduler events between them.
// Lines look like "... 12.345678: sys_fdatasync(fd: 5)",
// "... sched_switch: prev_comm=e2e.test prev_pid=7 prev_prio=130 prev_state=D ==> next_comm=sh next_pid=9 next_prio=120",
// "... sched_wakeup: comm=e2e.test pid=7 prio=130 target_cpu=001",
// "... sys_fdatasync -> 0x0".
func ftraceFdatasyncs(t *testing.T, dir string, tid int) []ftraceFdatasync {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("LOST")) {
		t.Fatal("ftrace lost events; the oracle is incomplete")
	}
	const (
		running = iota
		runnable
		blocked
	)
	var out []ftraceFdatasync
	var cur *ftraceFdatasync
	state, since := running, uint64(0)
	set := func(us uint64, st int) {
		if cur == nil || st == state {
			return
		}
		if state == runnable {
			cur.runnableUs += float64(us - since)
		}
		cur.edges++
		state, since = st, us
	}
	me := strconv.Itoa(tid)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		us, ev, ok := ftraceEvent(sc.Text())
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(ev, "sys_fdatasync("):
			out = append(out, ftraceFdatasync{ftraceCall: ftraceCall{enterUs: us}})
			cur, state, since = &out[len(out)-1], running, us
		case strings.HasPrefix(ev, "sys_fdatasync -> "):
			if cur != nil {
				if state == runnable {
					cur.runnableUs += float64(us - since)
				}
				cur.exitUs = us
			}
			cur = nil
		case strings.HasPrefix(ev, "sched_switch: "):
			switch {
			case fieldStr(ev, " next_pid=") == me:
				set(us, running)
			case fieldStr(ev, " prev_pid=") == me && strings.HasPrefix(fieldStr(ev, " prev_state="), "R"):
				set(us, runnable) // preempted
			case fieldStr(ev, " prev_pid=") == me:
				set(us, blocked)
			}
		case strings.HasPrefix(ev, "sched_wakeup: "):
			if state == blocked {
				set(us, runnable)
			}
		}
	}
	return out
}
