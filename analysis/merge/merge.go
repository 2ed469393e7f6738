package merge

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// Options selects what to merge when a recording holds several devices.
type Options struct {
	// GuestDev keeps only guest fsyncs on this device (dev_name such as
	// "vda", or "major:minor"); "" keeps all.
	GuestDev string
	// Image keeps only host flushes of this image path; "" keeps all.
	Image string
}

// Clock maps guest CLOCK_MONOTONIC to host CLOCK_MONOTONIC:
// host = guest + OffsetNs + DriftPPM·1e-6·(guest − RefNs).
type Clock struct {
	OffsetNs int64   `json:"offset_ns"` // at guest time RefNs
	RefNs    uint64  `json:"ref_ns"`    // guest ns: the first matched flush's issue
	DriftPPM float64 `json:"drift_ppm"` // host ns gained per million guest ns
	// ErrorNs bounds the fitted offset's error anywhere between the first
	// and the last fitted pair (RefNs to LastNs). The pairs allow a set
	// of lines (those keeping every fitted pair's host flush inside its
	// guest flush window); the true clock is one of them. ErrorNs is the
	// farthest any of them lies from the fitted line over that span: it
	// counts what the slope leaves open, not only the spread of offsets
	// at the fitted slope (which understated it). When no line fits every
	// pair (Consistent false), the windows are first widened by the gap
	// of the best (Chebyshev) line, so the error is at least that gap.
	ErrorNs    int64 `json:"error_ns"`
	Consistent bool  `json:"consistent"`
	// LastNs is the guest ns of the last fitted pair's issue.
	LastNs uint64 `json:"last_ns"`
	// DriftErrorPPM is how far the slopes of the allowed lines stray from
	// DriftPPM, ppm: the offset's error grows by it outside the fitted
	// span (ErrorAt).
	DriftErrorPPM float64 `json:"drift_error_ppm"`
	Pairs         int     `json:"pairs"` // matched guest flushes the fit used (those it left out are not counted)
}

// ErrorAt returns the bound on the offset's error at guest time g, ns:
// ErrorNs inside the fitted span, growing by DriftErrorPPM outside it (a
// drive fitted on flushes before or after g, as in a guest that flushes
// its disks one after the other).
func (c Clock) ErrorAt(g uint64) int64 {
	var out uint64
	switch {
	case g < c.RefNs:
		out = c.RefNs - g
	case g > c.LastNs && c.LastNs >= c.RefNs:
		out = g - c.LastNs
	}
	return c.ErrorNs + int64(math.Ceil(c.DriftErrorPPM*1e-6*float64(out)))
}

// Offset returns host − guest at guest time g, ns.
func (c Clock) Offset(g uint64) int64 {
	return c.OffsetNs + int64(c.DriftPPM*1e-6*float64(int64(g-c.RefNs)))
}

// Split partitions a guest fsync's wall time across the two kernels, ns.
// The fields sum exactly to the guest fsync's total_ns: the guest layers
// other than device_flush (dm included) are copied from the guest record; its
// device_flush time is split into the host's work for the flushes (the
// matched host fdatasync calls, in the host's own layers, clipped to the
// guest flush windows) and virtualization, the rest: the guest-seen device
// time the host's flush work does not cover (virtio notification, QEMU's
// dispatch to its worker, completion interrupt; under TCG, emulation).
type Split struct {
	GuestDataWritebackNs int64 `json:"guest_data_writeback_ns"`
	GuestFSJournalNs     int64 `json:"guest_fs_journal_ns"`
	GuestBlockQueueNs    int64 `json:"guest_block_queue_ns"`
	// GuestDMNs: the guest record's dm layer (a device-mapper target in
	// the guest held its bios); left out of JSON when 0, as in the record.
	GuestDMNs           int64 `json:"guest_dm_ns,omitempty"`
	GuestOtherNs        int64 `json:"guest_other_ns"`
	VirtualizationNs    int64 `json:"virtualization_ns"`
	HostDataWritebackNs int64 `json:"host_data_writeback_ns"`
	HostFSJournalNs     int64 `json:"host_fs_journal_ns"`
	HostBlockQueueNs    int64 `json:"host_block_queue_ns"`
	// HostDMNs: the matched host calls' dm layer (the image on LVM or
	// dm-crypt on the host), mapped like the other host layers; left out
	// of JSON when 0. Without it that time would read as virtualization.
	HostDMNs          int64 `json:"host_dm_ns,omitempty"`
	HostDeviceFlushNs int64 `json:"host_device_flush_ns"`
	HostOtherNs       int64 `json:"host_other_ns"`
	// HostImageWritesNs: the hypervisor's own writes to the image inside
	// the guest flush window and outside its host flushes (qcow2 writing
	// back its L2 and refcount metadata before it fdatasyncs): host I/O
	// done for the flush, not virtualization.
	HostImageWritesNs int64 `json:"host_image_writes_ns"`
}

// Sum returns the sum of all parts, ns.
func (s Split) Sum() int64 {
	return s.GuestDataWritebackNs + s.GuestFSJournalNs + s.GuestBlockQueueNs + s.GuestDMNs + s.GuestOtherNs +
		s.VirtualizationNs + s.HostNs()
}

