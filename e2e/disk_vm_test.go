//go:build vmtest

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// The disk verdict tests (issue 17, part 4) run in the VM rig: Debian's
// 6.1 kernel has null_blk and dm-delay, this build machine's kernel has
// neither. Each runs fio's etcd job (2300-byte appends, each followed by
// fdatasync, into a fallocated file: etcd's own disk check) for a few
// seconds under etcdscope, and checks etcdscope against three oracles:
// fio's own count and mean of its fdatasyncs (sync.lat_ns), the device
// flush and block queue time of each call recomputed from the kernel's
// block tracepoints in an ftrace instance of its own (trace clock mono,
// read in ns by trace-cmd), and, for the competing writer, fio's JSON.

// floorFlushDelay is the hold dm-delay puts on every flush under the
// loop device of TestDiskVerdictFloor: the fixed price of one flush.
const floorFlushDelay = 20 * time.Millisecond

// TestDiskVerdictFloor: a disk whose flush costs a fixed 20 ms and whose
// writes are nearly free (a consumer drive without power-loss protection,
// whose cache takes writes at once and empties on a flush). The WAL's
// filesystem is ext4 on loop device A; A's backing file is on a second
// ext4 on a dm-delay device that holds flushes 20 ms, over loop device B
// on the guest's tmpfs. A write to A lands in the backing file's page
// cache; a flush of A is an fsync of the backing file, which ends in a
// flush through dm-delay. (ext4 directly on the dm-delay device would not
// do: the target's hold is etcdscope's dm layer, not a device flush.) The
// calls' time must be mostly A's device flushes, almost none queued, and
// the verdict floor.
func TestDiskVerdictFloor(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.LookPath(t, "dmsetup", "dmsetup")
	testenv.LookPath(t, "mke2fs", "e2fsprogs")
	testenv.LookPath(t, "losetup", "util-linux")
	testenv.LookPath(t, "trace-cmd", "trace-cmd")
	testenv.LookPath(t, "fio", "fio")
	buildOnce.Do(func() { binPath = filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope") })

	// B: a loop device on tmpfs; dm-delay over it, flushes held 20 ms.
	dmPath, loopB := dmDelayOnLoop(t, "esfloor", 96<<20, floorFlushDelay)
	host := mountExt4(t, dmPath)

	// A: a loop device over a file on that ext4; the WAL's ext4 on A.
	imgA := filepath.Join(host, "a.img")
	if err := os.WriteFile(imgA, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Truncate(imgA, 64<<20)
	loopA := run(t, "losetup", "-f")
	run(t, "losetup", loopA, imgA)
	t.Cleanup(func() { exec.Command("losetup", "-d", loopA).Run() })
	mnt := mountExt4(t, loopA)
	devA, nameA := blockDev(t, loopA)
	t.Logf("%s (%s, write cache %q) over %s on %s over %s", loopA, nameA, writeCache(t, nameA), imgA, dmPath, loopB)

	res := walRun(t, mnt, devA, nil)
	g := res.group
	fl, q := g.layer(analysis.LayerDeviceFlush), g.layer(analysis.LayerBlockQueue)
	t.Logf("etcdscope: %d calls, mean %s ms; device_flush %.1f%% (ftrace's %.1f%%), block_queue %.1f%% (ftrace's %.1f%%); %d flush requests",
		g.Total.Count, render.Ms(int64(g.Total.Mean())), 100*fl.Share, 100*res.oracleFlushShare, 100*q.Share, 100*res.oracleQueueShare, g.Flushes)
	// Each call ends in at least one flush of A, and each of those in at
	// least one held flush beneath: at least the table's delay less a
	// jiffy (dm-delay counts in jiffies; 4 ms at the rig's HZ=250).
	if min := int64(floorFlushDelay) - 5e6; fl.Stats.P50 < min {
		t.Errorf("device_flush p50 %s ms a call, under the %v flush price less a jiffy", render.Ms(fl.Stats.P50), floorFlushDelay)
	}
	// A loop device has a volatile cache (its backing file's page cache)
	// and no FUA: its journal commits are flushes only.
	if want := fmt.Sprintf("disk %s (%d:%d): write cache write back, no FUA", nameA, devA>>20, devA&(1<<20-1)); !strings.Contains(res.table, want) {
		t.Errorf("the table lacks %q:\n%s", want, res.table)
	}
	if res.fuaWrites != 0 || res.flushes == 0 {
		t.Errorf("%d flushes and %d FUA writes on a disk without FUA", res.flushes, res.fuaWrites)
	}
	if g.Disk == nil || g.Disk.Kind != analysis.DiskFloor {
		t.Fatalf("disk verdict %+v (why none: %q), want floor; layers %+v", g.Disk, render.DiskWhyText(g.DiskWhy), g.Layers)
	}
	if !strings.Contains(res.table, ": the host's fsync of the loop's backing file (levels: backing)") {
		t.Errorf("the table lacks the floor verdict:\n%s", res.table)
	}
}

// TestDiskVerdictContention: the same fio etcd job on ext4 on a null_blk
// device (memory-backed, with a volatile cache and FUA; every request
// takes 10 ms, one in the device at a time), while a second fio writes 4
// KiB at random to the same device past the filesystem's end, O_DIRECT, 8
// in flight. (Faster requests or a deeper queue make the emulated CPU, not
// the device, the bottleneck: at 1 ms, 2 at a time and 16 in flight the
// competing fio managed 179 IOPS and its writes waited in fio, not in the
// block queue; at 5 ms on a loaded host (load 7 on 2 cores) it managed 44
// IOPS and the calls' block queue share fell to 24%, the rest waiting for
// the CPU.) The WAL's requests queue behind them: the calls'
// time must be mostly block queue and the verdict contention. fio's JSON
// for the competing writer shows the queue (its completion latency is
// about its depth over the device's times the 1 ms).
func TestDiskVerdictContention(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.LookPath(t, "mke2fs", "e2fsprogs")
	testenv.LookPath(t, "trace-cmd", "trace-cmd")
	fio := testenv.LookPath(t, "fio", "fio")
	buildOnce.Do(func() { binPath = filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope") })

	const (
		fsMiB     = 128
		depth     = 1
		noiseQD   = 8
		serviceNs = 10_000_000
	)
	dev := nullBlk(t, map[string]string{"size": "192", "blocksize": "4096", "memory_backed": "1", "cache_size": "32",
		"irqmode": "2", "completion_nsec": strconv.Itoa(serviceNs), "hw_queue_depth": strconv.Itoa(depth)})
	kdev, kname := blockDev(t, dev)
	// mq-deadline, with room for the competing writer's requests in the
	// scheduler: what waits there is block_rq_insert → block_rq_issue.
	writeSys(t, kname, "queue/scheduler", "mq-deadline")
	writeSys(t, kname, "queue/nr_requests", "64")
	t.Logf("%s: write cache %q, fua %s, scheduler %s", kname, writeCache(t, kname), readSys(t, kname, "queue/fua"), readSys(t, kname, "queue/scheduler"))
	mnt := mountExt4(t, dev, fmt.Sprintf("%dM", fsMiB))

	noiseOut := filepath.Join(t.TempDir(), "noise.json")
	noise := exec.Command(fio, "--name=noise", "--filename="+dev, fmt.Sprintf("--offset=%dm", fsMiB), "--size=48m",
		"--rw=randwrite", "--bs=4k", "--direct=1", "--ioengine=libaio", fmt.Sprintf("--iodepth=%d", noiseQD),
		"--time_based", "--runtime=60s", "--output-format=json", "--output="+noiseOut)
	res := walRun(t, mnt, kdev, func() func() {
		if err := noise.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // its queue full before the first WAL write
		return func() {
			noise.Process.Signal(os.Interrupt) // fio stops the job and writes its JSON
			noise.Wait()
		}
	}, fsMiB<<11)
	var nf fioJSON
	b, err := os.ReadFile(noiseOut)
	if err != nil || json.Unmarshal(b[max(0, strings.IndexByte(string(b), '{')):], &nf) != nil || len(nf.Jobs) != 1 {
		t.Fatalf("the competing fio's JSON: %v\n%s", err, b)
	}
	w := nf.Jobs[0].Write
	g := res.group
	fl, q := g.layer(analysis.LayerDeviceFlush), g.layer(analysis.LayerBlockQueue)
	t.Logf("competing fio: %d writes, %.0f IOPS, completion mean %.2f ms", w.TotalIOs, w.IOPS, w.Clat.Mean/1e6)
	t.Logf("etcdscope: %d calls, mean %s ms; device_flush %.1f%% (ftrace's %.1f%%), block_queue %.1f%% (ftrace's %.1f%%), p99 %s ms a call; %d flush requests",
		g.Total.Count, render.Ms(int64(g.Total.Mean())), 100*fl.Share, 100*res.oracleFlushShare, 100*q.Share, 100*res.oracleQueueShare, render.Ms(q.Stats.P99), g.Flushes)
	// The queue the verdict rests on, from the competing writer's side:
	// with 8 in flight and 1 in the device, each of its writes waits
	// for about 7 others' 10 ms; a third of that is a full queue.
	if w.TotalIOs == 0 || w.Clat.Mean < float64(noiseQD/depth-1)*serviceNs/3 {
		t.Errorf("the competing writer's completion mean %.2f ms: its queue was not full", w.Clat.Mean/1e6)
	}
	// null_blk with a cache takes FUA (6.1 has no fua=0 for it): each
	// journal commit is a flush and a FUA write.
	if want := fmt.Sprintf("disk %s (%d:%d): write cache write back, FUA (", kname, kdev>>20, kdev&(1<<20-1)); !strings.Contains(res.table, want) {
		t.Errorf("the table lacks %q:\n%s", want, res.table)
	}
	if res.fuaWrites == 0 || res.flushes == 0 {
		t.Errorf("%d flushes and %d FUA writes on a disk with FUA", res.flushes, res.fuaWrites)
	}
	if g.Disk == nil || g.Disk.Kind != analysis.DiskContention {
		t.Fatalf("disk verdict %+v (why none: %q), want contention; layers %+v", g.Disk, render.DiskWhyText(g.DiskWhy), g.Layers)
	}
	if !strings.Contains(res.table, "disk verdict: contention: block_queue ") {
		t.Errorf("the table lacks the contention verdict:\n%s", res.table)
	}
}

// fioJSON is the part of fio's --output-format=json these tests read.
type fioJSON struct {
	Jobs []struct {
		Sync struct {
			Lat struct {
				N    int64   `json:"N"`
				Mean float64 `json:"mean"`
			} `json:"lat_ns"`
		} `json:"sync"`
		Write struct {
			TotalIOs int64   `json:"total_ios"`
			IOPS     float64 `json:"iops"`
			Clat     struct {
				Mean float64 `json:"mean"`
			} `json:"clat_ns"`
		} `json:"write"`
	} `json:"jobs"`
}

// walResult is what walRun measured.
type walResult struct {
	group diskGroup
	table string // `etcdscope report` of the recording
	// oracleFlushShare and oracleQueueShare are ftrace's device flush and
	// block queue time of the calls over their summed wall time.
	oracleFlushShare, oracleQueueShare float64
	// flushes and fuaWrites are etcdscope's counts over the calls
	// (checked against ftrace's).
	flushes, fuaWrites int
}

// diskGroup is the fio job's group of the summary.
type diskGroup struct{ analysis.Group }

// layer returns the group's layer called name (zero if absent).
func (g diskGroup) layer(name string) analysis.LayerStat {
	for _, l := range g.Layers {
		if l.Name == name {
			return l
		}
	}
	return analysis.LayerStat{}
}

// walRun traces fio's etcd job in dir for 4 s with etcdscope, block
// events on disk kdev with ftrace, and checks etcdscope's calls against
// fio's count and mean and its device_flush and block_queue sums against
// ftrace's. load, if not nil, starts a competing load before the job and
// returns its stop. Requests at or past sector fsEnd (if given) are the
// competing load's, not the calls'.
func walRun(t *testing.T, dir string, kdev uint32, load func() func(), fsEnd ...uint64) walResult {
	t.Helper()
	ft := ftraceInstance(t, "etcdscope-disk", [][2]string{{"buffer_size_kb", "16384"}, {"trace_clock", "mono"},
		{"events/block/block_getrq/filter", fmt.Sprintf("dev == %d", kdev)},
		{"events/block/block_rq_insert/filter", fmt.Sprintf("dev == %d", kdev)},
		{"events/block/block_rq_issue/filter", fmt.Sprintf("dev == %d", kdev)},
		{"events/block/block_rq_complete/filter", fmt.Sprintf("dev == %d", kdev)},
		{"events/block/block_getrq/enable", "1"}, {"events/block/block_rq_insert/enable", "1"},
		{"events/block/block_rq_issue/enable", "1"}, {"events/block/block_rq_complete/enable", "1"}})
	tr := startFsync(t, "--comm", "fio")
	stop := func() {}
	if load != nil {
		stop = load()
	}
	out, err := exec.Command("fio", "--name=etcd", "--directory="+dir, "--rw=write", "--ioengine=sync", "--fdatasync=1",
		"--bs=2300", "--size=16m", "--time_based", "--runtime=4s", "--output-format=json").Output()
	stop()
	if err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	os.WriteFile(filepath.Join(ft, "tracing_on"), []byte("0"), 0o644)
	recs, rep := tr.stop()
	recording := tr.stdout.Bytes()
	checkPartition(t, recs)
	if rep.LostEvents != 0 || rep.MissedEvents != 0 {
		t.Errorf("lost %d events, missed %d probe runs", rep.LostEvents, rep.MissedEvents)
	}

	var fj fioJSON
	if err := json.Unmarshal(out[max(0, strings.IndexByte(string(out), '{')):], &fj); err != nil || len(fj.Jobs) != 1 {
		t.Fatalf("fio JSON: %v\n%s", err, out)
	}
	var calls []analysis.FsyncRecord
	var sum int64
	for _, r := range recs {
		if r.Comm == "fio" && r.Syscall == "fdatasync" && strings.HasPrefix(r.Path, dir) {
			calls = append(calls, r)
			sum += r.TotalNs
		}
	}
	fioSync := fj.Jobs[0].Sync.Lat
	if len(calls) == 0 || int64(len(calls)) != fioSync.N {
		t.Fatalf("etcdscope saw %d fdatasync calls in %s, fio made %d", len(calls), dir, fioSync.N)
	}
	mean := float64(sum) / float64(len(calls))
	t.Logf("fio: %d fdatasyncs, mean %.3f ms; etcdscope: mean %.3f ms", fioSync.N, fioSync.Mean/1e6, mean/1e6)
	// fio times the call from user space: its mean is etcdscope's plus
	// the syscall's entry and exit and fio's wake-up after it, tens of µs
	// under TCG on a quiet host, up to 4.6% (7.1 of 153 ms) seen once at
	// load 7 on 2 cores, when the guest's one vCPU waits for the host.
	// Measured 2026-12-06, 20 VM runs of both tests at host load 4-11:
	// fio above etcdscope by 0.23-1.63% (median 0.32%, worst 0.91 ms of a
	// 55.8 ms mean) in TestDiskVerdictFloor, 0.08-0.33% (worst 0.40 ms) in
	// TestDiskVerdictContention: the worst uses 12% of this bound; the
	// 4.6% seen once, 55%.
	if d := fioSync.Mean - mean; d < -0.02*fioSync.Mean || d > 0.08*fioSync.Mean+1e6 {
		t.Errorf("etcdscope's mean %.3f ms, fio's %.3f ms", mean/1e6, fioSync.Mean/1e6)
	}

	var res walResult
	for _, g := range rep.Groups {
		if g.Key.PID == calls[0].PID {
			res.group = diskGroup{g}
		}
	}
	if res.group.Total.Count != int64(len(calls)) {
		t.Fatalf("the summary's group of pid %d has %d calls, want %d", calls[0].PID, res.group.Total.Count, len(calls))
	}

	// The layer split against ftrace, summed over the calls: BPF's and
	// ftrace's stamps of one tracepoint differ by the time between their
	// two handlers (µs; up to a millisecond when the emulated CPU is taken
	// away between them), so single calls may differ, sums agree closely.
	evs := readBlockTrace(t, ft)
	end := uint64(1 << 62)
	if len(fsEnd) > 0 {
		end = fsEnd[0]
	}
	rqs := ftraceRequests(evs)
	names := map[string]int{}
	for _, e := range evs {
		names[e.name]++
	}
	t.Logf("ftrace: %d requests paired from %v", len(rqs), names)
	t.Logf("  call 0: %d..%d %+v", calls[0].StartNs, calls[0].EndNs, calls[0].Layers)
	for _, q := range calls[0].Requests {
		t.Logf("  request %s %s %s insert %d issue %d complete %d", q.Role, q.Rwbs, q.Dev, q.InsertNs, q.IssueNs, q.CompleteNs)
	}
	if len(rqs) == 0 {
		t.Fatal("ftrace: no request issued and completed")
	}
	var gotFlush, gotQueue, wantFlush, wantQueue int64
	for _, r := range calls {
		f, q := layerOracle(rqs, evs, r.StartNs, r.EndNs, end)
		gotFlush += r.Layers.DeviceFlushNs
		gotQueue += r.Layers.BlockQueueNs
		wantFlush += f
		wantQueue += q
	}
	res.oracleFlushShare, res.oracleQueueShare = float64(wantFlush)/float64(sum), float64(wantQueue)/float64(sum)

	// Flushes and FUA writes, counted apart: ftrace's flushes (FF) that
	// completed inside a call, issued or not (one that joined a flush in
	// flight completes unissued), and its writes with REQ_FUA (an F after
	// the W) issued to the disk, against etcdscope's per-call counts.
	var wantFlushes, wantFUAs int
	for _, r := range calls {
		res.flushes += r.Flushes
		res.fuaWrites += r.FUAWrites
		for _, q := range rqs {
			if q.complete >= r.StartNs && q.complete <= r.EndNs {
				switch {
				case !strings.ContainsAny(q.rwbs, "WRDN"):
					wantFlushes++
				case strings.Contains(q.rwbs, "WF"):
					wantFUAs++
				}
			}
		}
		for _, x := range unissuedFlushes(evs) {
			if x >= r.StartNs && x <= r.EndNs {
				wantFlushes++
			}
		}
	}
	t.Logf("flushes: etcdscope %d, ftrace %d; FUA writes: etcdscope %d, ftrace %d", res.flushes, wantFlushes, res.fuaWrites, wantFUAs)
	if res.flushes != wantFlushes || res.fuaWrites != wantFUAs {
		t.Errorf("etcdscope counted %d flushes and %d FUA writes in the calls, ftrace %d and %d", res.flushes, res.fuaWrites, wantFlushes, wantFUAs)
	}
	for _, c := range []struct {
		layer     string
		got, want int64
	}{{"device_flush", gotFlush, wantFlush}, {"block_queue", gotQueue, wantQueue}} {
		t.Logf("%s over %d calls: etcdscope %s ms, ftrace %s ms", c.layer, len(calls), render.Ms(c.got), render.Ms(c.want))
		if d := c.got - c.want; d < -c.want/50-int64(len(calls))*2e5 || d > c.want/50+int64(len(calls))*2e5 {
			t.Errorf("%s over the calls: etcdscope %s ms, ftrace %s ms: not within 2%% + 0.2 ms a call", c.layer, render.Ms(c.got), render.Ms(c.want))
		}
	}

	// The table, as `etcdscope report` prints it from the recording.
	rf := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(rf, recording, 0o600); err != nil {
		t.Fatal(err)
	}
	res.table = run(t, binPath, "report", rf)
	t.Logf("etcdscope report %s:\n%s", rf, res.table)
	return res
}

// ftRequest is one block request in the ftrace instance: its insertion
// (0: none; a flush the flush state machine issued from kblockd),
// issue and completion, mono ns.
type ftRequest struct {
	insert, issue, complete uint64
	rwbs, sector            string
}

// flush reports whether rwbs shows a flush: REQ_OP_FLUSH, REQ_PREFLUSH or
// REQ_FUA (every F blk_fill_rwbs writes), the rule's flush role.
func (r *ftRequest) flush() bool { return strings.Contains(r.rwbs, "F") }

// ftraceRequests pairs each block_rq_issue with the first later
// completion of the same rwbs and sector, and the latest earlier unused
// insertion of the same.
func ftraceRequests(evs []*blockTraceEvent) []*ftRequest {
	inserted := map[string][]uint64{}
	issued := map[string][]*ftRequest{}
	var out []*ftRequest
	for _, e := range evs {
		k := e.rwbs + " " + e.sector
		if !strings.ContainsAny(e.rwbs, "WRDN") {
			// A flush has no sector: its issue prints 0, its
			// completion -1.
			k = e.rwbs
		}
		switch e.name {
		case "block_rq_insert":
			inserted[k] = append(inserted[k], e.ns)
		case "block_rq_issue":
			r := &ftRequest{issue: e.ns, rwbs: e.rwbs, sector: e.sector}
			if in := inserted[k]; len(in) > 0 {
				r.insert, inserted[k] = in[len(in)-1], in[:len(in)-1]
			}
			issued[k] = append(issued[k], r)
		case "block_rq_complete":
			if is := issued[k]; len(is) > 0 {
				is[0].complete, issued[k] = e.ns, is[1:]
				out = append(out, is[0])
			}
		}
	}
	return out
}

// unissuedFlushes returns when each flush (FF) completed that was never
// issued (the flush state machine completed it on a flush in flight).
func unissuedFlushes(evs []*blockTraceEvent) []uint64 {
	pending := 0
	var out []uint64
	for _, e := range evs {
		if strings.ContainsAny(e.rwbs, "WRDN") {
			continue
		}
		switch e.name {
		case "block_rq_issue":
			pending++
		case "block_rq_complete":
			if pending > 0 {
				pending--
			} else {
				out = append(out, e.ns)
			}
		}
	}
	return out
}

// layerOracle recomputes the device_flush and block_queue time of a call
// [s, e] from ftrace's requests by the rule of the analysis package: the
// requests that count completed inside [s, e] (here: every request below
// sector end, and every flush); device_flush is the union of their flush
// requests' issue → complete, block_queue the union of every one's
// insert → issue less that (a flush without insertion queues from the
// latest flush bio that got its request, block_getrq, inside [s, issue]
// that no other request claimed), both inside [s, e].
func layerOracle(rqs []*ftRequest, evs []*blockTraceEvent, s, e, end uint64) (flushNs, queueNs int64) {
	var flush, queue [][2]uint64
	claimed := map[uint64]bool{}
	for _, r := range rqs {
		if r.complete < s || r.complete > e {
			continue
		}
		if sec, err := strconv.ParseUint(r.sector, 10, 64); !r.flush() && (err != nil || sec >= end) {
			continue
		}
		if r.flush() {
			flush = append(flush, [2]uint64{r.issue, r.complete})
		}
		from := r.insert
		if from == 0 && r.flush() {
			for i := len(evs) - 1; i >= 0; i-- {
				x := evs[i]
				if x.name == "block_getrq" && strings.Contains(x.rwbs, "F") && x.ns >= s && x.ns <= r.issue && !claimed[x.ns] {
					from, claimed[x.ns] = x.ns, true
					break
				}
			}
		}
		if from != 0 {
			queue = append(queue, [2]uint64{from, r.issue})
		}
	}
	f := covered(flush, s, e)
	return f, covered(append(queue, flush...), s, e) - f
}

// covered is the length of the union of intervals inside [s, e], ns.
func covered(iv [][2]uint64, s, e uint64) int64 {
	var cl [][2]uint64
	for _, x := range iv {
		a, b := max(x[0], s), min(x[1], e)
		if a < b {
			cl = append(cl, [2]uint64{a, b})
		}
	}
	slices.SortFunc(cl, func(a, b [2]uint64) int { return int(int64(a[0] - b[0])) })
	var n int64
	var curA, curB uint64
	for i, x := range cl {
		if i == 0 || x[0] > curB {
			n += int64(curB - curA)
			curA, curB = x[0], x[1]
		} else if x[1] > curB {
			curB = x[1]
		}
	}
	return n + int64(curB-curA)
}

// mountExt4 makes ext4 on dev (of size, e.g. "128M", if given: the rest of
// the device stays free) and mounts it on a temp dir until cleanup.
func mountExt4(t *testing.T, dev string, size ...string) string {
	t.Helper()
	mkExt4(t, dev, size...)
	mnt := t.TempDir()
	run(t, "mount", "-t", "ext4", dev, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

// nullBlk makes a null_blk device through configfs with the given
// attributes (docs: Documentation/block/null_blk.rst), powers it on, and
// returns its node (/dev/nullbN); powered off and removed at cleanup.
func nullBlk(t *testing.T, attrs map[string]string) string {
	t.Helper()
	root := "/sys/kernel/config"
	if _, err := os.Stat(root + "/nullb"); err != nil {
		run(t, "mount", "-t", "configfs", "configfs", root)
		t.Cleanup(func() { exec.Command("umount", root).Run() })
	}
	d := filepath.Join(root, "nullb", fmt.Sprintf("es%d", os.Getpid()))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatalf("null_blk (the rig loads it: VMTEST_MODULES null_blk): %v", err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(d, "power"), []byte("0"), 0o644)
		os.Remove(d)
	})
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range append(keys, "power") {
		v := attrs[k]
		if k == "power" {
			v = "1"
		}
		if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o644); err != nil {
			t.Fatalf("null_blk %s=%s: %v", k, v, err)
		}
	}
	// Linux 6.1 names a configfs device after its directory, 5.10
	// nullb<index> (the directory's index attribute) as it does the
	// module's own devices: whichever node appears.
	devs := []string{"/dev/" + filepath.Base(d)}
	if idx, err := os.ReadFile(filepath.Join(d, "index")); err == nil {
		devs = append(devs, "/dev/nullb"+strings.TrimSpace(string(idx)))
	}
	for i := 0; i < 100; i++ { // devtmpfs makes the node on its own time
		for _, dev := range devs {
			if _, err := os.Stat(dev); err == nil {
				return dev
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ls, _ := os.ReadDir("/sys/block")
	var have []string
	for _, e := range ls {
		have = append(have, e.Name())
	}
	t.Fatalf("none of %v appeared (/sys/block: %v)", devs, have)
	return ""
}

// writeCache is a disk's /sys/block/NAME/queue/write_cache ("write back":
// a volatile cache the kernel flushes; "write through": none).
func writeCache(t *testing.T, name string) string { return readSys(t, name, "queue/write_cache") }

func readSys(t *testing.T, name, attr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeSys(t *testing.T, name, attr, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/sys/block", name, attr), []byte(v), 0o644); err != nil {
		t.Fatalf("%s/%s = %s: %v", name, attr, v, err)
	}
}
