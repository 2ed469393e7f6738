package merge

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
)

// synth builds a guest recording and a host recording of the same run:
// each guest fsync writes data, then issues two flushes (a journaling
// filesystem's preflush and post-flush); each guest flush reaches the host
// as an fdatasync of the image starting d1 after the issue and ending d2
// before the completion (host clock = guest clock + offset + drift). Every
// skipEvery-th fsync's second flush has no host fdatasync (QEMU skipped
// it), and the host also flushes on its own between fsyncs.
type synth struct {
	n          int
	offsetNs   int64   // host − guest at guest time 0
	driftPPM   float64 // host ns gained per million guest ns
	skipEvery  int
	extraEvery int
	jitter     bool // random d1, d2, host durations and gaps
	periodic   bool // constant gaps between fsyncs
}

func (s synth) hostAt(g uint64) uint64 {
	return uint64(int64(g) + s.offsetNs + int64(s.driftPPM*1e-6*float64(g)))
}

func (s synth) build(t *testing.T) (guest []analysis.FsyncRecord, host HostRecording, skipped int) {
	rng := rand.New(rand.NewSource(1))
	r := func(lo, hi int64) uint64 {
		if !s.jitter {
			return uint64((lo + hi) / 2)
		}
		return uint64(lo + rng.Int63n(hi-lo))
	}
	host.Header = HostHeader{Type: "hypervisor", V: 1, Clock: "CLOCK_MONOTONIC"}
	hostFlush := func(start, end uint64) {
		d := int64(end - start)
		host.Fsyncs = append(host.Fsyncs, analysis.FsyncRecord{Type: "fsync", Version: 1, Syscall: "fdatasync", Path: "/images/vm.img",
			StartNs: start, EndNs: end, TotalNs: d, TID: 7, Flushes: 1,
			Layers: analysis.Layers{JournalNs: d * 4 / 10, DeviceFlushNs: d / 2, OtherNs: d - d*4/10 - d/2}})
	}
	// The host flushes before the guest recording starts (boot, mount).
	g := uint64(5e9)
	for i := 0; i < 20; i++ {
		hostFlush(s.hostAt(g-uint64(i+1)*3e6), s.hostAt(g-uint64(i+1)*3e6)+1e6)
	}
	for i := 0; i < s.n; i++ {
		start := g
		rec := analysis.FsyncRecord{Type: "fsync", Version: 1, Syscall: "fdatasync", Comm: "fio", PID: 42, TID: 42,
			DevName: "vda", FS: "ext4", Path: "/mnt/etcd/f", StartNs: start}
		t0 := start + r(20e3, 60e3)
		data := r(100e3, 300e3)
		rec.Requests = append(rec.Requests, analysis.Request{Role: analysis.RoleData, IssueNs: t0, CompleteNs: t0 + data})
		cur := t0 + data
		var flushNs, journalNs int64
		for k := 0; k < 2; k++ {
			issue := cur + r(10e3, 40e3)
			hs := s.hostAt(issue) + r(50e3, 400e3)
			he := hs + r(300e3, 3e6)
			complete := issue + (he - s.hostAt(issue)) + r(50e3, 400e3)
			// The guest saw complete; in the host clock it is after he.
			rec.Requests = append(rec.Requests, analysis.Request{Role: analysis.RoleFlush, Op: "FLUSH", IssueNs: issue, CompleteNs: complete})
			if k == 1 && s.skipEvery > 0 && i%s.skipEvery == 0 {
				skipped++
			} else {
				hostFlush(hs, he)
			}
			flushNs += int64(complete - issue)
			if k == 0 {
				j := r(100e3, 200e3)
				rec.Requests = append(rec.Requests, analysis.Request{Role: analysis.RoleJournal, IssueNs: complete, CompleteNs: complete + j})
				journalNs += int64(j)
				cur = complete + j
			} else {
				cur = complete
			}
		}
		rec.EndNs = cur + r(10e3, 50e3)
		rec.TotalNs = int64(rec.EndNs - rec.StartNs)
		rec.Layers = analysis.Layers{DataWritebackNs: int64(data), JournalNs: journalNs, DeviceFlushNs: flushNs}
		rec.Layers.OtherNs = rec.TotalNs - rec.Layers.DataWritebackNs - rec.Layers.JournalNs - rec.Layers.DeviceFlushNs
		rec.Flushes = 2
		guest = append(guest, rec)
		gap := uint64(2e6)
		if !s.periodic {
			gap = r(500e3, 5e6)
		}
		g = rec.EndNs + gap
		if s.extraEvery > 0 && i%s.extraEvery == 3 {
			// A flush of the guest's own outside any traced fsync.
			hostFlush(s.hostAt(rec.EndNs+gap/3), s.hostAt(rec.EndNs+gap/3)+200e3)
		}
	}
	return guest, host, skipped
}