// HostNs returns the host's share: every host_* part.
func (s Split) HostNs() int64 {
	return s.HostDataWritebackNs + s.HostFSJournalNs + s.HostBlockQueueNs + s.HostDMNs + s.HostDeviceFlushNs + s.HostOtherNs + s.HostImageWritesNs
}

// Pair is one guest flush request and the host flush work matched to it.
type Pair struct {
	GuestIssueNs    uint64 `json:"guest_issue_ns"`
	GuestCompleteNs uint64 `json:"guest_complete_ns"`
	// Host flushes inside the window, host clock.
	Host []HostFlush `json:"host"`
	// InGuestClockNs: the host work's first start and last end mapped to
	// the guest clock with the fitted Clock.
	HostStartGuestNs int64 `json:"host_start_guest_ns"`
	HostEndGuestNs   int64 `json:"host_end_guest_ns"`
}

// HostFlush is one host flush (an fdatasync/fsync call, or an io_uring
// fsync request) in the host clock.
type HostFlush struct {
	Syscall string          `json:"syscall"`
	TID     uint32          `json:"tid"`
	StartNs uint64          `json:"start_ns"`
	EndNs   uint64          `json:"end_ns"`
	Layers  analysis.Layers `json:"layers"`  // host layers (all other_ns for an io_uring request)
	Flushes int             `json:"flushes"` // host device flush requests it waited on
	Path    string          `json:"path"`
}

// Unmatched reasons, as JSON and the summary name them.
const (
	// ReasonNoHostFlush: no host flush lies inside the guest flush window
	// at the fitted offset. QEMU skips the host fdatasync when nothing was
	// written since its last flush (block/io.c compares write_gen with
	// flushed_gen), and host events lost or filtered out look the same.
	ReasonNoHostFlush = "no_host_flush"
	// ReasonNoGuestFlush: the guest fsync issued no flush request of its
	// own (none needed, or it rode on a flush already in flight): there
	// is nothing to match, and its device time has no host counterpart.
	ReasonNoGuestFlush = "no_guest_flush"
	// ReasonHostDropsFlushes: the host recording shows the image written
	// but never flushed while the guest issued flushes: QEMU completes
	// them without touching the host (cache=unsafe, cache.no-flush=on).
	// Every guest flush is unmatched by design; its device time is all
	// virtualization, and nothing reached stable storage.
	ReasonHostDropsFlushes = "host_drops_flushes"
)

// MergedFsync is one guest fsync split across the two kernels: the JSON
// Lines record "merged_fsync" of `etcdscope merge` (docs/merge.md).
type MergedFsync struct {
	Type    string `json:"type"` // "merged_fsync"
	V       int    `json:"v"`
	StartNs uint64 `json:"start_ns"` // guest clock
	EndNs   uint64 `json:"end_ns"`
	TotalNs int64  `json:"total_ns"`
	PID     uint32 `json:"pid"`
	Comm    string `json:"comm"`
	Syscall string `json:"syscall"`
	Path    string `json:"path"`
	Dev     string `json:"dev_name"`
	FS      string `json:"fs"`
	// Matched: every guest flush request of the call found its host
	// flush. Reason says why not (ReasonNoHostFlush, ReasonNoGuestFlush).
	Matched bool   `json:"matched"`
	Reason  string `json:"reason,omitempty"`
	Flushes int    `json:"guest_flushes"` // guest flush requests issued
	Split   Split  `json:"split"`
	Pairs   []Pair `json:"pairs"`
}

// Result is the outcome of Merge.
type Result struct {
	Clock  Clock
	Fsyncs []MergedFsync
	// Counts over guest fsyncs: all, matched, and unmatched by reason.
	GuestFsyncs int
	Matched     int
	Unmatched   map[string]int
	// Guest flush requests and how many found a host flush; host flushes
	// and how many were matched (the rest came from guest flushes outside
	// the guest recording: other processes, journal commits between calls).
	GuestFlushes, GuestFlushesMatched int
	HostFlushes, HostFlushesMatched   int
	// DroppedBy is the image whose host side never flushed while the
	// guest did (every guest fsync unmatched with ReasonHostDropsFlushes;
	// no clock is fitted); "" otherwise.
	DroppedBy string
}

type gflush struct {
	fsync           int
	issue, complete uint64
	host            []int // indices into hosts
	lo, hi          int64 // feasible offset interval from the matched host work
}

type hflush struct {
	HostFlush
	used bool
}

// Merge matches guest flush requests to host flushes, fits the clock, and
// splits every guest fsync. It fails only when there is nothing to match
// (no guest flush or no host flush) or no offset makes any pair fit. It
// holds every guest record: `etcdscope merge` streams a recording through
// GuestIndex instead.
func Merge(guest []analysis.FsyncRecord, host HostRecording, opt Options) (Result, error) {
	g := NewGuestIndex(opt)
	for i := range guest {
		if err := g.Add(&guest[i], jsonl.Span{Off: int64(i)}); err != nil {
			return Result{Unmatched: map[string]int{}}, err
		}
	}
	var fsyncs []MergedFsync
	res, err := g.Merge(IndexHost(host), func(at jsonl.Span) (analysis.FsyncRecord, error) { return guest[at.Off], nil },
		func(m *MergedFsync) error { fsyncs = append(fsyncs, *m); return nil })
	res.Fsyncs = fsyncs
	return res, err
}

