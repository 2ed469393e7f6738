package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/cpulimit"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/tracer"
)

// The starved reader of issue 12's loss goal: etcdscope in a cgroup of its
// own held to starvedQuotaUs of CPU per starvedPeriodUs (10% of one CPU),
// a starvation that is real (the cgroup is throttled for most of every
// period in which the reader has work) but that a reader costing what
// etcdscope's does can survive on average: at the rates below it needs
// ~5-6% of a CPU (bench/findings.md, section 13).
const (
	starvedQuotaUs  = 10000
	starvedPeriodUs = 100000
	// starvedFor is the CI test's length. The goal's 60 s run is make
	// bench's (benchrun -only starved); loss from a starved reader shows
	// within a few throttle periods of the reader's demand passing its
	// quota (TestStarvedReaderLossIsReported loses within a second), so
	// 10 s (100 periods) catches it without a minute of the suite's two
	// cores per tracer.
	starvedFor = 10 * time.Second
	// starvedFsyncsPerSec paces the CI test's writers. Unpaced, the stack's
	// rate follows the machine: 1000-1500/s on the loaded machine of
	// bench/findings.md section 13, but 3122/s in one idle run here, where
	// the reader's 26 µs per call came to 8.1% of a CPU before the ones it
	// lost (3868 events): a test of the machine's speed against the quota,
	// not of the reader. 2000/s is more than a busy etcd's WAL makes
	// (its fsyncs batch) and holds the reader's demand near half the quota
	// at the per-call cost measured on the loaded machine (24-30 µs).
	// make bench's run stays unpaced: the goal's "highest rate the stack
	// sustains", its rate and the reader's CPU stated beside the loss.
	starvedFsyncsPerSec = 2000
)

// TestStarvedReaderLosesNoFsync: `etcdscope fsync` with stacked levels on
// (ext4 over a loop device, the host fsyncs the loop driver makes traced
// as the backing level), four fdatasync writers paced to starvedFsyncsPerSec, the reader
// starved (starvedQuotaUs), default ring: no record lost, every call the
// writers made (their own count, the oracle) is in the report, and the
// report's backing row has a fsync for nearly every upper flush (the stacked
// level's records arrived too). Output: the summary only (--min-latency
// 1h): one JSON line per call is 8 KiB here (four flushes, each nesting a
// host fsync with its requests) and took the reader from ~30 to 40-53 µs
// per call, 9% of a CPU in one run on a loaded machine, too near the
// quota for a CI test of the tracer; make bench's run keeps the lines.
func TestStarvedReaderLosesNoFsync(t *testing.T) {
	testenv.RequireRoot(t)
	cg := cpuLimitedCgroup(t, starvedQuotaUs, starvedPeriodUs)
	dev := loopDevice(t, "/var/tmp", 512<<20)
	mnt := mountFS(t, dev, "ext4", "-q", "-F")
	thr0 := cgroupThrottled(t, cg)
	tr := startFsyncIn(t, cg, "--pid", strconv.Itoa(os.Getpid()), "--min-latency", "1h")
	cpu0 := tr.cpuNs() // loading the programs
	calls := writeAndSync(t, mnt, 4, starvedFor, starvedFsyncsPerSec)
	cpuNs := tr.cpuNs() - cpu0
	_, rep := tr.stop()
	thr := cgroupThrottled(t, cg) - thr0
	upper, backing := levelRows(rep)
	t.Logf("%d fdatasyncs in %s (%.0f/s), traced %d; lost %d, missed %d; reader %.1f ms of CPU (%.1f%% of one, %.1f µs per call), throttled %d times, ring peak %d KiB of %d",
		calls, starvedFor, float64(calls)/starvedFor.Seconds(), rep.Fsyncs, rep.LostEvents, rep.MissedEvents,
		float64(cpuNs)/1e6, 100*float64(cpuNs)/float64(starvedFor), float64(cpuNs)/1e3/float64(max(calls, 1)), thr, rep.RingPeakBytes>>10, tracer.DefaultRingBytes>>10)
	if thr == 0 {
		t.Errorf("the reader's cgroup was never throttled: the reader was not starved")
	}
	if rep.LostEvents != 0 {
		t.Errorf("a reader starved to %d%% of a CPU lost %d events", 100*starvedQuotaUs/starvedPeriodUs, rep.LostEvents)
	}
	if rep.Fsyncs != calls {
		t.Errorf("the writers made %d fdatasyncs; the report counts %d", calls, rep.Fsyncs)
	}
	if upper == nil || backing == nil || backing.Untraced != "" {
		t.Fatalf("no traced upper and backing rows: %+v", rep.Levels)
	}
	// Every issued flush reaches the loop driver, which syncs the backing
	// file for it (TestStackedLoop); allow the few in flight at the edges.
	flushes := upper.FlushesPerFsync * float64(rep.Fsyncs)
	t.Logf("upper %.0f flushes, backing %d fsyncs (%.0f%% of upper's device flush)", flushes, backing.Total.Count, 100*backing.NestedShare)
	if float64(backing.Total.Count) < 0.95*flushes {
		t.Errorf("upper issued %.0f flushes, backing has %d fsyncs: the stacked level's records are missing", flushes, backing.Total.Count)
	}
}