func TestMergeRecoversOffsetAndSplits(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    synth
	}{
		{"jitter, drift, skips, extras", synth{n: 400, offsetNs: 123_456_789_012, driftPPM: 80, skipEvery: 20, extraEvery: 7, jitter: true}},
		{"negative offset, no drift", synth{n: 200, offsetNs: -3_000_000_000, skipEvery: 0, jitter: true}},
		{"periodic workload", synth{n: 300, offsetNs: 42e9, driftPPM: -30, skipEvery: 25, jitter: false, periodic: true}},
		{"large drift (bad TSC calibration)", synth{n: 300, offsetNs: 7e9, driftPPM: 900, skipEvery: 10, extraEvery: 5, jitter: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guest, host, skipped := tc.s.build(t)
			res, err := Merge(guest, host, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := res.Clock
			t.Logf("clock: offset %d drift %.2f ppm error ±%d ns consistent=%v pairs %d; matched %d/%d %v",
				c.OffsetNs, c.DriftPPM, c.ErrorNs, c.Consistent, c.Pairs, res.Matched, res.GuestFsyncs, res.Unmatched)
			// The offset at every guest flush, against the truth; the
			// smallest d1+d2 is 100 µs, so a fit inside every pair's
			// interval is off by less.
			var worst float64
			for _, f := range guest {
				for _, q := range f.Requests {
					if q.Role != analysis.RoleFlush {
						continue
					}
					truth := int64(tc.s.hostAt(q.IssueNs)) - int64(q.IssueNs)
					worst = math.Max(worst, math.Abs(float64(c.Offset(q.IssueNs)-truth)))
				}
			}
			t.Logf("worst offset error %.1f µs", worst/1e3)
			if worst > 100e3 {
				t.Errorf("offset off by up to %.1f µs (> 100 µs)", worst/1e3)
			}
			// Drift is known only as well as the offset over the run:
			// 100 µs over the span.
			span := float64(guest[len(guest)-1].EndNs - guest[0].StartNs)
			if tolPPM := 100e3 / span * 1e6; math.Abs(c.DriftPPM-tc.s.driftPPM) > tolPPM {
				t.Errorf("drift %.2f ppm, want %.2f ± %.1f (100 µs over the %.1f s run)", c.DriftPPM, tc.s.driftPPM, tolPPM, span/1e9)
			}
			if res.GuestFsyncs != tc.s.n || res.Matched != tc.s.n-skipped || res.Unmatched[ReasonNoHostFlush] != skipped {
				t.Errorf("matched %d of %d, unmatched %v; want %d matched, %d no_host_flush", res.Matched, res.GuestFsyncs, res.Unmatched, tc.s.n-skipped, skipped)
			}
			if res.GuestFlushes != 2*tc.s.n || res.GuestFlushesMatched != 2*tc.s.n-skipped {
				t.Errorf("guest flushes %d matched %d, want %d and %d", res.GuestFlushes, res.GuestFlushesMatched, 2*tc.s.n, 2*tc.s.n-skipped)
			}
			for _, f := range res.Fsyncs {
				if d := math.Abs(float64(f.Split.Sum() - f.TotalNs)); d > 0.01*float64(f.TotalNs) {
					t.Fatalf("fsync at %d: split sums to %d, total %d", f.StartNs, f.Split.Sum(), f.TotalNs)
				}
				if f.Split.VirtualizationNs < 0 || f.Split.HostNs() < 0 {
					t.Fatalf("negative part: %+v", f.Split)
				}
				if !f.Matched {
					continue
				}
				// Each matched pair: exactly the one host flush made for
				// it, inside the guest window in the guest clock.
				for _, p := range f.Pairs {
					if len(p.Host) != 1 || p.HostStartGuestNs < int64(p.GuestIssueNs) || p.HostEndGuestNs > int64(p.GuestCompleteNs) {
						t.Fatalf("pair %+v: host work not the one flush inside the window", p)
					}
				}
				// The host share is the host fdatasyncs' time: the guest
				// device-flush time minus virtualization.
				var hostNs int64
				for _, p := range f.Pairs {
					hostNs += int64(p.Host[0].EndNs - p.Host[0].StartNs)
				}
				if d := math.Abs(float64(f.Split.HostNs() - hostNs)); d > 1e3 {
					t.Fatalf("host part %d ns, host fdatasyncs took %d ns", f.Split.HostNs(), hostNs)
				}
			}
			sum := Summarize(res, nil, "")
			if skipped > 0 && sum.Unmatched[ReasonNoHostFlush] == 0 {
				t.Errorf("the summary does not say why fsyncs were unmatched: %v", sum.Unmatched)
			}
		})
	}
}

