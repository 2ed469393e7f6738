package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// fioResult is the part of fio's --output-format=json this test reads:
// the sync (fdatasync) completion counts and latency percentiles.
type fioResult struct {
	Jobs []struct {
		Sync struct {
			TotalIOs int64 `json:"total_ios"`
			Lat      struct {
				N          int64              `json:"N"`
				Percentile map[string]float64 `json:"percentile"`
			} `json:"lat_ns"`
		} `json:"sync"`
	} `json:"jobs"`
}

// TestFioEtcdJob is oracle 1: fio's etcd job (the one etcd's maintainers
// recommend for checking a disk). The traced fdatasync count must equal
// fio's sync total_ios exactly, and p50/p99 must agree with fio's sync
// latency percentiles within 10%.
func TestFioEtcdJob(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-fio-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	recs, rep, fioCount := fioEtcdJob(t, dir, "22m", "--comm", "fio")
	lat := fioCalls(recs, dir)
	if int64(len(lat)) != fioCount || fioCount == 0 {
		t.Fatalf("traced %d fdatasync calls, fio reports %d syncs", len(lat), fioCount)
	}
	if rep.LostEvents != 0 {
		t.Errorf("lost %d events", rep.LostEvents)
	}
}

// TestFioEtcdJobKernelPartition is oracle 1 for --kernel-partition (one
// record per call, from what the kernel kept for it; no per-request
// records): fio's etcd job under /var/tmp, on ext4 on a plain disk. Every
// fdatasync fio counts is a record or counted lost (a call whose slot
// overflowed), p50/p99 within 10% of fio's, and the flushes counted
// inside the calls' windows equal those the kernel's block_rq_complete
// tracepoint (ftrace) shows in the same windows, as TestFilesystemsOnLoop
// checks them for the raw stream.
func TestFioEtcdJobKernelPartition(t *testing.T) {
	testenv.RequireRoot(t)
	disk := plainDiskOf(t, "/var/tmp")
	kdev, _ := kernelDev(t, "/dev/"+disk)
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-fio-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ft := startFtrace(t, kdev)
	recs, rep, fioCount := fioEtcdJob(t, dir, "8m", "--comm", "fio", "--dev", disk, "--kernel-partition")
	flushTimes, flushLines := ft.flushTimes()
	var mine []analysis.FsyncRecord
	traced, reqs := 0, 0
	for _, r := range recs {
		if r.Comm == "fio" && strings.HasPrefix(r.Path, dir) {
			mine = append(mine, r)
			traced += r.Flushes
		}
		for _, q := range r.Requests {
			// The raw stream names each request's submitter; the
			// kernel's entries do not keep it (AttributeKPart).
			if q.Comm != "" || q.Sector != 0 {
				t.Fatalf("a request with submitter %q, sector %d: the raw stream, not the kernel's record", q.Comm, q.Sector)
			}
			reqs++
		}
	}
	// Each call the kernel could not partition is counted lost, not
	// recorded: the entries run of pipeline's
	// TestKernelPartitionMatchesAttribute bounds them at 2%.
	if int64(len(mine))+int64(rep.LostEvents) != fioCount || int64(len(mine))*50 < fioCount*49 || reqs == 0 || rep.Unpartitioned > rep.LostEvents {
		t.Fatalf("%d records, %d lost (%d unpartitioned), %d requests; fio reports %d syncs", len(mine), rep.LostEvents, rep.Unpartitioned, reqs, fioCount)
	}
	sure, edge := inWindows(flushTimes, mine)
	// As TestFilesystemsOnLoop: ftrace's microseconds at a window's edge,
	// the probe runs the kernel skipped, and 1 in 1000 completions no BPF
	// program runs for on this 6.18 kernel.
	unseen := int(rep.MissedEvents) + (sure+499)/500
	t.Logf("%d calls, %d lost (%d unpartitioned), %d requests; %d flushes traced, %d by ftrace in the same windows (+%d within 1 µs of an edge); missed %d",
		len(mine), rep.LostEvents, rep.Unpartitioned, reqs, traced, sure, edge, rep.MissedEvents)
	if traced+unseen < sure || traced > sure+edge || traced == 0 {
		logUnmatched(t, flushTimes, flushLines, mine)
		t.Fatalf("etcdscope counts %d flushes inside fsync windows, the kernel's block_rq_complete shows %d (+%d at an edge)", traced, sure, edge)
	}
}