// TestStarvedReaderLosesNoPeerEvent: `etcdscope peers` starved
// (starvedQuotaUs) with its default ring while fsyncgen -churn opens, uses
// (a byte each way) and closes 3000 loopback connections a second on the
// traced port, ~30k events/s: no event lost, and every connection the
// generator counts (the oracle) is in the report as opened, set up and
// closed.
func TestStarvedReaderLosesNoPeerEvent(t *testing.T) { starvedPeers(t) }

// TestStarvedReaderManyFDsLosesNoPeerEvent is TestStarvedReaderLosesNoPeerEvent
// on a host with 10k more open sockets (200 processes holding 50 each, a
// busy node's fd tables): the reader used to look socket owners up with a
// scan of /proc/*/fd inline, ~6 µs per fd (68 ms here), once a second,
// and, starved, lost 183k of 280k events (ring peak 2047 of 2048 KiB;
// bench/findings.md, section 16). The look-up runs in the background now,
// its full scans held under 1% of a CPU.
func TestStarvedReaderManyFDsLosesNoPeerEvent(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HoldSockets(t, 200, 50)
	starvedPeers(t)
}

func starvedPeers(t *testing.T) {
	testenv.RequireRoot(t)
	const connsPerSec = 3000
	cg := cpuLimitedCgroup(t, starvedQuotaUs, starvedPeriodUs)
	gen := buildFsyncgen(t)
	port := freePort(t)
	thr0 := cgroupThrottled(t, cg)
	tr := startIn(t, cg, "peers", "--port", strconv.Itoa(port), "--duration", "0", "--output", "json")
	cpu0, wait0 := tr.cpuNs(), tr.waitNs()
	out, err := exec.Command(gen, "-churn", strconv.Itoa(port), "-threads", "8", "-rate", strconv.Itoa(connsPerSec),
		"-duration", starvedFor.String()).Output()
	if err != nil {
		t.Fatalf("fsyncgen -churn: %v", err)
	}
	var res struct {
		Conns float64 `json:"conns"`
		Rate  float64 `json:"rate_per_s"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("fsyncgen output %q: %v", out, err)
	}
	time.Sleep(300 * time.Millisecond) // the listener's closes
	cpuNs, waitNs := tr.cpuNs()-cpu0, tr.waitNs()-wait0
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("etcdscope peers: %v; stderr:\n%s", err, tr.stderr.String())
	}
	thr := cgroupThrottled(t, cg) - thr0
	var rep struct {
		Events        uint64 `json:"events"`
		LostEvents    uint64 `json:"lost_events"`
		MissedEvents  uint64 `json:"missed_events"`
		RingPeakBytes uint64 `json:"ring_peak_bytes"`
		Owners        *struct {
			Resolved, Unowned, Scans uint64
			QueueDrops               uint64  `json:"queue_drops"`
			LateOwners               int     `json:"late_owners"`
			MaxScanCPUSeconds        float64 `json:"max_scan_cpu_seconds"`
		} `json:"owner_lookups"`
		Links []struct {
			Opened, Closed int64
			Setup          struct{ Count int64 } `json:"setup_ns"`
			Link           struct{ Direction string }
		} `json:"links"`
	}
	if err := json.Unmarshal(tr.stdout.Bytes(), &rep); err != nil {
		t.Fatalf("peers output: %v\n%s", err, tr.stdout.String())
	}
	var opened, closed, setup int64
	// The generator's connections as its end saw them: a loopback
	// connection's accepting end is folded into the opening end's link
	// when both close together, else it has a passive link of its own.
	for _, l := range rep.Links {
		if l.Link.Direction == "active" {
			opened, closed, setup = opened+l.Opened, closed+l.Closed, setup+l.Setup.Count
		}
	}
	conns := int64(res.Conns)
	t.Logf("%d connections (%.0f/s), %d events (%.0f/s), lost %d, missed %d; opened %d, set up %d, closed %d; reader %.1f ms of CPU (%.1f%% of one, %.2f µs per event), %.1f ms runnable off CPU (run queue or throttled), throttled %d times, ring peak %d KiB of %d",
		conns, res.Rate, rep.Events, float64(rep.Events)/starvedFor.Seconds(), rep.LostEvents, rep.MissedEvents, opened, setup, closed,
		float64(cpuNs)/1e6, 100*float64(cpuNs)/float64(starvedFor), float64(cpuNs)/1e3/float64(max(rep.Events, 1)), float64(waitNs)/1e6, thr, rep.RingPeakBytes>>10, tracer.DefaultPeerRingBytes>>10)
	// Each connection is ten events (open, setup, one RTT sample, close
	// start and close, on each end); below 20k events/s the test would not
	// be testing the goal's rate.
	if rep.Owners == nil {
		t.Fatalf("no owner_lookups in the report:\n%s", tr.stdout.String())
	}
	t.Logf("owner look-ups: %+v", *rep.Owners)
	if res.Rate < 2000 {
		t.Fatalf("fsyncgen made %.0f connections/s, not the ~%d (30k events/s) the test is about: the machine is too loaded", res.Rate, connsPerSec)
	}
	if thr == 0 {
		t.Errorf("the reader's cgroup was never throttled: the reader was not starved")
	}
	if rep.LostEvents != 0 || rep.MissedEvents != 0 {
		t.Errorf("a reader starved to %d%% of a CPU lost %d events (the kernel skipped %d program runs)", 100*starvedQuotaUs/starvedPeriodUs, rep.LostEvents, rep.MissedEvents)
	}
	if opened != conns || closed != conns || setup != conns || rep.Events < uint64(10*conns) {
		t.Errorf("fsyncgen made %d connections; the report has %d opened, %d set up, %d closed, %d events (want ≥ %d)",
			conns, opened, setup, closed, rep.Events, 10*conns)
	}
}

// cgroupThrottled returns how many periods the cgroup's CPU quota has
// throttled it (cpu.stat nr_throttled, cgroup v2 and v1 alike).
func cgroupThrottled(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := cpulimit.Throttled(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cpuNs returns the CPU time the running command's threads have used so
// far (the sum of /proc/PID/task/*/schedstat's first field: exact, where
// /proc/PID/stat's utime+stime is sampled at the tick).
func (tr *trace) cpuNs() int64 {
	tr.t.Helper()
	return tr.schedstat(0)
}

// waitNs returns the time the running command's threads have spent
// runnable but not running so far (schedstat's second field, run_delay):
// a reader the host kept off the CPU, quota or not, shows it here.
func (tr *trace) waitNs() int64 {
	tr.t.Helper()
	return tr.schedstat(1)
}

// schedstat sums field i of /proc/PID/task/*/schedstat (0: ns on CPU,
// 1: ns waiting on a run queue) over the command's threads.
func (tr *trace) schedstat(i int) int64 {
	tr.t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", tr.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		tr.t.Fatal(err)
	}
	var sum int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) > i {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			sum += n
		}
	}
	return sum
}

// buildFsyncgen builds make bench's load generator (bench/fsyncgen) into
// the test's temporary directory.
func buildFsyncgen(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fsyncgen")
	if out, err := exec.Command("go", "build", "-o", bin, "../bench/fsyncgen").CombinedOutput(); err != nil {
		t.Fatalf("go build fsyncgen: %v\n%s", err, out)
	}
	return bin
}

// TestGOMAXPROCSFitsCPUQuota: etcdscope held to 10% of a CPU runs with
// one P (go_sched_gomaxprocs_threads on serve's /metrics, the runtime's
// own figure), where Go's default stops at 2 and the idle P's GC workers
// spent the reader's quota (cmd/etcdscope/maxprocs.go); GOMAXPROCS in the
// environment is left as the user set it.
func TestGOMAXPROCSFitsCPUQuota(t *testing.T) {
	testenv.RequireRoot(t)
	cg := cpuLimitedCgroup(t, starvedQuotaUs, starvedPeriodUs)
	for _, c := range []struct {
		env  []string
		want float64
	}{{nil, 1}, {[]string{"GOMAXPROCS=2"}, 2}} {
		s := startServeIn(t, cg, c.env)
		if got := s.gomaxprocs(t); got != c.want {
			t.Errorf("env %q, cgroup quota %d of %d µs: GOMAXPROCS %g, want %g", c.env, starvedQuotaUs, starvedPeriodUs, got, c.want)
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
	}
}

// gomaxprocs reads go_sched_gomaxprocs_threads, the runtime's own figure,
// from serve's /metrics.
func (s *server) gomaxprocs(t *testing.T) float64 {
	t.Helper()
	fam := s.scrape(t)["go_sched_gomaxprocs_threads"]
	if fam == nil || len(fam.GetMetric()) != 1 {
		t.Fatalf("no go_sched_gomaxprocs_threads on /metrics")
	}
	return fam.GetMetric()[0].GetGauge().GetValue()
}

// TestServeOnePOnceReady: serve runs on one P once ready, as `fsync`
// does (cmd/etcdscope/maxprocs.go, onePForReader; bench/findings.md 34:
// less CPU idle, at 10k fsync/s and at 1k etcd puts/s, every call
// counted), with the commit tracer too (--commit-comm; findings 36: at 1k
// and ~3k etcd puts/s, every write counted), and GOMAXPROCS in the
// environment wins.
func TestServeOnePOnceReady(t *testing.T) {
	testenv.RequireRoot(t)
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("SKIPPED: this test runs on one P already (one CPU, a CPU limit or GOMAXPROCS): nothing to drop")
	}
	port := strconv.Itoa(freePort(t))
	for _, c := range []struct {
		env, args []string
		one       bool
	}{
		{nil, nil, true},
		{[]string{"GOMAXPROCS=2"}, nil, false},
		{nil, []string{"--commit-comm", "nosuchetcd34"}, true},
	} {
		s := startServeIn(t, "", c.env, append([]string{"--comm", "nosuchetcd34", "--port", port}, c.args...)...)
		if got := s.gomaxprocs(t); (got == 1) != c.one {
			t.Errorf("env %q, flags %q: GOMAXPROCS %g once ready, want one P: %v", c.env, c.args, got, c.one)
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
	}
}
