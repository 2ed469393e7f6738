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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestWriteThrottledFtrace is the ftrace oracle of fsync --writes: a real
// dirty-throttling situation (vm.dirty_bytes at 8 MiB, restored after, and
// a background dd on the same disk) in which this process's writer thread
// appends 256 KiB with write(2) and fdatasyncs every 16 appends. An ftrace
// instance of its own (trace clock mono) records, for that thread only,
// its write(2) calls, writeback:balance_dirty_pages,
// writeback:folio_wait_writeback and writeback:writeback_dirty_folio. For
// every write record etcdscope printed, the same call in ftrace gives:
//   - the throttled sleeps: balance_dirty_pages events with pause > 0,
//     which must equal the record's throttles;
//   - the throttled time bracketed as the kernel recorded it (each such
//     event to the thread's next event), which must equal the record's
//     within ftrace's µs resolution;
//   - the sleep the kernel asked for (the events' pause, ms from jiffies),
//     which the measured time may exceed only by the timer's rounding to
//     the next tick and the wake-up.
func TestWriteThrottledFtrace(t *testing.T) {
	testenv.RequireRoot(t)
	dd := testenv.LookPath(t, "dd", "coreutils")
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-write-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	setDirtyBytes(t, 8<<20)

	// The writer is one OS thread, so ftrace can filter on its tid.
	tidc := make(chan int)
	start, stop := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		<-start
		errc <- appendAndSync(filepath.Join(dir, "wal"), stop)
	}()
	tid := <-tidc

	ft := ftraceInstance(t, "etcdscope-write", [][2]string{{"buffer_size_kb", "16384"}, {"trace_clock", "mono"},
		{"events/syscalls/sys_enter_write/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/syscalls/sys_exit_write/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/writeback/balance_dirty_pages/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/writeback/folio_wait_writeback/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/writeback/writeback_dirty_folio/filter", fmt.Sprintf("common_pid == %d", tid)},
		{"events/syscalls/sys_enter_write/enable", "1"}, {"events/syscalls/sys_exit_write/enable", "1"},
		{"events/writeback/balance_dirty_pages/enable", "1"}, {"events/writeback/folio_wait_writeback/enable", "1"},
		{"events/writeback/writeback_dirty_folio/enable", "1"}})
	t.Cleanup(func() { os.WriteFile(filepath.Join(ft, "events/enable"), []byte("0"), 0o644) })

	tr := startFsync(t, "--pid", strconv.Itoa(os.Getpid()), "--writes")
	// The background writer: dirty pages on the same disk, as fast as the
	// dirty limit lets it.
	bg := exec.Command("sh", "-c", `while :; do "$0" if=/dev/zero of="$1" bs=1M count=512 conv=notrunc status=none || exit 1; done`, dd, filepath.Join(dir, "bg"))
	bg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	killBG := func() {
		syscall.Kill(-bg.Process.Pid, syscall.SIGKILL)
		bg.Wait()
	}
	t.Cleanup(killBG)
	time.Sleep(time.Second) // dirty pages up to the limit
	close(start)
	time.Sleep(8 * time.Second)
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	killBG()
	os.WriteFile(filepath.Join(ft, "tracing_on"), []byte("0"), 0o644)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("etcdscope: %v; stderr:\n%s", err, tr.stderr.String())
	}
	_, writes, sum, err := analysis.ReadJSONLWrites(bytes.NewReader(tr.stdout.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if sum.LostEvents != 0 {
		t.Errorf("lost %d events", sum.LostEvents)
	}
	calls := ftraceWrites(t, ft)
	// Missed counts probe runs the kernel skipped, and on 6.18 mostly the
	// block_rq_complete runs it skips in softirq (about 1 in 1000-3000,
	// inferred from a re-issue: fsync_test.go), which the background dd's
	// writeback makes plenty of. The write split uses no block completion;
	// it is checked call by call against ftrace below. Reported, and
	// bounded: a fresh Debian root's run missed 3 beside 4304 writes.
	t.Logf("missed %d probe runs (block completions the kernel skipped) beside %d traced writes", sum.MissedEvents, len(writes))
	t.Logf("flakehunt: margin write-missed-runs %d of %d", sum.MissedEvents, len(writes)/100)
	if sum.MissedEvents > uint64(len(writes))/100 {
		t.Errorf("missed %d probe runs, over 1%% of the %d writes traced", sum.MissedEvents, len(writes))
	}

	var mine []analysis.WriteRecord
	for _, w := range writes {
		if int(w.TID) == tid {
			mine = append(mine, w)
		}
		if w.Layers.Sum() != w.TotalNs || w.TotalNs != int64(w.EndNs-w.StartNs) {
			t.Fatalf("write layers %+v sum to %d, total %d", w.Layers, w.Layers.Sum(), w.TotalNs)
		}
	}
	if len(mine) < 50 {
		t.Fatalf("%d write records of the writer thread (ftrace saw %d calls), want ≥ 50", len(mine), len(calls))
	}
	var throttledCalls, matched, off int
	var gotNs, bracketUs, pauseMs, sleeps float64
	var pauses []int64
	for _, w := range mine {
		c := callAt(calls, w.StartNs, w.EndNs)
		if c == nil {
			t.Logf("write at %d ns: no such call in ftrace", w.StartNs)
			continue
		}
		matched++
		if int(w.Throttles) != c.sleeps {
			t.Errorf("write at %d ns: %d throttled sleeps, ftrace %d", w.StartNs, w.Throttles, c.sleeps)
		}
		// Each end of a sleep is the same tracepoint seen by ftrace (µs)
		// and by the program (ns); the program runs after ftrace's probe
		// (it attached later), a few µs here, more when the vCPU is
		// preempted in between.
		if d := math.Abs(float64(w.Layers.ThrottledNs)/1e3 - c.throttledUs); d > 10*float64(c.sleeps)+2 {
			off++
			t.Logf("write at %d ns: throttled %.1f µs, ftrace %.1f µs", w.StartNs, float64(w.Layers.ThrottledNs)/1e3, c.throttledUs)
		}
		if w.Throttles > 0 {
			throttledCalls++
			gotNs += float64(w.Layers.ThrottledNs)
			bracketUs += c.throttledUs
			pauseMs += c.pauseMs
			sleeps += float64(c.sleeps)
			pauses = append(pauses, c.pauses...)
		}
	}
	if throttledCalls < 5 {
		t.Fatalf("only %d of %d writes were throttled: the setup did not make dirty throttling", throttledCalls, len(mine))
	}
	n := float64(throttledCalls)
	jiffyMs := float64(gcd(pauses)) // pause is whole jiffies in ms: their gcd is one jiffy (HZ 250: 4)
	t.Logf("%d writes (%d matched in ftrace), %d throttled in %.0f sleeps: throttled per throttled call %.3f ms, ftrace's bracket %.3f ms, the kernel's pause %.3f ms (jiffy %.0f ms)",
		len(mine), matched, throttledCalls, sleeps, gotNs/n/1e6, bracketUs/n/1e3, pauseMs/n, jiffyMs)
	if matched < len(mine)*99/100 {
		t.Errorf("only %d of %d writes found in ftrace", matched, len(mine))
	}
	if off > len(mine)/20 {
		t.Errorf("%d of %d writes off ftrace's throttled time by more than 10 µs per sleep", off, len(mine))
	}
	if d := math.Abs(gotNs/1e3 - bracketUs); d > 0.005*bracketUs {
		t.Errorf("throttled %.1f µs in all, ftrace %.1f µs: off by %.2f%%", gotNs/1e3, bracketUs, 100*d/bracketUs)
	}
	// The sleep is the pause the kernel asked for, rounded up to the
	// timer wheel's next tick (pause to pause + 1 jiffy), plus the
	// wake-up: never shorter, and longer by at most 2 jiffies a sleep in
	// the mean (a loaded 2-CPU machine delays the wake-ups).
	if extra := (gotNs/1e6 - pauseMs) / sleeps; extra < -0.01*jiffyMs || extra > 2*jiffyMs {
		t.Errorf("throttled %.1f ms in all against the kernel's pause of %.1f ms: %.2f ms a sleep over it, want 0 to %.0f", gotNs/1e6, pauseMs, extra, 2*jiffyMs)
	}
}

func gcd(xs []int64) int64 {
	var g int64
	for _, x := range xs {
		for x != 0 {
			g, x = x, g%x
		}
	}
	return g
}

// setDirtyBytes sets vm.dirty_bytes for the test and restores what was
// there at cleanup (dirty_bytes, or dirty_ratio when it was in use:
// writing one of them zeroes the other).
func setDirtyBytes(t *testing.T, n int) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("/proc/sys/vm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	oldBytes, oldRatio := read("dirty_bytes"), read("dirty_ratio")
	t.Cleanup(func() {
		name, v := "dirty_bytes", oldBytes
		if oldBytes == "0" {
			name, v = "dirty_ratio", oldRatio
		}
		if err := os.WriteFile("/proc/sys/vm/"+name, []byte(v), 0o644); err != nil {
			t.Errorf("restoring vm.%s=%s: %v", name, v, err)
		}
	})
	if err := os.WriteFile("/proc/sys/vm/dirty_bytes", []byte(strconv.Itoa(n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendAndSync appends 256 KiB with write(2) to path and fdatasyncs it
// every 16 appends (the first right away: etcdscope follows writes to
// files the process has fsynced), truncating every 256 appends, until
// stop closes.
func appendAndSync(path string, stop chan struct{}) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, 256<<10)
	if err := unix.Fdatasync(fd); err != nil {
		return err
	}
	for n := 1; ; n++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if _, err := unix.Write(fd, buf); err != nil {
			return err
		}
		if n%16 == 0 {
			if err := unix.Fdatasync(fd); err != nil {
				return err
			}
		}
		if n%256 == 0 {
			if err := unix.Ftruncate(fd, 0); err != nil {
				return err
			}
		}
	}
}

// ftraceCall is a syscall's enter and exit as ftrace recorded them, µs.
type ftraceCall struct{ enterUs, exitUs uint64 }

func (c ftraceCall) span() ftraceCall { return c }

// ftraceWrite is one write(2) of the writer thread as ftrace recorded it.
type ftraceWrite struct {
	ftraceCall
	sleeps      int     // balance_dirty_pages events with pause > 0
	pauses      []int64 // their pause fields, ms
	pauseMs     float64 // summed
	throttledUs float64 // each such event to the thread's next event
}

// ftraceWrites parses the instance's trace: each sys_write enter/exit
// pair with the writeback events between them. Lines look like
// "... 123.456789: sys_write(fd: 5, buf: ..., count: 40000)",
// "... 123.456790: balance_dirty_pages: bdi 254:0: limit=... pause=12 period=...",
// "... 123.456791: writeback_dirty_folio: bdi 254:0: ino=12 index=3",
// "... 123.456799: sys_write -> 0x40000".
func ftraceWrites(t *testing.T, dir string) []ftraceWrite {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("LOST")) {
		t.Fatal("ftrace lost events; the oracle is incomplete")
	}
	var out []ftraceWrite
	var cur *ftraceWrite
	var openUs uint64 // start of an open throttled sleep, 0: none
	closeOpen := func(us uint64) {
		if cur != nil && openUs != 0 {
			cur.throttledUs += float64(us - openUs)
		}
		openUs = 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		us, ev, ok := ftraceEvent(sc.Text())
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(ev, "sys_write("):
			out = append(out, ftraceWrite{ftraceCall: ftraceCall{enterUs: us}})
			cur, openUs = &out[len(out)-1], 0
		case strings.HasPrefix(ev, "sys_write -> "):
			if cur != nil {
				closeOpen(us)
				cur.exitUs = us
			}
			cur = nil
		case strings.HasPrefix(ev, "balance_dirty_pages: "):
			closeOpen(us)
			p, _ := strconv.ParseInt(fieldStr(ev, " pause="), 10, 64) // not dirtied_pause=
			if cur != nil && p > 0 {
				cur.sleeps++
				cur.pauses = append(cur.pauses, p)
				cur.pauseMs += float64(p)
				openUs = us
			}
		case strings.HasPrefix(ev, "folio_wait_writeback: "), strings.HasPrefix(ev, "writeback_dirty_folio: "):
			closeOpen(us)
		}
	}
	return out
}