// plainDiskOf names the whole disk under dir's filesystem, which must be
// ext4 on a disk that is neither device-mapper nor a loop device (else
// the test is skipped as missing).
func plainDiskOf(t *testing.T, dir string) string {
	t.Helper()
	// MAJ:MIN, not SOURCE: a bind mount's SOURCE reads
	// "/dev/vda1[/var/lib/etcdscope-fresh-root/root]" (fresh-root's chroot).
	out, err := exec.Command("findmnt", "-no", "MAJ:MIN,FSTYPE", "-T", dir).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 || f[1] != "ext4" {
		testenv.Missing(t, fmt.Sprintf("%s: not ext4 (%q, %v)", dir, out, err))
	}
	link, err := filepath.EvalSymlinks("/sys/dev/block/" + f[0])
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("%s: ext4 on %s, not a block device (%v)", dir, f[0], err))
	}
	name := filepath.Base(link)
	if _, err := os.Stat(link + "/partition"); err == nil {
		name = filepath.Base(filepath.Dir(link))
	}
	if strings.HasPrefix(name, "dm-") || strings.HasPrefix(name, "loop") {
		testenv.Missing(t, fmt.Sprintf("%s is on %s, a stacked disk", dir, name))
	}
	return name
}

// fioEtcdJob runs fio's etcd job of size in dir traced by `etcdscope
// fsync args`, checks every record's partition and its calls' p50 and p99
// against fio's sync latency percentiles (within 10%), and returns the
// records, the report and fio's count of fdatasyncs.
func fioEtcdJob(t *testing.T, dir, size string, args ...string) ([]analysis.FsyncRecord, analysis.Report, int64) {
	t.Helper()
	fio := testenv.LookPath(t, "fio", "fio")
	tr := startFsync(t, args...)
	out, err := exec.Command(fio, "--name=etcd", "--directory="+dir, "--rw=write", "--ioengine=sync",
		"--fdatasync=1", "--bs=2300", "--size="+size, "--output-format=json").Output()
	if err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	recs, rep := tr.stop()
	var res fioResult
	if err := json.Unmarshal(out[strings.IndexByte(string(out), '{'):], &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("fio JSON: %v", err)
	}
	fioSync := res.Jobs[0].Sync
	// fio 3.33 leaves sync.total_ios at 0 for fdatasync; lat_ns.N is its
	// count of completed syncs (one latency sample per fdatasync).
	fioCount := fioSync.TotalIOs
	if fioCount == 0 {
		fioCount = fioSync.Lat.N
	}
	checkPartition(t, recs)
	s := stats.Summarize(fioCalls(recs, dir))
	for _, q := range []struct {
		key  string
		ours int64
	}{{"50.000000", s.P50}, {"99.000000", s.P99}} {
		fioV := fioSync.Lat.Percentile[q.key]
		if fioV == 0 {
			t.Fatalf("fio JSON has no sync percentile %s", q.key)
		}
		diff := math.Abs(float64(q.ours)-fioV) / fioV
		t.Logf("p%s: etcdscope %.1f µs, fio %.1f µs (%.1f%%)", q.key[:2], float64(q.ours)/1e3, fioV/1e3, 100*diff)
		if diff > 0.10 {
			t.Errorf("p%s differs by %.1f%% (> 10%%): etcdscope %d ns, fio %.0f ns", q.key[:2], 100*diff, q.ours, fioV)
		}
	}
	return recs, rep, fioCount
}