// ErrNothingToMerge: the recordings hold nothing the merge can pair (no
// guest flush, no host flush, no clock offset that pairs any): bad input,
// not a failure of the merge.
var ErrNothingToMerge = errors.New("nothing to merge")

// Merge is Merge's second pass over the indexed guest recording: it fits
// the clock on the index alone, then reads each call again (read, given
// the Span Add had) in start order, splits it and hands it to emit, which
// may not keep the pointer. The Result has no Fsyncs: a Summarizer given
// each merged call makes its Summary. Nothing is emitted when it fails
// before the split (nothing to match, no offset fits). Both indexes are
// used up: the host's flushes move into the merge.
func (g *GuestIndex) Merge(host *HostIndex, read func(jsonl.Span) (analysis.FsyncRecord, error), emit func(*MergedFsync) error) (Result, error) {
	opt := g.opt
	res := Result{Unmatched: map[string]int{}}
	gs, callAt, byCall := g.pairs()
	flushesOf := func(i int) []int32 { return byCall[callAt[i]:callAt[i+1]] }
	hs := hostFlushes(host, opt.Image)
	host.fsyncs, host.uring = nil, nil // in hs now, marked as matched
	res.GuestFlushes, res.HostFlushes = len(gs), len(hs)
	if len(gs) == 0 {
		return res, fmt.Errorf("%w: the guest recording has no flush requests inside fsyncs%s", ErrNothingToMerge, forDev(opt.GuestDev))
	}
	var clock Clock
	var ws []span
	if len(hs) == 0 {
		im, ok := writtenImage(host, opt.Image)
		if !ok {
			return res, fmt.Errorf("%w: the host recording has no flushes (fdatasync/fsync) of the hypervisor%s", ErrNothingToMerge, forImage(opt.Image))
		}
		// Written but never flushed: the flushes stop in QEMU. Nothing to
		// match or fit; every guest fsync is reported as such.
		res.DroppedBy = im.Path
	} else {
		c0, ok := coarseOffset(gs, hs)
		if !ok {
			return res, fmt.Errorf("%w: no clock offset puts any host flush inside a guest flush window", ErrNothingToMerge)
		}
		clock = Clock{OffsetNs: c0, RefNs: gs[0].issue}
		if c, ok := fit(gs); ok {
			clock = c
		}
		// Rematch and refit at least twice, and again (up to 4 passes)
		// while the clock still moves: a tracked start with a few wrong
		// pairs fits no line (under load: ±765 µs), and each pass at the
		// clock the last one fitted clears some of them (e2e vde: 19
		// guest flushes given two host flushes, then none).
		for pass, prev := 0, (Clock{}); pass < 4 && (pass < 2 || clock != prev); pass++ {
			prev = clock
			// Slack of the fit's own error, but never under 20 µs
			// (timestamp skew across CPUs).
			tol := max(clock.ErrorNs, 20e3)
			match(gs, hs, clock, tol, true)
			if c, ok := fit(gs); ok {
				clock = c
			}
		}
		res.Clock = clock
		ws = imageWrites(host, opt.Image)
		for i := range gs {
			if len(gs[i].host) > 0 {
				res.GuestFlushesMatched++
			}
		}
		for _, h := range hs {
			if h.used {
				res.HostFlushesMatched++
			}
		}
	}

	// Per guest fsync, read again in start order.
	for i, c := range g.calls {
		r, err := read(c.at)
		if err != nil {
			return res, err
		}
		if r.StartNs != c.startNs {
			return res, analysis.ErrRecordingChanged
		}
		m := split(r, flushesOf(i), gs, hs, ws, clock)
		if res.DroppedBy != "" && m.Reason == ReasonNoHostFlush {
			m.Reason = ReasonHostDropsFlushes
		}
		res.GuestFsyncs++
		if m.Matched {
			res.Matched++
		} else {
			res.Unmatched[m.Reason]++
		}
		if err := emit(&m); err != nil {
			return res, err
		}
	}
	return res, nil
}

// writtenImage returns the image the host wrote (write calls or
// submissions) in the recording: the one named, or the only one written;
// false if there is none or several.
func writtenImage(host *HostIndex, image string) (Image, bool) {
	var found []Image
	for _, im := range host.Images() {
		if im.Writes+im.IOSubmits+im.IOUringReqs == 0 || (image != "" && im.Path != image) {
			continue
		}
		found = append(found, im)
	}
	if len(found) != 1 {
		return Image{}, false
	}
	return found[0], true
}

func forDev(d string) string {
	if d == "" {
		return ""
	}
	return " on " + d
}

func forImage(p string) string {
	if p == "" {
		return ""
	}
	return " on " + p
}

