package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/cpulimit"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/tracer"
)

// TestNoCompletionMissing is the ftrace oracle for block completions: on
// ext4, XFS and btrfs over a loop device, the block_rq_complete events the
// kernel's own ftrace records (an instance of its own, trace clock mono)
// are matched with the tracer's stream by disk, sector, size and time.
// Inside the programs nothing may be dropped (run counter = emitted), the
// only loss counted is inferred from requests issued again without their
// completion seen, and what ftrace saw on the loop device and the tracer
// did not is at most that plus the kernel's residual (see below). The
// completions on other disks are matched and logged, not asserted (other
// tenants' I/O on the shared machine).
func TestNoCompletionMissing(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		fs   string
		mkfs []string
	}{
		{"ext4", []string{"-q", "-F"}},
		{"xfs", []string{"-q", "-f"}},
		{"btrfs", []string{"-q", "-f"}},
	} {
		t.Run(tc.fs, func(t *testing.T) {
			dev := loopDevice(t, "/var/tmp", 512<<20)
			kdev, _ := kernelDev(t, dev)
			mnt := mountFS(t, dev, tc.fs, tc.mkfs...)
			unix.Sync()
			ft := startFtraceAll(t)
			tr, err := tracer.NewFsync(tracer.FsyncConfig{PID: uint32(os.Getpid()), RingBytes: 16 << 20, JBD2Wait: "none", EveryBlock: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			var got []event.Block
			done := make(chan error, 1)
			go func() {
				var ev event.Any
				for {
					err := tr.Read(&ev)
					if err != nil {
						done <- err
						return
					}
					if ev.Kind == event.KindBlock {
						got = append(got, ev.Block)
					}
				}
			}()
			from := host.MonotonicNs()
			writeAndSync(t, mnt, 4, 2*time.Second, 0)
			unix.Sync()
			time.Sleep(300 * time.Millisecond) // the last completions
			to := host.MonotonicNs()
			comps := ft.completions()
			if err := tr.Drain(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, tracer.ErrDrained) {
				t.Fatalf("reading: %v", err)
			}
			lost, err := tr.Lost()
			if err != nil {
				t.Fatal(err)
			}
			st, _ := tr.BlockStats()
			t.Logf("%s: tracer %d completions (%d runs, %d emitted, %d without start, %d slot collisions, %d unseen), lost %d, missed %d; ftrace %d",
				tc.fs, len(got), st.CompleteRuns, st.CompleteEmits, st.NoStart, st.Collisions, st.UnseenCompletions, lost, tr.Missed(), len(comps))
			// Inside the programs nothing is dropped: every run of
			// block_rq_complete (no disk filter here) put its completion in
			// the ring, and the runs the kernel skipped that the tracer can
			// infer are counted as missed.
			if st.CompleteRuns != st.CompleteEmits || lost != 0 || tr.Missed() < st.UnseenCompletions {
				t.Errorf("block_rq_complete ran %d times and emitted %d; lost %d; missed %d, unseen completions %d",
					st.CompleteRuns, st.CompleteEmits, lost, tr.Missed(), st.UnseenCompletions)
			}
			// The per-program skips (serve's minute line names the
			// programs from them) add up to Missed; the programs still run
			// (other disks), so Missed is read on both sides of them.
			m0 := tr.Missed()
			var perProg, unseen uint64
			for _, p := range tr.ProgramStats() {
				perProg += p.RecursionMisses + p.UnseenRuns
				if p.Name == "block_rq_complete" {
					unseen = p.UnseenRuns
				}
			}
			if m1 := tr.Missed(); perProg < m0 || perProg > m1 || unseen < st.UnseenCompletions {
				t.Errorf("the programs' skips sum to %d (block_rq_complete's unseen %d), Missed %d then %d; unseen completions %d before",
					perProg, unseen, m0, m1, st.UnseenCompletions)
			}
			// The loop device is ours alone: every completion counts. Other
			// disks: only those 50 ms or more inside the tracer's run.
			missing, missingOnLoop, onLoop := matchCompletions(t, comps, got, func(c ftraceCompletion) bool {
				return c.dev == kdev || (c.us*1000 > from+50e6 && c.us*1000+50e6 < to)
			}, kdev)
			if onLoop < 100 {
				t.Fatalf("only %d completions on %s: the workload did not reach the disk", onLoop, dev)
			}
			t.Logf("%s: ftrace completions not in the stream: %d (%d of %d on the loop device); inferred unseen: %d",
				tc.fs, missing, missingOnLoop, onLoop, st.UnseenCompletions)
			// This host's kernel runs no BPF program for the completions in
			// softirq on top of the sandbox agent's threads, and counts no
			// recursion miss (every BPF program on the tracepoint, not this
			// one's logic: its run counter is short by the same amount; the
			// "only ftrace saw" lines name the agent as the interrupted task;
			// 0 to 923 in a 15 s overload run, docs/performance.md).
			// Those the tracer can infer (the request issued again) are
			// counted as missed above. The rest may be what the run counter
			// shows the kernel skipped (ftrace's completions beyond the
			// program's runs: a completion that never ran the program
			// cannot be the program's loss; runs = emits is checked above),
			// or 1 in 1000, whichever is more; no more.
			skipped := max(len(comps)-int(st.CompleteRuns), (onLoop+999)/1000)
			if missingOnLoop > int(st.UnseenCompletions)+skipped {
				t.Errorf("%d of the %d completions ftrace recorded on the loop device are not in the tracer's stream (%d inferred and counted; the kernel ran the program %d times for ftrace's %d)",
					missingOnLoop, onLoop, st.UnseenCompletions, st.CompleteRuns, len(comps))
			}
		})
	}
}

// writeAndSync runs writers goroutines, each appending 4 KiB to a file of
// its own under dir and fdatasyncing it, for d, and returns how many
// fdatasync calls returned (the oracle for a tracer's call count).
// perSec > 0 paces them to that many calls a second in all (each writer
// keeps a schedule of its own; one more than an interval late starts it
// afresh instead of bursting to catch up); 0: as fast as the stack goes.
func writeAndSync(t *testing.T, dir string, writers int, d time.Duration, perSec int) int64 {
	t.Helper()
	var wg sync.WaitGroup
	var calls atomic.Int64
	end := time.Now().Add(d)
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("w%d", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			buf := make([]byte, 4096)
			var every time.Duration
			if perSec > 0 {
				every = time.Duration(writers) * time.Second / time.Duration(perSec)
			}
			next := time.Now()
			for n := 0; time.Now().Before(end); n++ {
				if every > 0 {
					next = next.Add(every)
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait)
					} else if wait < -every { // late: do not burst to catch up
						next = time.Now()
					}
				}
				if n%256 == 0 { // bound the file; make the allocator work
					f.Truncate(0)
				}
				if _, err := f.Write(buf); err != nil {
					errs <- err
					return
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					errs <- err
					return
				}
				calls.Add(1)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return calls.Load()
}

// ftraceCompletion is one block_rq_complete as ftrace printed it.
type ftraceCompletion struct {
	dev       uint32 // major<<20 | minor
	us        uint64 // mono, µs
	sector    uint64
	nrSectors uint64
	rwbs      string
	line      string
}

// ftraceAll records every block_rq_complete in an ftrace instance of its
// own (trace clock mono).
type ftraceAll struct {
	t   *testing.T
	dir string
}

func startFtraceAll(t *testing.T) *ftraceAll {
	t.Helper()
	dir := ftraceInstance(t, "etcdscope-lossless", [][2]string{{"buffer_size_kb", "32768"}, {"trace_clock", "mono"},
		{"events/block/block_rq_complete/enable", "1"}})
	return &ftraceAll{t: t, dir: dir}
}

// completions stops the instance and parses what it recorded, e.g.
// "... [001] ..s1. 1234.567890: block_rq_complete: 7,0 WS () 2048 + 8 [0]".
func (f *ftraceAll) completions() []ftraceCompletion {
	f.t.Helper()
	os.WriteFile(filepath.Join(f.dir, "events/block/block_rq_complete/enable"), []byte("0"), 0o644)
	data, err := os.ReadFile(filepath.Join(f.dir, "trace"))
	if err != nil {
		f.t.Fatal(err)
	}
	if bytes.Contains(data, []byte("LOST")) {
		f.t.Fatal("ftrace lost events; the oracle is incomplete")
	}
	var out []ftraceCompletion
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, ": block_rq_complete: ")
		if i < 0 {
			continue
		}
		head := strings.Fields(line[:i])
		sec, usec, ok := strings.Cut(head[len(head)-1], ".")
		fields := strings.Fields(line[i+len(": block_rq_complete: "):])
		// dev rwbs (cmd) sector + nr [err]
		if !ok || len(fields) < 6 || fields[4] != "+" {
			f.t.Fatalf("ftrace line %q", line)
		}
		s, _ := strconv.ParseUint(sec, 10, 64)
		u, _ := strconv.ParseUint(usec, 10, 64)
		maj, min, _ := strings.Cut(fields[0], ",")
		ma, _ := strconv.ParseUint(maj, 10, 32)
		mi, _ := strconv.ParseUint(min, 10, 32)
		sector, _ := strconv.ParseUint(fields[3], 10, 64)
		nr, _ := strconv.ParseUint(fields[5], 10, 64)
		out = append(out, ftraceCompletion{dev: uint32(ma<<20 | mi), us: s*1e6 + u, sector: sector,
			nrSectors: nr, rwbs: fields[1], line: line})
	}
	return out
}

