package merge

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// qemuRequest is one virtio-blk flush request as QEMU's own trace events
// showed it (e2e/qemutrace_test.go), host CLOCK_MONOTONIC ns: popped,
// completed, and the host jobs it ran in between (here the io_uring
// fsync).
type qemuRequest struct {
	PopNs  int64      `json:"pop_ns"`
	DoneNs int64      `json:"done_ns"`
	Jobs   [][2]int64 `json:"jobs"`
}

func gunzipFile(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// uringUnderLoad reads TestMergeIOUringUnderLoad's recordings.
func uringUnderLoad(t *testing.T) ([]analysis.FsyncRecord, HostRecording) {
	guest, _, err := analysis.ReadJSONL(gunzipFile(t, "testdata/uring-load.guest.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := ReadHost(gunzipFile(t, "testdata/uring-load.host.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return guest, host
}

// uringFlushes indexes TestMergeIOUringUnderLoad's recordings as the merge
// does: vde's guest flushes and the host's io_uring fsyncs on /dev/loop3.
func uringFlushes(t *testing.T, guest []analysis.FsyncRecord, host HostRecording) ([]gflush, []hflush) {
	t.Helper()
	g := NewGuestIndex(Options{GuestDev: "vde"})
	for i := range guest {
		if err := g.Add(&guest[i], jsonl.Span{Off: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	gs, _, _ := g.pairs()
	return gs, hostFlushes(IndexHost(host), "/dev/loop3")
}

// TestFitLeavesOutWrongPairs: tracking TestMergeIOUringUnderLoad's run
// (8a12501's: the last 8 pairs' intersection, a host flush at its middle)
// paired 674 guest flushes, 8 of them with a neighbour's host flush
// (0.54-0.75 ms outside the window at QEMU's clock): guest flushes 48, 50,
// ..., 58, 62 and 66 each took the next guest flush's, which then had
// none. Tracking now pairs every flush right (TestTrackKeepsClockInLongWindows),
// so those 8 are put back here on its pairs (903 in all). The fit must
// leave out exactly those and fit the rest with one line. Leaving out the
// pair the line missed first among equals (c05535e), it left out 30 right
// pairs and 2 wrong ones of the 674 tracked (±765 µs, −19.7 ppm against
// QEMU's −8.07); of these 903, the 8 wrong ones and 2 right ones.
func TestFitLeavesOutWrongPairs(t *testing.T) {
	guest, host := uringUnderLoad(t)
	gs, hs := uringFlushes(t, guest, host)
	if _, ok := coarseOffset(gs, hs); !ok {
		t.Fatal("no offset")
	}
	for _, i := range []int{48, 50, 52, 54, 56, 58, 62, 66} {
		if len(gs[i+1].host) != 1 {
			t.Fatalf("guest flush %d not tracked: the wrong pairs cannot be rebuilt", i+1)
		}
		j := gs[i+1].host[0]
		gs[i].host, gs[i+1].host = []int{j}, nil
		gs[i].lo, gs[i].hi = int64(hs[j].EndNs)-int64(gs[i].complete), int64(hs[j].StartNs)-int64(gs[i].issue)
	}
	tracked := 0
	for _, f := range gs {
		if len(f.host) > 0 {
			tracked++
		}
	}
	c, ok := fit(gs)
	t.Logf("%d pairs, 8 wrong: fit %d, drift %.2f ±%.2f ppm, error ±%.1f µs, consistent %v", tracked, c.Pairs, c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Consistent)
	if !ok || !c.Consistent || c.ErrorNs > 100e3 || tracked-c.Pairs != 8 || math.Abs(c.DriftPPM+8.07) > 1 {
		t.Errorf("fit %d of %d pairs, drift %.2f ppm, error ±%.1f µs, consistent %v: want all but the 8 wrong ones fitted by one line, ±100 µs, within 1 ppm of QEMU's −8.07",
			c.Pairs, tracked, c.DriftPPM, float64(c.ErrorNs)/1e3, c.Consistent)
	}
}

// widenWindows derives a guest recording with longer flush windows from
// a real one: each issued flush request's window grows into the idle guest
// time around it by frac of the gap to the flush before and of the gap to
// the flush after (frac < 0.5: windows never overlap, and each still holds
// its host flush at the true clock, so the truth is unchanged). Every
// other field is the recording's.
func widenWindows(guest []analysis.FsyncRecord, frac float64) []analysis.FsyncRecord {
	type at struct{ call, req int }
	var fl []at
	out := make([]analysis.FsyncRecord, len(guest))
	for i := range guest {
		out[i] = guest[i]
		out[i].Requests = slices.Clone(guest[i].Requests)
		for k, q := range guest[i].Requests {
			if q.Role == analysis.RoleFlush && !q.NotIssued && q.IssueNs != 0 {
				fl = append(fl, at{i, k})
			}
		}
	}
	req := func(a at) analysis.Request { return guest[a.call].Requests[a.req] }
	sort.Slice(fl, func(a, b int) bool { return req(fl[a]).IssueNs < req(fl[b]).IssueNs })
	for n, a := range fl {
		q, w := req(a), &out[a.call].Requests[a.req]
		if n > 0 {
			w.IssueNs -= uint64(frac * float64(q.IssueNs-req(fl[n-1]).CompleteNs))
		}
		if n+1 < len(fl) {
			w.CompleteNs += uint64(frac * float64(req(fl[n+1]).IssueNs-q.CompleteNs))
		}
	}
	return out
}

// TestTrackKeepsClockInLongWindows reproduces e2e run 8's vdd (2026-12-07,
// aio=native on a loop device beside 4 CPU hogs: 39.3% matched, ±1579 µs,
// −514 ppm, while the run's other drives fitted −7.2 to −7.9 ppm), whose
// recordings are lost, on TestMergeIOUringUnderLoad's real run with its
// guest flush windows lengthened by widenWindows: the recording's windows
// (p50 8.4 ms, p90 47 ms; host flushes p50 3.0 ms) cover 38% of the time
// between the first flush and the last; lengthened by 0.2 of each gap,
// p50 19 ms and 63%; by 0.45, p50 30 ms and 94%, the gap left between
// windows p50 0.9 ms. That is the condition, not run 8's numbers: a
// loaded host's long flushes and TCG's delays make long windows, in which a
// neighbour's host flush fits at a slightly wrong offset.
//
// With 8a12501's tracking (the last 8 pairs' intersection; only a host
// flush inside the window at its middle), tracking from the chosen
// proposal paired 674, 605 and 632 of 911 guest flushes (8 wrong on the
// recording), and the merge matched 455, 328 and 296 of 455 guest fsyncs:
// the lengthened ones fitted −92 ppm ±1165 µs and −182 ppm ±1872 µs,
// inconsistent, as run 8 (0.49 of each gap: 47.9%, −784 ppm). Tracking must
// pair every guest flush, and the merge match every fsync on one line
// within 1 ppm of QEMU's −8.07 ppm, each pair's host flush in a QEMU flush
// request of its own, inside its guest window at the clock.
func TestTrackKeepsClockInLongWindows(t *testing.T) {
	guest0, host := uringUnderLoad(t)
	qs := uringQEMU(t)
	for _, frac := range []float64{0, 0.2, 0.45} {
		t.Run(fmt.Sprintf("gaps×%.2f", frac), func(t *testing.T) {
			guest := widenWindows(guest0, frac)
			gs, hs := uringFlushes(t, guest, host)
			if _, ok := coarseOffset(gs, hs); !ok {
				t.Fatal("no offset")
			}
			tracked := 0
			for _, f := range gs {
				if len(f.host) > 0 {
					tracked++
				}
			}
			res, err := Merge(guest, host, Options{GuestDev: "vde", Image: "/dev/loop3"})
			if err != nil {
				t.Fatal(err)
			}
			c := res.Clock
			t.Logf("tracked %d of %d guest flushes; merge: matched %d of %d guest fsyncs, drift %.2f ±%.2f ppm, error ±%.1f µs, consistent %v, %d pairs",
				tracked, len(gs), res.Matched, res.GuestFsyncs, c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Consistent, c.Pairs)
			if tracked != len(gs) {
				t.Errorf("tracking paired %d of %d guest flushes: want every one (QEMU ran a host flush for each)", tracked, len(gs))
			}
			if res.Matched != res.GuestFsyncs || !c.Consistent || math.Abs(c.DriftPPM+8.07) > 1 {
				t.Errorf("matched %d of %d guest fsyncs, drift %.2f ppm, consistent %v: want all, on one line within 1 ppm of QEMU's −8.07",
					res.Matched, res.GuestFsyncs, c.DriftPPM, c.Consistent)
			}
			if wrong, outside := checkQEMU(t, res, qs); wrong > 0 || outside > 0 {
				t.Errorf("%d pairs not one host flush in a QEMU request of its own; %d QEMU requests outside their guest window beyond the clock's error", wrong, outside)
			}
		})
	}
}

// uringQEMU reads QEMU's flush requests on vde's virtqueue in
// TestMergeIOUringUnderLoad's run, by pop.
func uringQEMU(t *testing.T) []qemuRequest {
	var qs []qemuRequest
	dec := json.NewDecoder(gunzipFile(t, "testdata/uring-load.qemu.jsonl.gz"))
	for dec.More() {
		var q qemuRequest
		if err := dec.Decode(&q); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].PopNs < qs[j].PopNs })
	return qs
}

// checkQEMU holds a merge of TestMergeIOUringUnderLoad's run against QEMU's
// trace: each pair's host flush in the job of one QEMU request, no request
// claimed twice (wrong counts those that are not), and that request (pop to
// completion) inside the guest window under the clock, within its error +
// ε (outside counts those that are not).
func checkQEMU(t *testing.T, res Result, qs []qemuRequest) (wrong, outside int) {
	t.Helper()
	const eps = 2000 // ε: QEMU's µs stamps
	c := res.Clock
	claimed := map[int]bool{}
	for _, f := range res.Fsyncs {
		for _, p := range f.Pairs {
			if len(p.Host) != 1 {
				wrong++
				t.Logf("guest flush at %d holds %d host flushes (raw io_uring: one per QEMU request)", p.GuestIssueNs, len(p.Host))
				continue
			}
			h := p.Host[0]
			k := -1
			for i := sort.Search(len(qs), func(i int) bool { return qs[i].PopNs > int64(h.StartNs)+eps }) - 1; i >= 0 && k < 0; i-- {
				for _, j := range qs[i].Jobs {
					if j[0]-eps <= int64(h.StartNs) && int64(h.EndNs) <= j[1]+eps {
						k = i
					}
				}
			}
			if k < 0 || claimed[k] {
				wrong++
				t.Logf("host flush [%d, %d] paired with the guest flush at %d: in QEMU request %d, claimed before %v", h.StartNs, h.EndNs, p.GuestIssueNs, k, claimed[k])
				continue
			}
			claimed[k] = true
			off, e := c.Offset(p.GuestIssueNs), c.ErrorAt(p.GuestIssueNs)+eps
			if qs[k].PopNs-off < int64(p.GuestIssueNs)-e || qs[k].DoneNs-off > int64(p.GuestCompleteNs)+e {
				outside++
			}
		}
	}
	return wrong, outside
}

// TestMergeIOUringUnderLoad replays a real failing input: the io_uring
// drive (vde: a loop device, cache=none, aio=io_uring) of an e2e
// TestHypervisorMerge run beside CPU hogs (load 11-12, 2026-12-06), kept
// with ETCDSCOPE_HV_KEEP: the guest recording, the host's io_uring fsync
// requests on /dev/loop3, and QEMU's flush requests on vde's virtqueue (the
// oracle: each host flush belongs to exactly one QEMU request of one guest
// flush). Tracking paired 674 of 911 guest flushes with some wrong pairs:
// no line fitted them (±765 µs, drift −19.7 ppm; QEMU's clock over the run
// −8.07 ppm). Rematched under that error, each guest flush took every host
// flush inside its widened window in order, and so the next flush's (a
// journal commit's two flushes lie close together): 57 guest flushes held
// two host flushes, 57 none, 398 of 455 fsyncs matched (87.5%) and the
// clock stayed at ±401 µs. Each host flush must go to the window it fits
// (match), and the fit must leave out the wrong pairs (TestFitLeavesOutWrongPairs):
// either alone mends this run.
func TestMergeIOUringUnderLoad(t *testing.T) {
	guest, host := uringUnderLoad(t)
	qs := uringQEMU(t)
	res, err := Merge(guest, host, Options{GuestDev: "vde", Image: "/dev/loop3"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Clock
	t.Logf("clock: drift %.2f ±%.2f ppm, error ±%.1f µs, consistent %v, %d pairs; matched %d of %d %v; guest flushes %d of %d, host %d of %d",
		c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Consistent, c.Pairs, res.Matched, res.GuestFsyncs, res.Unmatched,
		res.GuestFlushesMatched, res.GuestFlushes, res.HostFlushesMatched, res.HostFlushes)
	// QEMU ran a host flush for each of the 911 guest flushes: all match.
	if res.Matched != res.GuestFsyncs || res.GuestFlushesMatched != res.GuestFlushes {
		t.Errorf("matched %d of %d guest fsyncs, %d of %d guest flushes: %v; want all", res.Matched, res.GuestFsyncs,
			res.GuestFlushesMatched, res.GuestFlushes, res.Unmatched)
	}
	if !c.Consistent || c.ErrorNs > 100e3 {
		t.Errorf("clock error ±%.1f µs, consistent %v: want one line through every pair, within ±100 µs (the other drives: ±48-77 µs)",
			float64(c.ErrorNs)/1e3, c.Consistent)
	}
	if wrong, outside := checkQEMU(t, res, qs); wrong > 0 || outside > 0 {
		t.Errorf("%d pairs not one host flush in a QEMU request of its own; %d QEMU requests outside their guest window beyond the clock's error", wrong, outside)
	}
}