// hostFlushes returns the host flush work, by start: the hypervisor's
// successful fdatasync/fsync calls on image files, and io_uring fsync
// requests (aio=io_uring flushes without a syscall).
func hostFlushes(host *HostIndex, image string) []hflush {
	var hs []hflush
	for _, fl := range [][]HostFlush{host.fsyncs, host.uring} {
		for _, f := range fl {
			if image == "" || f.Path == image {
				hs = append(hs, hflush{HostFlush: f})
			}
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].StartNs < hs[j].StartNs })
	return hs
}

// contained returns the host flushes (indices, by start) that lie inside
// guest window [issue−tol, complete+tol] mapped to the host clock with
// offset off, skipping used ones.
func contained(hs []hflush, issue, complete uint64, off, tol int64) []int {
	lo := int64(issue) + off - tol
	hi := int64(complete) + off + tol
	j := sort.Search(len(hs), func(k int) bool { return int64(hs[k].StartNs) >= lo })
	var out []int
	for ; j < len(hs) && int64(hs[j].StartNs) <= hi; j++ {
		if !hs[j].used && int64(hs[j].EndNs) <= hi {
			out = append(out, j)
		}
	}
	return out
}

// coarseOffset finds the offset without any prior: every (guest flush,
// host flush) pair among the first guest flushes in which the host flush
// fits inside the guest window proposes the middle of the offsets that
// keep it there; each proposal is scored by tracking it over the first 64
// guest flushes, and the best 2048 are tracked over every guest flush,
// which tells apart the shifts by whole periods that a regular workload
// makes look alike over a short stretch (skipped host flushes and
// irregular gaps break the tie).
func coarseOffset(gs []gflush, hs []hflush) (int64, bool) {
	nProp, nScore := min(len(gs), 8), min(len(gs), 64)
	type cand struct {
		off          int64
		score, order int
	}
	// The best maxTracked by score, the first proposed first among equal
	// scores (what a stable sort of every candidate kept first): sorted
	// and cut whenever twice that many wait, instead of holding all 8 ×
	// len(hs).
	const maxTracked = 2048
	var cands []cand
	keepBest := func() {
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			return a.score > b.score || (a.score == b.score && a.order < b.order)
		})
		cands = cands[:min(len(cands), maxTracked)]
	}
	seen := map[int64]struct{}{} // half a map of bools: it holds up to 8 × len(hs)
	// Each candidate unmarks only the host flushes the last one marked:
	// clearing every mark for each of 8 × len(hs) candidates was
	// quadratic (minutes for 160,000 host flushes).
	for i := range hs {
		hs[i].used = false
	}
	var marked []int
	for i := 0; i < nProp; i++ {
		for j := range hs {
			lo := int64(hs[j].EndNs) - int64(gs[i].complete)
			hi := int64(hs[j].StartNs) - int64(gs[i].issue)
			if lo > hi {
				continue
			}
			off := (lo + hi) / 2
			if _, ok := seen[off/1000]; ok {
				continue
			}
			seen[off/1000] = struct{}{}
			cands = append(cands, cand{off, trackUntil(gs[:nScore], hs, off, nil, &marked), len(seen)})
			if len(cands) == 2*maxTracked {
				keepBest()
			}
		}
	}
	if len(cands) == 0 {
		return 0, false
	}
	keepBest()
	if cands[0].score == 0 {
		return 0, false
	}
	best, bestScore := cands[0].off, -1
	for k := 0; k < len(cands) && cands[k].score > 0; k++ {
		if s := trackAbove(gs, hs, cands[k].off, bestScore, &marked); s > bestScore {
			best, bestScore = cands[k].off, s
		}
	}
	track(gs, hs, best)
	return best, true
}

// trackAbove is track that gives up, returning a score of at most beat,
// once the guest flushes left could no longer take its score above beat:
// the same best offset as tracking each to the end (only a score above the
// best so far replaces it), without following every wrong candidate over
// the whole recording (2048 of them over 200,000 guest flushes took 7
// minutes). The pairs it leaves in gs are not a whole track: track the
// chosen offset again.
func trackAbove(gs []gflush, hs []hflush, off int64, beat int, marked *[]int) int {
	return trackUntil(gs, hs, off, func(i, n int) bool { return n+len(gs)-i <= beat }, marked)
}