// fioCalls returns the times (ns) of fio's fdatasyncs in dir among recs.
func fioCalls(recs []analysis.FsyncRecord, dir string) []int64 {
	var lat []int64
	for _, r := range recs {
		if r.Comm == "fio" && r.Syscall == "fdatasync" && strings.HasPrefix(r.Path, dir) {
			lat = append(lat, r.TotalNs)
		}
	}
	return lat
}

// TestFilesystemsOnLoop is oracle 2: ext4, XFS and btrfs made on loop
// devices, and fdatasync on the raw block device. Every event's layers sum
// to its total, and the flushes etcdscope counts inside fsync windows
// equal those the kernel's block_rq_complete tracepoint (ftrace, decoded
// from its own rwbs) shows inside the same windows.
func TestFilesystemsOnLoop(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name, fs string
		mkfs     []string
	}{
		{"ext4", "ext4", []string{"-q", "-F"}},
		{"xfs", "xfs", []string{"-q", "-f"}},
		{"btrfs", "btrfs", []string{"-q", "-f"}},
		{"raw", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := loopDevice(t, "/var/tmp", 512<<20)
			kdev, _ := kernelDev(t, dev)
			args := []string{"--duration", "3s"}
			var target string
			if tc.fs != "" {
				mnt := mountFS(t, dev, tc.fs, tc.mkfs...)
				args = append(args, "--workload", "wal", "--dir", mnt)
			} else {
				target = dev
			}
			ft := startFtrace(t, kdev)
			var recs []analysis.FsyncRecord
			var rep analysis.Report
			if target == "" {
				cmd := exec.Command(etcdscope(t), append([]string{"fsync", "--output", "json", "--interval", "0"}, args...)...)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("etcdscope: %v", err)
				}
				recs, rep = parseOutput(t, out)
			} else {
				tr := startFsync(t, "--comm", "fio")
				out, err := exec.Command(testenv.LookPath(t, "fio", "fio"), "--name=raw", "--filename="+target,
					"--rw=write", "--ioengine=sync", "--fdatasync=1", "--bs=4k", "--size=8m", "--output-format=json").CombinedOutput()
				if err != nil {
					t.Fatalf("fio: %v\n%s", err, out)
				}
				recs, rep = tr.stop()
			}
			flushTimes, flushLines := ft.flushTimes()
			var mine []analysis.FsyncRecord
			traced := 0
			for _, r := range recs {
				if len(r.Disks) == 1 && r.Disks[0] == fmt.Sprintf("%d:%d", kdev>>20, kdev&(1<<20-1)) {
					mine = append(mine, r)
					traced += r.Flushes
				}
			}
			if len(mine) < 50 {
				t.Fatalf("only %d fsyncs on %s traced", len(mine), dev)
			}
			checkPartition(t, mine)
			sure, edge := inWindows(flushTimes, mine)
			var g *analysis.Group
			for i := range rep.Groups {
				if rep.Groups[i].Key.FileKind == analysis.KindWAL || tc.fs == "" {
					g = &rep.Groups[i]
					break
				}
			}
			if g == nil {
				t.Fatalf("no report group for %s", tc.name)
			}
			t.Logf("%s: %d fsyncs, %d flushes traced, %d by ftrace in the same windows (+%d within 1 µs of an edge); report: %.2f flushes per fsync, p50 %s ms p99 %s ms",
				tc.name, len(mine), traced, sure, edge, g.FlushesPerFsync, render.Ms(g.Total.P50), render.Ms(g.Total.P99))
			t.Logf("%s: probe runs skipped by the kernel: %d", tc.name, rep.MissedEvents)
			// ftrace prints microseconds: a flush completing in the same
			// microsecond as a window's edge may fall either way.
			// A probe run the kernel skipped and counted (BPF recursion) is
			// a flush etcdscope cannot see; it reports how many. Beyond
			// those, on this 6.18 kernel the tp_btf program on
			// block_rq_complete runs for about 1 in 1000 fewer hits than
			// ftrace records, with no recursion miss counted (measured with
			// kernel.bpf_stats_enabled run_cnt against ftrace over the same
			// interval, all in softirq context): allow that, and no more.
			unseen := int(rep.MissedEvents) + (sure+499)/500
			if traced+unseen < sure || traced > sure+edge {
				logUnmatched(t, flushTimes, flushLines, mine)
				t.Fatalf("etcdscope counts %d flushes inside fsync windows, the kernel's block_rq_complete shows %d (+%d at an edge)", traced, sure, edge)
			}
			if traced == 0 {
				t.Fatalf("no flushes at all: the loop device should have a write-back cache")
			}
			if rep.LostEvents != 0 {
				t.Errorf("lost %d events", rep.LostEvents)
			}
		})
	}
}