// matchCompletions pairs, per disk, sector and size, each tracer
// completion with the nearest ftrace completion of that key still free,
// logs the ftrace ones left over, and returns how many counted ones found
// no pair, how many of those were on disk loop, and how many counted ones
// were on disk loop. The tracer's completions count by the same rule on
// their own clock.
//
// There is no window on the two clocks: what is missing is what ftrace
// has beyond the tracer for the same key, whenever it came. ftrace's probe
// and the tracer's run one after the other on the same tracepoint, and
// what runs between them (an interrupt; on this VM, the hypervisor taking
// the vCPU) separates their clocks without bound. Measured 2026-12-06, 4
// runs x 3 filesystems, load average ~5: gap p50 0.27-0.34 µs, p99
// 0.86-3.0 µs, max 4.9-199 µs, 0-13 pairs a run over 20 µs (of 5,000-70,000):
// the 20 µs window of 2026-12-01 counted those as lost (the "0-0.11%
// silent loss" was the oracle's), and a 200 µs window would only move the
// edge (1% margin in a 20-run flake hunt). The gap distribution is logged.
func matchCompletions(t *testing.T, comps []ftraceCompletion, got []event.Block, counts func(ftraceCompletion) bool, loop uint32) (missing, missingOnLoop, onLoop int) {
	type key struct {
		dev    uint32
		sector uint64
		nr     uint64
	}
	fByKey := map[key][]ftraceCompletion{}
	for _, c := range comps {
		if !counts(c) {
			continue
		}
		if c.dev == loop {
			onLoop++
		}
		k := key{c.dev, c.sector, c.nrSectors}
		fByKey[k] = append(fByKey[k], c)
	}
	tByKey := map[key][]uint64{}
	for _, b := range got {
		if counts(ftraceCompletion{dev: uint32(b.Dev), us: b.CompleteNs / 1000}) {
			k := key{uint32(b.Dev), b.Sector, uint64(b.Bytes) >> 9}
			tByKey[k] = append(tByKey[k], b.CompleteNs)
		}
	}
	var gaps []int64
	logged := 0
	for k, fs := range fByKey {
		used := make([]bool, len(fs))
		for _, ns := range tByKey[k] {
			best, bestD := -1, int64(math.MaxInt64)
			for i, f := range fs {
				if d := absNs(int64(f.us*1000) - int64(ns)); !used[i] && d < bestD {
					best, bestD = i, d
				}
			}
			if best < 0 {
				break // more traced than ftrace saw: nothing left to pair
			}
			used[best] = true
			gaps = append(gaps, bestD)
		}
		for i, c := range fs {
			if used[i] {
				continue
			}
			missing++
			if c.dev == loop {
				missingOnLoop++
			}
			if logged < 20 {
				logged++
				t.Logf("only ftrace saw: %s", c.line)
			}
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		over20 := len(gaps) - sort.Search(len(gaps), func(i int) bool { return gaps[i] > 20000 })
		// ftrace's clock is in µs: a gap under 1 µs is its rounding.
		t.Logf("ftrace-to-tracer clock gap of %d matched completions: p50 %v, p99 %v, max %v; %d over 20 µs",
			len(gaps), time.Duration(gaps[len(gaps)/2]), time.Duration(gaps[len(gaps)*99/100]), time.Duration(gaps[len(gaps)-1]), over20)
	}
	return missing, missingOnLoop, onLoop
}

// absNs returns |d|.
func absNs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// TestStarvedReaderLossIsReported reproduces loss under load every time:
// the reader, in a cgroup of its own held to 2% of a CPU (CFS quota), with
// a 64 KiB ring, cannot drain what four fdatasync writers on ext4 over a
// loop device produce. Loss is then never silent: the report counts it,
// each group's verdict says "biased: N lost events" (and the missed probe
// runs apart, when there are any), and the per-interval
// lost= of the live lines add up to the report's total.
func TestStarvedReaderLossIsReported(t *testing.T) {
	testenv.RequireRoot(t)
	cg := cpuLimitedCgroup(t, 2000, 100000)
	dev := loopDevice(t, "/var/tmp", 512<<20)
	mnt := mountFS(t, dev, "ext4", "-q", "-F")
	tr := startFsyncIn(t, cg, "--pid", strconv.Itoa(os.Getpid()), "--interval", "1s", "--ring-size", "65536")
	writeAndSync(t, mnt, 4, 4*time.Second, 0)
	_, rep := tr.stop()
	if rep.LostEvents == 0 {
		t.Fatalf("a reader held to 2%% of a CPU lost nothing; stderr:\n%s", tr.stderr.String())
	}
	// Of the missed runs, those of block and journal programs can only
	// leave layers short (analysis.LayerMisses of the programs' own
	// counts); the rest could hide a call.
	_, layerRuns := analysis.LayerMisses(rep.MissedPrograms)
	want := analysis.Bias{LostEvents: rep.LostEvents, MissedRuns: rep.MissedEvents, MissedLayerRuns: layerRuns}
	for _, g := range rep.Groups {
		if g.Bias != want {
			t.Errorf("group %v: bias %+v, want %+v", g.Key, g.Bias, want)
		}
	}
	var sum uint64
	for _, line := range strings.Split(tr.stderr.String(), "\n") {
		i := strings.Index(line, " lost=")
		if i < 0 {
			continue
		}
		var n uint64
		fmt.Sscanf(line[i+len(" lost="):], "%d", &n)
		sum += n
	}
	t.Logf("lost %d events (interval lines: %d), missed %d; %d groups", rep.LostEvents, sum, rep.MissedEvents, len(rep.Groups))
	if sum != rep.LostEvents {
		t.Errorf("interval lines lost %d in all, the report %d; stderr:\n%s", sum, rep.LostEvents, tr.stderr.String())
	}
}

// cpuLimitedCgroup makes a cgroup of its own (removed at cleanup) whose
// tasks together get at most quotaUs of CPU time per periodUs: cgroup v2's
// cpu.max where the unified hierarchy has the cpu controller, else cgroup
// v1's cpu.cfs_quota_us. It returns the directory to write pids to
// (cgroup.procs).
func cpuLimitedCgroup(t *testing.T, quotaUs, periodUs int) string {
	t.Helper()
	dir, remove, err := cpulimit.Make(fmt.Sprintf("etcdscope-e2e-starve-%d", os.Getpid()), quotaUs, periodUs)
	if errors.Is(err, cpulimit.ErrNoController) {
		testenv.Missing(t, fmt.Sprintf("%v to starve the reader with", err))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return dir
}