// track matches guest flushes in order starting from offset off, one host
// flush each, and follows a drifting clock. Until 4 pairs agree, a pair's
// host flush must lie inside its window at the prediction: the proposal,
// moved as little as the pairs make it (the middle of one pair's interval
// can be milliseconds off: a short host flush in a long guest window
// allows a wide interval). From then on every pair found so far bounds the
// offset: pair k allows [lo_k, hi_k] at its issue t_k, so at guest time t
// the clock, drifting at most maxTrackDriftPPM, lies in
// [lo_k − D·(t − t_k), hi_k + D·(t − t_k)], and in the intersection over
// every pair (two numbers); a guest flush takes, of the unused host
// flushes whose own interval meets it, the one nearest the prediction (its
// middle), then the one starting nearest the issue at it. It records the
// pairs in gs and returns how many guest flushes matched.
//
// It used to keep only the intersection of the last 8 pairs and to take
// only a host flush inside the window at its middle (its restart "when the
// last 8 allow no common offset" never fired: each pair held the
// prediction, so they always met there). In long windows (a loaded host's
// slow flushes, TCG) that intersection stayed milliseconds wide and its
// middle as far from the clock: right pairs with narrow intervals missed
// it and were skipped, a neighbour's host flush that held it was taken,
// and past 8 pairs nothing remembered the clock (e2e run 8's vdd: 448 of
// 910 guest flushes, a fit at −641 ppm; TestTrackKeepsClockInLongWindows).
func track(gs []gflush, hs []hflush, off int64) int {
	return trackUntil(gs, hs, off, nil, nil)
}

// maxTrackDriftPPM bounds how fast track lets the offset move between
// pairs, ppm: NTP slews each CLOCK_MONOTONIC by at most 500 ppm (the
// kernel's MAXFREQ), the synthetic miscalibrated TSC drifts 900
// (TestMergeRecoversOffsetAndSplits), the e2e runs' drives −13.4 to +2.5
// (QEMU's own clock −10.6 to +0.2). At 1000 ppm a pair's bound widens by 1 µs
// per ms: a neighbour's host flush 0.5 ms outside a window at the clock
// stays excluded for 0.5 s after the last narrow pair. On the long-window
// cases of TestTrackKeepsClockInLongWindows, 2000 tracks the same; 5000
// lets 19 of 911 guest flushes go untracked (the merge still matches all);
// 200 cannot follow the 900 ppm case.
const maxTrackDriftPPM = 1000

// trackUntil is track that stops before guest flush i once stop(i, n) (if
// not nil), n the flushes matched before it, and returns n. With marked
// nil it first unmarks every host flush; else only those in *marked, the
// ones the last call marked (every other mark must be clear), and it
// lists there the ones it marks.
func trackUntil(gs []gflush, hs []hflush, off int64, stop func(i, n int) bool, marked *[]int) int {
	if marked == nil {
		for i := range hs {
			hs[i].used = false
		}
	} else {
		for _, j := range *marked {
			hs[j].used = false
		}
		*marked = (*marked)[:0]
	}
	if len(gs) == 0 {
		return 0
	}
	// The pairs' bounds at guest time t: L(t) = maxLo − D·t and
	// H(t) = minHi + D·t, t relative to the first guest flush.
	t0 := gs[0].issue
	slack := func(t uint64) int64 { return int64(t-t0) * maxTrackDriftPPM / 1e6 }
	maxLo, minHi := int64(math.MinInt64), int64(math.MaxInt64)
	pred := off
	n := 0
	for i := range gs {
		if stop != nil && stop(i, n) {
			return n
		}
		g := &gs[i]
		g.host = nil
		// Until 4 pairs agree, a pair must hold the prediction itself: the
		// proposal, moved as little as the pairs make it (with only one
		// or two pairs' bounds, a regular workload's host flush of the
		// next or the last period meets them as well as the right one).
		L, H := pred, pred
		if n >= 4 {
			d := slack(g.issue)
			L, H = maxLo-d, minHi+d
		}
		// The host flushes inside the window at some offset in [L, H]
		// whose own interval meets it (not longer than the window).
		best, bestDist, bestSince := -1, int64(0), int64(0)
		for _, j := range contained(hs, g.issue, g.complete, L+(H-L)/2, (H-L+1)/2) {
			lo, hi := int64(hs[j].EndNs)-int64(g.complete), int64(hs[j].StartNs)-int64(g.issue)
			if lo > hi || lo > H || hi < L {
				continue
			}
			dist, since := max(lo-pred, pred-hi, 0), abs(hi-pred)
			if best < 0 || dist < bestDist || (dist == bestDist && since < bestSince) {
				best, bestDist, bestSince = j, dist, since
			}
		}
		if best < 0 {
			continue
		}
		g.host = []int{best}
		hs[best].used = true
		if marked != nil {
			*marked = append(*marked, best)
		}
		g.lo = int64(hs[best].EndNs) - int64(g.complete)
		g.hi = int64(hs[best].StartNs) - int64(g.issue)
		d := slack(g.issue)
		maxLo, minHi = max(maxLo, g.lo+d), min(minHi, g.hi-d)
		n++
		L, H = maxLo-d, minHi+d
		if n >= 4 {
			pred = L + (H-L)/2
		} else {
			pred = min(max(pred, L), H)
		}
	}
	return n
}