// TestWorkloadWALOnRootExt4 is oracle 4: the README's main command on this
// machine's own ext4 gives a report whose data, journal and device-flush
// layers are all nonzero, and whose count equals the workload's own.
func TestWorkloadWALOnRootExt4(t *testing.T) {
	testenv.RequireRoot(t)
	out, err := exec.Command(etcdscope(t), "fsync", "--workload", "wal", "--duration", "3s", "--output", "json", "--interval", "0").Output()
	if err != nil {
		t.Fatalf("etcdscope: %v", err)
	}
	recs, rep := parseOutput(t, out)
	checkPartition(t, recs)
	var g *analysis.Group
	for i := range rep.Groups {
		if rep.Groups[i].Key.FileKind == analysis.KindWAL {
			g = &rep.Groups[i]
		}
	}
	if g == nil || g.Total.Count < 100 {
		t.Fatalf("no WAL group with ≥ 100 fsyncs: %+v", rep.Groups)
	}
	for _, l := range g.Layers {
		switch l.Name {
		case analysis.LayerDataWriteback, analysis.LayerJournal, analysis.LayerDeviceFlush:
			if l.Stats.Sum == 0 {
				t.Errorf("layer %s is zero on %s/%s", l.Name, g.Key.FS, g.Key.DevName)
			}
		}
	}
	if g.Verdict == "" {
		t.Error("no verdict")
	}
}

// TestBadInput: every bad flag is one line naming the fix, exit code 2, and
// nothing attached.
// TestCtrlCDetachesEverything: while tracing, the process holds its BPF
// programs and links; after Ctrl-C (SIGINT) it prints the final report and
// none of those programs or links exists any more.
func TestCtrlCDetachesEverything(t *testing.T) {
	testenv.RequireRoot(t)
	tr := startFsync(t, "--comm", "no-such-comm")
	progs, links := bpfObjectIDs(t, tr.cmd.Process.Pid)
	if len(progs) < 8 || len(links) < 8 {
		t.Fatalf("tracing process holds %d programs and %d links, want the fsync, block and journal ones", len(progs), len(links))
	}
	_, rep := tr.stop()
	if rep.Fsyncs != 0 {
		t.Fatalf("%d fsyncs of a comm that does not exist", rep.Fsyncs)
	}
	waitFreed(t, progs, links)
}

