package merge

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
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

// TestFitLeavesOutWrongPairs: tracking TestMergeIOUringUnderLoad's run
// pairs 674 guest flushes, 8 of them with a neighbour's host flush
// (0.54-0.75 ms outside the window at QEMU's clock). The fit must leave
// out those and fit the rest with one line; leaving out the pair the line
// missed first among equals, it left out 30 right pairs and 2 wrong ones
// (±765 µs, −19.7 ppm against QEMU's −8.07).
func TestFitLeavesOutWrongPairs(t *testing.T) {
	guest, host := uringUnderLoad(t)
	g := NewGuestIndex(Options{GuestDev: "vde"})
	for i := range guest {
		if err := g.Add(&guest[i], jsonl.Span{Off: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	gs, _, _ := g.pairs()
	hs := hostFlushes(IndexHost(host), "/dev/loop3")
	if _, ok := coarseOffset(gs, hs); !ok {
		t.Fatal("no offset")
	}
	tracked := 0
	for _, f := range gs {
		if len(f.host) > 0 {
			tracked++
		}
	}
	c, ok := fit(gs)
	t.Logf("%d tracked pairs: fit %d, drift %.2f ±%.2f ppm, error ±%.1f µs, consistent %v", tracked, c.Pairs, c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Consistent)
	if !ok || !c.Consistent || c.ErrorNs > 100e3 || tracked-c.Pairs > 8 || math.Abs(c.DriftPPM+8.07) > 1 {
		t.Errorf("fit %d of %d tracked pairs, drift %.2f ppm, error ±%.1f µs, consistent %v: want all but the 8 wrong ones fitted by one line, ±100 µs, within 1 ppm of QEMU's −8.07",
			c.Pairs, tracked, c.DriftPPM, float64(c.ErrorNs)/1e3, c.Consistent)
	}
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
	const image, eps = "/dev/loop3", 2000 // ε: QEMU's µs stamps
	guest, host := uringUnderLoad(t)
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

	res, err := Merge(guest, host, Options{GuestDev: "vde", Image: image})
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
	// The oracle: each pair's host flush in the job of one QEMU request,
	// no request claimed twice, and that request (pop to completion) inside
	// the guest window under the clock, within its error + ε.
	claimed := map[int]bool{}
	wrong, outside := 0, 0
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
	if wrong > 0 || outside > 0 {
		t.Errorf("%d pairs not one host flush in a QEMU request of its own; %d QEMU requests outside their guest window beyond the clock's error", wrong, outside)
	}
}