// match assigns host flushes to guest flushes under clock ± tol: each
// host flush goes to the guest flush whose window (widened by tol) holds
// it and which it fits best: the least time it lies outside the window
// itself, then the start nearest the issue. A guest flush may take several
// (qcow2 flushes twice for one guest flush; with multi false it keeps the
// one starting nearest its issue). Not the first guest flush in order whose
// window holds it: a window widened by an error of a few hundred µs under
// load reaches the next guest flush's host flush (a journal commit's two
// flushes lie close together) and took it, leaving that flush none.
func match(gs []gflush, hs []hflush, clock Clock, tol int64, multi bool) {
	for i := range hs {
		hs[i].used = false
	}
	type claim struct {
		g          int // guest flush + 1; 0: none yet
		out, since int64
	}
	claims := make([]claim, len(hs))
	for i := range gs {
		g := &gs[i]
		g.host = nil
		off := clock.Offset(g.issue)
		for _, j := range contained(hs, g.issue, g.complete, off, tol) {
			s, e := int64(hs[j].StartNs)-off, int64(hs[j].EndNs)-off
			out := max(int64(g.issue)-s, 0) + max(e-int64(g.complete), 0)
			since := abs(s - int64(g.issue))
			if c := claims[j]; c.g == 0 || out < c.out || (out == c.out && since < c.since) {
				claims[j] = claim{i + 1, out, since}
			}
		}
	}
	for j, c := range claims {
		if c.g > 0 {
			gs[c.g-1].host = append(gs[c.g-1].host, j)
		}
	}
	for i := range gs {
		g := &gs[i]
		if !multi && len(g.host) > 1 {
			off := clock.Offset(g.issue)
			best := g.host[0]
			for _, j := range g.host {
				if abs(int64(hs[j].StartNs)-int64(g.issue)-off) < abs(int64(hs[best].StartNs)-int64(g.issue)-off) {
					best = j
				}
			}
			g.host = []int{best}
		}
		for _, j := range g.host {
			hs[j].used = true
		}
		if len(g.host) > 0 {
			first, last := hs[g.host[0]], hs[g.host[0]]
			for _, j := range g.host {
				if hs[j].EndNs > last.EndNs {
					last = hs[j]
				}
			}
			// Offsets that keep the host work inside the window.
			g.lo = int64(last.EndNs) - int64(g.complete)
			g.hi = int64(first.StartNs) - int64(g.issue)
		}
	}
}

// fit fits the clock to the matched pairs. Each pair allows the offsets
// [lo, hi] that keep its host work inside its guest window; the line
// offset(x) = a + b·x must pass through every interval. The slope b
// minimises the gap max(lo − b·x) − min(hi − b·x), a convex function of b
// (found by ternary search within ±5000 ppm), and a is the middle of the
// band that remains. A negative gap means every pair fits (the error is
// half the band's width); while it is positive, the pair the line misses
// most is left out (at most 5% of them) and the line refitted; what is
// left is then a Chebyshev fit whose error is half the gap.
func fit(gs []gflush) (Clock, bool) {
	var idx []int
	for i := range gs {
		if len(gs[i].host) > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return Clock{}, false
	}
	ref := gs[idx[0]].issue
	x := func(i int) float64 { return float64(int64(gs[i].issue - ref)) }
	bounds := func(idx []int, b float64) (lo, hi float64) {
		lo, hi = math.Inf(-1), math.Inf(1)
		for _, i := range idx {
			lo = math.Max(lo, float64(gs[i].lo)-b*x(i))
			hi = math.Min(hi, float64(gs[i].hi)-b*x(i))
		}
		return lo, hi
	}
	// The slope of the widest band through idx (the least gap).
	widest := func(idx []int) (b, lo, hi float64) {
		gap := func(b float64) float64 { lo, hi := bounds(idx, b); return lo - hi }
		l, r := -5000e-6, 5000e-6
		for k := 0; k < 100; k++ {
			m1, m2 := l+(r-l)/3, r-(r-l)/3
			if gap(m1) <= gap(m2) {
				r = m2
			} else {
				l = m1
			}
		}
		b = (l + r) / 2
		lo, hi = bounds(idx, b)
		return b, lo, hi
	}
	var b, lo, hi float64
	for drop := 0; ; drop++ {
		b, lo, hi = widest(idx)
		if lo <= hi || drop >= len(idx)/20 || len(idx) < 3 {
			break
		}
		// Leave out a pair the line misses most: at the best line several
		// are missed by the same amount (a wrong pair on one side pulls it
		// away from right ones on the other), so of those the one whose
		// absence leaves the least gap. Dropping the first of them, 30 of
		// the 32 pairs left out of a tracked io_uring drive under load
		// were right ones and the 8 wrong ones still bent the line.
		a := (lo + hi) / 2
		miss := func(i int) float64 {
			return math.Max(a+b*x(i)-float64(gs[i].hi), float64(gs[i].lo)-a-b*x(i))
		}
		worstV := -1.0
		for _, i := range idx {
			worstV = math.Max(worstV, miss(i))
		}
		worst, worstGap := -1, math.Inf(1)
		rest := make([]int, 0, len(idx)-1)
		for k, i := range idx {
			if miss(i) < worstV-1 { // ns: ties at the line's largest miss
				continue
			}
			rest = append(append(rest[:0], idx[:k]...), idx[k+1:]...)
			if _, l, h := widest(rest); l-h < worstGap {
				worst, worstGap = k, l-h
			}
		}
		idx = append(idx[:worst], idx[worst+1:]...)
	}
	c := Clock{RefNs: ref, Pairs: len(idx), Consistent: lo <= hi}
	// The lines the pairs allow (widened by the gap when none fits all).
	widen := math.Max(lo-hi, 0)
	ivs := make([][3]float64, len(idx)) // x, lo, hi
	x0, x1 := math.Inf(1), math.Inf(-1)
	for k, i := range idx {
		ivs[k] = [3]float64{x(i), float64(gs[i].lo) - widen, float64(gs[i].hi) + widen}
		x0, x1 = math.Min(x0, x(i)), math.Max(x1, x(i))
	}
	c.LastNs = ref + uint64(x1)
	// The line: the middle of the slopes allowed, and of the intercepts
	// allowed at that slope. The slope of the widest band (b) is pinned
	// by the few tightest pairs: on three e2e runs' twelve drives it
	// strayed 0.5–8.6 ppm (mean 2.8) from the drift QEMU's own events
	// give, the middle of the allowed slopes 0.1–4.1 ppm (mean 1.5).
	bLo, bHi := slopeRange(ivs, b)
	b = (bLo + bHi) / 2
	L, H := bandAt(ivs, b)
	c.DriftPPM, c.OffsetNs = b*1e6, int64(math.Round((L+H)/2))
	c.ErrorNs = int64(math.Ceil(envelopeError(ivs, float64(c.OffsetNs), b, bLo, bHi, x0, x1)))
	c.DriftErrorPPM = (bHi - bLo) / 2 * 1e6
	return c, true
}