// ftraceEvent splits a line of an instance's trace into its timestamp
// (µs, the "secs.usecs" field) and what follows it ("event: ..." or a
// syscall's "sys_x(...)"); ok is false for comments and other lines.
func ftraceEvent(line string) (us uint64, ev string, ok bool) {
	if strings.HasPrefix(line, "#") {
		return 0, "", false
	}
	// The comm before it may hold ": " too: take the first ": " that
	// follows a timestamp.
	for i := strings.Index(line, ": "); i >= 0; {
		f := strings.Fields(line[:i])
		if len(f) > 0 {
			sec, usec, dot := strings.Cut(f[len(f)-1], ".")
			a, e1 := strconv.ParseUint(sec, 10, 64)
			b, e2 := strconv.ParseUint(usec, 10, 64)
			if dot && len(usec) == 6 && e1 == nil && e2 == nil {
				return a*1e6 + b, line[i+2:], true
			}
		}
		j := strings.Index(line[i+2:], ": ")
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return 0, "", false
}

// fieldStr returns the value after key in an event's text, up to the next
// space ("" if none).
func fieldStr(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	v := s[i+len(key):]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// callAt returns the completed call of ftrace's that is the traced call
// [startNs, endNs] (the program's sys_enter and sys_exit times), or nil:
// the one it overlaps most. The program runs just before or after ftrace's
// probe at the same tracepoint, usually µs apart, but the syscall
// tracepoints are faultable (preemptible) since Linux 6.13, so a thread
// preempted between the two probes puts them milliseconds apart (seen: 4
// of 256 calls beyond a 20 µs window with a nice -10 hog on the CPU and a
// loaded machine). One thread's calls never overlap, so the twin is the
// call that shares the most time; matching needs no clock bound.
func callAt[T interface{ span() ftraceCall }](calls []T, startNs, endNs uint64) *T {
	start, end := startNs/1000, endNs/1000
	i := sort.Search(len(calls), func(i int) bool { return calls[i].span().exitUs >= start })
	var best *T
	var bestUs uint64
	for ; i < len(calls) && calls[i].span().enterUs <= end; i++ {
		c := calls[i].span()
		if c.exitUs == 0 {
			continue
		}
		lo, hi := max(start, c.enterUs), min(end, c.exitUs)
		if hi > lo && hi-lo > bestUs {
			best, bestUs = &calls[i], hi-lo
		}
	}
	return best
}