func TestMergeRefusesUnrelatedRecordings(t *testing.T) {
	guest, _, _ := synth{n: 50, offsetNs: 1e9, jitter: true}.build(t)
	_, host, _ := synth{n: 50, offsetNs: 1e9, jitter: true}.build(t)
	// Host flushes far longer than any guest window: nothing can nest.
	for i := range host.Fsyncs {
		host.Fsyncs[i].EndNs = host.Fsyncs[i].StartNs + 1e9
	}
	if _, err := Merge(guest, host, Options{}); err == nil {
		t.Fatal("merged recordings in which no host flush fits a guest window")
	}
	if _, err := Merge(guest, HostRecording{}, Options{}); err == nil || !strings.Contains(err.Error(), "no flushes") {
		t.Fatalf("empty host recording: %v", err)
	}
	if _, err := Merge(guest, host, Options{GuestDev: "vdz"}); err == nil {
		t.Fatal("merged with no guest fsync on the selected device")
	}
}

func TestImagesAndWarnings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ios       []HostIO
		fsyncs    []analysis.FsyncRecord
		aio, cach string
		warn      WarningKind // 0: none
	}{
		{"raw cache=none aio=native", []HostIO{
			{Op: "io_submit", Path: "/v/raw.img", FS: "ext4", ODirect: true, TID: 2, Opcode: 1, Nr: 1, Ret: 1},
			{Op: "pread64", Path: "/v/raw.img", FS: "ext4", ODirect: true, TID: 3, Ret: 512},
		}, []analysis.FsyncRecord{{Path: "/v/raw.img", FS: "ext4", TID: 9}}, "native", "none", 0},
		{"qcow2 writeback threads", []HostIO{
			{Op: "pwritev", Path: "/v/q.qcow2", FS: "ext4", TID: 4, Ret: 4096},
			{Op: "pwritev", Path: "/v/q.qcow2", FS: "ext4", TID: 5, Ret: 4096},
		}, []analysis.FsyncRecord{{Path: "/v/q.qcow2", FS: "ext4", TID: 9}}, "threads", "writeback", 0},
		{"written, never flushed, mode unknown", []HostIO{
			{Op: "pwritev", Path: "/v/q.qcow2", FS: "ext4", TID: 4, Ret: 4096},
		}, nil, "threads", "writeback", WarnNeverFlushed},
		{"io_uring over LVM", []HostIO{
			{Op: "io_uring_enter", Path: "anon_inode:[io_uring]", FS: "anon_inodefs", TID: 2},
			{Op: "io_uring_req", Path: "/dev/dm-0", FS: "blockdev", ODirect: true, TID: 2, Opcode: 22},
			{Op: "io_uring_req", Path: "/dev/dm-0", FS: "blockdev", ODirect: true, TID: 2, Opcode: 3},
		}, nil, "io_uring", "none", WarnIOUringBlockdev},
		{"native without O_DIRECT", []HostIO{
			{Op: "io_submit", Path: "/v/raw.img", FS: "xfs", TID: 2, Opcode: 1, Nr: 1, Ret: 1},
		}, nil, "native", "writeback", WarnNativeBuffered},
		{"image on FUSE", []HostIO{
			{Op: "pwritev", Path: "/mnt/sshfs/vm.img", FS: "fuse.sshfs", TID: 2, Ret: 4096},
		}, []analysis.FsyncRecord{{Path: "/mnt/sshfs/vm.img", FS: "fuse.sshfs", TID: 9}}, "threads", "writeback", WarnOpaqueBelow},
		{"image on ceph", []HostIO{
			{Op: "pwritev", Path: "/mnt/cephfs/vm.img", FS: "ceph", TID: 2, Ret: 4096},
		}, nil, "threads", "writeback", WarnReplicated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ims := Images(tc.ios, tc.fsyncs, func(string) string { return "raw" }, nil)
			var im *Image
			for i := range ims {
				if ims[i].Path != "anon_inode:[io_uring]" {
					im = &ims[i]
				}
			}
			if im == nil || im.AIO != tc.aio || im.Cache != tc.cach {
				t.Fatalf("images %+v; want aio=%s cache=%s", ims, tc.aio, tc.cach)
			}
			w := Warnings(ims)
			if (tc.warn == 0) != (len(w) == 0) || (tc.warn != 0 && !slices.ContainsFunc(w, func(w Warning) bool { return w.Kind == tc.warn && w.Image == im.Path })) {
				t.Errorf("warnings %+v, want one of kind %d on %s", w, tc.warn, im.Path)
			}
		})
	}
	if FormatFromMagic([]byte("QFI\xfb\x00\x00\x00\x03")) != "qcow2" || FormatFromMagic(make([]byte, 8)) != "raw" {
		t.Error("FormatFromMagic")
	}
}