// bandAt returns the intercepts [L, H] that the intervals ivs ([x, lo,
// hi]) allow a line of slope s: L the largest lo − s·x (convex in s), H
// the smallest hi − s·x (concave); none when L > H.
func bandAt(ivs [][3]float64, s float64) (L, H float64) {
	L, H = math.Inf(-1), math.Inf(1)
	for _, iv := range ivs {
		L, H = math.Max(L, iv[1]-s*iv[0]), math.Min(H, iv[2]-s*iv[0])
	}
	return L, H
}

// slopeRange returns the slopes for which some line passes through every
// interval of ivs: an interval around b (one such slope), as L − H is
// convex; its ends by bisection from b outwards within ±5000 ppm (fit's
// own search range).
func slopeRange(ivs [][3]float64, b float64) (bLo, bHi float64) {
	feasible := func(s float64) bool { L, H := bandAt(ivs, s); return L <= H+1e-6 }
	edge := func(far float64) float64 {
		in, out := b, far
		if feasible(out) {
			return out
		}
		for k := 0; k < 60; k++ {
			m := (in + out) / 2
			if feasible(m) {
				in = m
			} else {
				out = m
			}
		}
		return in
	}
	return edge(-5000e-6), edge(5000e-6)
}

// envelopeError bounds how far the lines through every interval of ivs
// (slopes bLo..bHi) stray from the line a+b·x, one of them, over [x0, x1]:
// the lowest line at x, min over slopes of L(s)+s·x, is a convex problem
// in s, the highest, max of H(s)+s·x, a concave one (ternary searches),
// and the distance, convex in x, is largest at x0 or x1.
func envelopeError(ivs [][3]float64, a, b, bLo, bHi, x0, x1 float64) float64 {
	ternary := func(f func(float64) float64, minimise bool) float64 {
		l, r := bLo, bHi
		for k := 0; k < 100; k++ {
			m1, m2 := l+(r-l)/3, r-(r-l)/3
			if (f(m1) <= f(m2)) == minimise {
				r = m2
			} else {
				l = m1
			}
		}
		return f((l + r) / 2)
	}
	var errNs float64
	for _, xx := range []float64{x0, x1} {
		low := ternary(func(s float64) float64 { L, _ := bandAt(ivs, s); return L + s*xx }, true)
		high := ternary(func(s float64) float64 { _, H := bandAt(ivs, s); return H + s*xx }, false)
		f := a + b*xx
		errNs = math.Max(errNs, math.Max(f-low, high-f))
	}
	return errNs
}

// span is an interval of host time, ns.
type span struct{ start, end uint64 }