// waitFreed fails the test unless the BPF programs and links progs and
// links are gone within 10 s (the kernel frees them after an RCU grace
// period once their last reference goes).
func waitFreed(t *testing.T, progs, links []uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, id := range progs {
			if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); !errors.Is(err, os.ErrNotExist) {
				if p != nil {
					p.Close()
				}
				left = append(left, fmt.Sprintf("program %d", id))
			}
		}
		for _, id := range links {
			if l, err := link.NewFromID(link.ID(id)); err == nil {
				l.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still present 10 s after exit: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSIGKILLFreesEverything: fsync (with its wal workload), serve and
// peers killed with SIGKILL once attached. The kernel frees every BPF
// program and link they held (the process's fds were their only
// reference); what only the process could remove, the workload's scratch
// directory (64 MiB), stays, and the next start removes it and says so.
// (A tracefs mount it made: TestTracefsMountAfterSIGKILL in cmd/etcdscope;
// netem qdiscs: no sch_netem on this kernel.)
func TestSIGKILLFreesEverything(t *testing.T) {
	testenv.RequireRoot(t)
	bin := etcdscope(t)
	dir := t.TempDir()
	wl := filepath.Join(dir, "wl")
	if err := os.Mkdir(wl, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"fsync", "--workload", "wal", "--dir", wl, "--interval", "0", "--duration", "60s"},
		{"serve", "--listen", "127.0.0.1:0", "--comm", "etcd"},
		{"peers", "--port", "23841", "--duration", "60s"},
	} {
		ready := filepath.Join(dir, c[0]+".ready")
		cmd := exec.Command(bin, append(c, "--ready-file", ready)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s not ready after 20 s: %s", c[0], stderr.String())
			}
		}
		// The workload starts once the probes are attached: wait for its
		// scratch before the kill.
		for deadline := time.Now().Add(5 * time.Second); c[0] == "fsync" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(wl, "etcdscope-wal-*", "member")); len(m) > 0 {
				break
			}
		}
		progs, links := bpfObjectIDs(t, cmd.Process.Pid)
		if len(progs) == 0 || len(links) == 0 {
			t.Errorf("%s holds %d programs and %d links once ready", c[0], len(progs), len(links))
		}
		cmd.Process.Kill()
		cmd.Wait()
		waitFreed(t, progs, links)
		t.Logf("%s: %d programs and %d links freed after SIGKILL", c[0], len(progs), len(links))
	}
	stale, _ := filepath.Glob(filepath.Join(wl, "etcdscope-wal-*"))
	if len(stale) != 1 {
		t.Fatalf("after SIGKILL of fsync --workload wal: %v in %s, want its one scratch directory", stale, wl)
	}
	out, err := exec.Command(bin, "fsync", "--workload", "wal", "--dir", wl, "--duration", "1s", "--interval", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("next run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "removed "+stale[0]+", left by a workload run that was killed") {
		t.Errorf("the next run did not say it removed %s:\n%s", stale[0], out)
	}
	if left, _ := filepath.Glob(filepath.Join(wl, "*")); len(left) != 0 {
		t.Errorf("left in %s after the next run: %v", wl, left)
	}
}

func TestBadInput(t *testing.T) {
	bin := etcdscope(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fsync", "--pid", "999999999"}, "no such process"},
		{[]string{"fsync", "--pid", "-3"}, "not a process id"},
		{[]string{"fsync", "--dev", "nosuchdisk0"}, "lsblk"},
		{[]string{"fsync", "--cgroup", "/nonexistent/cg"}, "cgroup v2"},
		{[]string{"fsync", "--cgroup", "/tmp"}, "cgroup v2"},
		{[]string{"fsync", "--duration", "-1s"}, "negative"},
		{[]string{"fsync", "--duration", "soon"}, "invalid argument"},
		{[]string{"fsync", "--interval", "-1s"}, "negative"},
		{[]string{"fsync", "--output", "xml"}, "table or json"},
		{[]string{"fsync", "--workload", "bbolt"}, "wal"},
		{[]string{"fsync", "--comm", "a-very-long-command-name"}, "15-byte"},
		{[]string{"fsync", "--min-latency", "-5ms"}, "negative"},
		{[]string{"fsync", "--dir", "/tmp"}, "--workload wal"},
		{[]string{"fsync", "extra"}, "unexpected argument"},
		{[]string{"fsync", "--ready-file", "/nonexistent/dir/ready"}, "does not exist"},
		{[]string{"fsync", "--workload", "wal", "--dir", "/proc"}, "not writable"},
		{[]string{"fsync", "--qemu", "999999999"}, "--qemu 999999999: no such process"},
		{[]string{"fsync", "--min-latency", "5ms"}, "--output json"},
		{[]string{"fsync", "--ring-size", "3000000"}, "power of two from 4096"},
		{[]string{"fsync", "--ring-size", "8589934592"}, "to 1073741824 (1 GiB)"},
		{[]string{"serve", "--ring-size", "1024"}, "power of two from 4096"},
		{[]string{"hypervisor", "--comm", "qemu-system-x86", "--ring-size", "5"}, "power of two from 4096"},
		{[]string{"peers", "--ring-size", "5"}, "power of two from 4096"},
		{[]string{"nosuchcommand"}, "unknown command"},
	} {
		cmd := exec.Command(bin, tc.args...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want 2; output %s", tc.args, err, out)
			continue
		}
		msg := strings.TrimSpace(string(out))
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: want one line containing %q, got:\n%s", tc.args, tc.want, msg)
		}
	}
}