func TestReadHost(t *testing.T) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.Encode(HostHeader{Type: "hypervisor", V: 1, PID: 12, Clock: "CLOCK_MONOTONIC"})
	enc.Encode(HostIO{Type: "hv_io", V: 1, Op: "pwritev", Path: "/a.img"})
	enc.Encode(analysis.FsyncRecord{Type: "fsync", Version: 1, Path: "/a.img"})
	enc.Encode(HostSummary{Type: "hv_summary", V: 1})
	rec, err := ReadHost(&b)
	if err != nil || rec.Header.PID != 12 || len(rec.IO) != 1 || len(rec.Fsyncs) != 1 || rec.Summary == nil {
		t.Fatalf("ReadHost: %+v, %v", rec, err)
	}
	if _, err := ReadHost(strings.NewReader(`{"type":"hypervisor","v":2}` + "\n")); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("version 2: %v", err)
	}
	if _, err := ReadHost(strings.NewReader(`{"type":"fsync","v":1}` + "\n")); err == nil {
		t.Error("accepted a guest recording as a host one")
	}
}

// TestMergeImageWrites: writes the hypervisor makes to the image inside a
// guest flush window, before its host fdatasync (qcow2's metadata), are
// host I/O for that flush: they move from virtualization to
// host_image_writes_ns, and the split still sums to the call.
func TestMergeImageWrites(t *testing.T) {
	s := synth{n: 30, offsetNs: 1e9}
	guest, host, _ := s.build(t)
	plain, err := Merge(guest, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Each guest flush reaches the host 225 µs after its issue (synth
	// without jitter); a 40 µs write 100 µs after the issue precedes it.
	for _, r := range guest {
		for _, q := range r.Requests {
			if q.Role == analysis.RoleFlush {
				h := s.hostAt(q.IssueNs)
				host.IO = append(host.IO, HostIO{Op: "pwritev", Path: "/images/vm.img", TID: 8, StartNs: h + 100e3, EndNs: h + 140e3, Ret: 65536})
			}
		}
	}
	res, err := Merge(guest, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range res.Fsyncs {
		p := plain.Fsyncs[i]
		if f.Split.HostImageWritesNs != 80e3 || f.Split.VirtualizationNs != p.Split.VirtualizationNs-80e3 || f.Split.Sum() != f.TotalNs {
			t.Fatalf("fsync %d: image writes %d ns (want 80000: two flushes' 40 µs), virtualization %d (was %d), sum %d of %d",
				i, f.Split.HostImageWritesNs, f.Split.VirtualizationNs, p.Split.VirtualizationNs, f.Split.Sum(), f.TotalNs)
		}
	}
	// Overlapping writes count once; the part inside a host flush and a
	// write ending after the window do not count.
	ws := []span{{100, 200}, {150, 250}, {380, 450}, {900, 1200}}
	if got := writesInside(ws, 50, 1000, []span{{400, 700}}); got != 150+20 {
		t.Errorf("writesInside = %d, want 170 (100-250 once, 380-400 outside the flush)", got)
	}
}

// TestClockErrorBoundsTruthOutsideItsSpan: a guest that flushes its
// drives one after the other has each drive's clock fitted on its own
// stretch of time. Two fits on the two halves of one run (same host,
// drift 15 ppm): each fit's offset must be within ErrorAt of the truth at
// every guest flush of the run, its own half (ErrorNs) and the other
// (extrapolated by DriftErrorPPM), and the two fits within the sum of
// their errors of each other, the check the e2e test makes across drives.
func TestClockErrorBoundsTruthOutsideItsSpan(t *testing.T) {
	s := synth{n: 400, offsetNs: 9e9, driftPPM: 15, jitter: true}
	guest, host, _ := s.build(t)
	var flushes []uint64
	for _, f := range guest {
		for _, q := range f.Requests {
			if q.Role == analysis.RoleFlush {
				flushes = append(flushes, q.IssueNs)
			}
		}
	}
	var clocks [2]Clock
	for h, part := range [][]analysis.FsyncRecord{guest[:s.n/2], guest[s.n/2:]} {
		res, err := Merge(part, host, Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Clock
		clocks[h] = c
		var worstIn, worstOut float64
		for _, g := range flushes {
			truth := int64(s.hostAt(g)) - int64(g)
			d := math.Abs(float64(c.Offset(g) - truth))
			if g >= c.RefNs && g <= c.LastNs {
				worstIn = math.Max(worstIn, d)
			} else {
				worstOut = math.Max(worstOut, d/float64(c.ErrorAt(g)))
			}
			if d > float64(c.ErrorAt(g)) {
				t.Fatalf("half %d: offset at guest %d off the truth by %.1f µs, stated error ±%.1f µs (±%.1f µs and %.2f ppm over %d pairs)",
					h, g, d/1e3, float64(c.ErrorAt(g))/1e3, float64(c.ErrorNs)/1e3, c.DriftErrorPPM, c.Pairs)
			}
		}
		t.Logf("half %d: error ±%.1f µs, drift %.2f ± %.2f ppm over %d pairs; worst in its span %.1f µs, outside %.0f%% of ErrorAt",
			h, float64(c.ErrorNs)/1e3, c.DriftPPM, c.DriftErrorPPM, c.Pairs, worstIn/1e3, 100*worstOut)
		if !c.Consistent || c.ErrorNs <= 0 || c.DriftErrorPPM <= 0 {
			t.Errorf("half %d: clock %+v: want a consistent fit with a positive error and drift error", h, c)
		}
	}
	for _, g := range flushes {
		d := math.Abs(float64(clocks[0].Offset(g) - clocks[1].Offset(g)))
		if e := clocks[0].ErrorAt(g) + clocks[1].ErrorAt(g); d > float64(e) {
			t.Fatalf("at guest %d the two fits differ by %.1f µs, errors allow %.1f", g, d/1e3, float64(e)/1e3)
		}
	}
}

// TestMergeDMLayers: a guest on a device-mapper disk (its records carry a
// dm layer) and a host image on LVM or dm-crypt (the host fdatasyncs carry
// one too). The guest's dm time stays the guest's (guest_dm_ns: the split
// still sums to the call) and the host's is host work (host_dm_ns), not
// virtualization: the same run with that host time in host_other gives
// the same virtualization, and host_other + host_dm equal its host_other.
// Before the dm layer was merged, the guest's dm time fell out of the sum
// and the host's was counted as virtualization.
func TestMergeDMLayers(t *testing.T) {
	s := synth{n: 30, offsetNs: 1e9}
	guest, host, _ := s.build(t)
	plain, err := Merge(guest, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range guest {
		l := &guest[i].Layers
		l.DMNs = l.OtherNs / 2
		l.OtherNs -= l.DMNs
	}
	for i := range host.Fsyncs {
		l := &host.Fsyncs[i].Layers
		l.DMNs = l.OtherNs / 2
		l.OtherNs -= l.DMNs
	}
	res, err := Merge(guest, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var hostDM int64
	for i, f := range res.Fsyncs {
		p := plain.Fsyncs[i].Split
		if f.Split.Sum() != f.TotalNs || f.Split.GuestDMNs != guest[i].Layers.DMNs || f.Split.GuestDMNs == 0 {
			t.Fatalf("fsync %d: guest_dm %d ns (record's %d), split sums to %d of %d", i, f.Split.GuestDMNs, guest[i].Layers.DMNs, f.Split.Sum(), f.TotalNs)
		}
		if f.Split.VirtualizationNs != p.VirtualizationNs || abs(f.Split.HostOtherNs+f.Split.HostDMNs-p.HostOtherNs) > 1 {
			t.Fatalf("fsync %d: virtualization %d (%d without host dm), host other %d + dm %d (other %d without)",
				i, f.Split.VirtualizationNs, p.VirtualizationNs, f.Split.HostOtherNs, f.Split.HostDMNs, p.HostOtherNs)
		}
		hostDM += f.Split.HostDMNs
	}
	if hostDM == 0 {
		t.Fatal("no host_dm_ns in any merged fsync")
	}
	sum := Summarize(res, nil, "")
	var names []string
	for _, lv := range sum.Levels {
		for _, sh := range lv.Shares {
			names = append(names, sh.Layer)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "guest_dm") || !strings.Contains(strings.Join(names, " "), "host_dm") {
		t.Errorf("summary shares %v lack guest_dm or host_dm", names)
	}
	for _, lv := range Summarize(plain, nil, "").Levels {
		for _, sh := range lv.Shares {
			if strings.HasSuffix(sh.Layer, "_dm") {
				t.Errorf("summary of a run without dm has a %s share", sh.Layer)
			}
		}
	}
}