// imageWrites returns the hypervisor's write calls on the image (all
// images when image is ""), by start: the candidates for the host I/O a
// flush makes before its fdatasync (qcow2 metadata).
func imageWrites(host *HostIndex, image string) []span {
	var out []span
	for _, w := range host.writes {
		if image == "" || w.path == image {
			out = append(out, w.span)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// writesInside returns the time, ns, that writes ws spend inside [lo, hi]
// (host clock) and outside every interval of not, counting overlapping
// writes once.
func writesInside(ws []span, lo, hi uint64, not []span) int64 {
	j := sort.Search(len(ws), func(k int) bool { return ws[k].start >= lo })
	var cut []span
	for ; j < len(ws) && ws[j].start <= hi; j++ {
		if ws[j].end > hi {
			continue // not done by the flush's end: not the flush's
		}
		pieces := []span{ws[j]}
		for _, n := range not {
			var next []span
			for _, p := range pieces {
				if n.end <= p.start || n.start >= p.end {
					next = append(next, p)
					continue
				}
				if p.start < n.start {
					next = append(next, span{p.start, n.start})
				}
				if n.end < p.end {
					next = append(next, span{n.end, p.end})
				}
			}
			pieces = next
		}
		cut = append(cut, pieces...)
	}
	sort.Slice(cut, func(a, b int) bool { return cut[a].start < cut[b].start })
	var total int64
	var cur span
	for i, c := range cut {
		if i == 0 || c.start > cur.end {
			total += int64(cur.end - cur.start)
			cur = c
			continue
		}
		cur.end = max(cur.end, c.end)
	}
	if len(cut) > 0 {
		total += int64(cur.end - cur.start)
	}
	return total
}

// split partitions guest record r (its flush requests are gs[flushes]);
// ws are the hypervisor's writes to the image (imageWrites).
func split(r analysis.FsyncRecord, flushes []int32, gs []gflush, hs []hflush, ws []span, clock Clock) MergedFsync {
	m := MergedFsync{Type: "merged_fsync", V: SchemaVersion, StartNs: r.StartNs, EndNs: r.EndNs, TotalNs: r.TotalNs,
		PID: r.PID, Comm: r.Comm, Syscall: r.Syscall, Path: r.Path, Dev: r.DevName, FS: r.FS,
		Flushes: len(flushes), Matched: true, Pairs: []Pair{}}
	L := r.Layers
	m.Split = Split{GuestDataWritebackNs: L.DataWritebackNs, GuestFSJournalNs: L.JournalNs,
		GuestBlockQueueNs: L.BlockQueueNs, GuestDMNs: L.DMNs, GuestOtherNs: L.OtherNs}
	if len(flushes) == 0 {
		m.Matched, m.Reason = false, ReasonNoGuestFlush
	}
	var parts [7]float64 // host data, journal, queue, device flush, other, image writes, dm
	for _, gi := range flushes {
		g := gs[gi]
		if len(g.host) == 0 {
			m.Matched, m.Reason = false, ReasonNoHostFlush
			continue
		}
		off := clock.Offset(g.issue)
		p := Pair{GuestIssueNs: g.issue, GuestCompleteNs: g.complete, HostStartGuestNs: math.MaxInt64, HostEndGuestNs: math.MinInt64}
		// The guest window inside the call: device flush time is counted
		// only there.
		wlo, whi := int64(max(g.issue, r.StartNs)), int64(min(g.complete, r.EndNs))
		var flushSpans []span
		for _, j := range g.host {
			flushSpans = append(flushSpans, span{hs[j].StartNs, hs[j].EndNs})
		}
		// The image writes the hypervisor made inside the window (in the
		// call's part of it), outside the host flushes themselves.
		if lo, hi := wlo+off, whi+off; lo > 0 && hi > lo {
			parts[5] += float64(writesInside(ws, uint64(lo), uint64(hi), flushSpans))
		}
		for _, j := range g.host {
			h := hs[j].HostFlush
			p.Host = append(p.Host, h)
			s, e := int64(h.StartNs)-off, int64(h.EndNs)-off
			p.HostStartGuestNs = min(p.HostStartGuestNs, s)
			p.HostEndGuestNs = max(p.HostEndGuestNs, e)
			d := e - s
			cs, ce := max(s, wlo), min(e, whi)
			if d <= 0 || ce <= cs {
				continue
			}
			frac := float64(ce-cs) / float64(d)
			parts[0] += frac * float64(h.Layers.DataWritebackNs)
			parts[1] += frac * float64(h.Layers.JournalNs)
			parts[2] += frac * float64(h.Layers.BlockQueueNs)
			parts[3] += frac * float64(h.Layers.DeviceFlushNs)
			parts[4] += frac * float64(h.Layers.OtherNs)
			parts[6] += frac * float64(h.Layers.DMNs)
		}
		m.Pairs = append(m.Pairs, p)
	}
	// The host work lies inside the guest's device flush time; if the
	// clipped sum still exceeds it (overlapping guest windows, the sweep
	// giving part of a window to nothing), scale it down to fit.
	sum := parts[0] + parts[1] + parts[2] + parts[3] + parts[4] + parts[5] + parts[6]
	if dev := float64(L.DeviceFlushNs); sum > dev && sum > 0 {
		for k := range parts {
			parts[k] *= dev / sum
		}
	}
	m.Split.HostDataWritebackNs = int64(parts[0])
	m.Split.HostFSJournalNs = int64(parts[1])
	m.Split.HostBlockQueueNs = int64(parts[2])
	m.Split.HostDeviceFlushNs = int64(parts[3])
	m.Split.HostOtherNs = int64(parts[4])
	m.Split.HostImageWritesNs = int64(parts[5])
	m.Split.HostDMNs = int64(parts[6])
	// Virtualization is the remainder, so the split sums exactly.
	m.Split.VirtualizationNs = L.DeviceFlushNs - m.Split.HostNs()
	if m.Split.VirtualizationNs < 0 { // rounding
		m.Split.HostOtherNs += m.Split.VirtualizationNs
		m.Split.VirtualizationNs = 0
	}
	return m
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