// TestNoPrivilege: an unprivileged user gets exit 2 and the fix (sudo),
// with no word of RLIMIT_MEMLOCK.
func TestNoPrivilege(t *testing.T) {
	testenv.RequireRoot(t)
	bin := etcdscope(t)
	// The binary must be reachable by user nobody.
	dir, err := os.MkdirTemp("", "etcdscope-nopriv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	b, _ := os.ReadFile(bin)
	nb := filepath.Join(dir, "etcdscope")
	if err := os.WriteFile(nb, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", nb, "fsync", "--duration", "1s")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "sudo") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("unprivileged run: err %v, output:\n%s", err, out)
	}
	// The misleading hint: the capabilities are missing, not
	// locked memory (cilium/ebpf appends a MEMLOCK hint to any EPERM).
	if strings.Contains(string(out), "MEMLOCK") || strings.Contains(string(out), "memlock") {
		t.Errorf("unprivileged run blames the memlock limit:\n%s", out)
	}
}

// logUnmatched pairs ftrace's flush completions with the traced ones in
// time order (nearest within 50 µs) and logs those left over on either
// side, to show what one side saw and the other did not.
func logUnmatched(t *testing.T, times []uint64, lines []string, recs []analysis.FsyncRecord) {
	var ours []uint64
	for _, r := range recs {
		for _, q := range r.Requests {
			if q.Role == analysis.RoleFlush {
				ours = append(ours, q.CompleteNs)
			}
		}
	}
	sort.Slice(ours, func(i, j int) bool { return ours[i] < ours[j] })
	used := make([]bool, len(ours))
	for i, us := range times {
		ns := us * 1000
		best, bestD := -1, uint64(50000)
		j := sort.Search(len(ours), func(k int) bool { return ours[k]+50000 >= ns })
		for ; j < len(ours) && ours[j] <= ns+50000; j++ {
			d := ours[j] - ns
			if ns > ours[j] {
				d = ns - ours[j]
			}
			if !used[j] && d < bestD {
				best, bestD = j, d
			}
		}
		if best >= 0 {
			used[best] = true
			continue
		}
		for _, r := range recs {
			if ns+999 >= r.StartNs && ns <= r.EndNs {
				b, _ := json.Marshal(r)
				t.Logf("only ftrace saw: %s\n  inside %s", lines[i], b)
			}
		}
		k := sort.Search(len(recs), func(k int) bool { return recs[k].EndNs >= ns })
		if k < len(recs) {
			t.Logf("only ftrace saw %s: next window starts %d ns after it, ends %d ns after it",
				lines[i], int64(recs[k].StartNs)-int64(ns), int64(recs[k].EndNs)-int64(ns))
		}
	}
	for j, u := range used {
		if !u {
			t.Logf("only etcdscope saw a flush completing at %d ns", ours[j])
		}
	}
}
