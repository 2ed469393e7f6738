package e2e

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/merge"
	"golang.org/x/sys/unix"
)

// qemuTraceEvents are the QEMU 7.2 trace events the hypervisor test's
// oracle reads (QEMU has no flush event of its own): a virtio request's
// pop and completion, the reads and writes among them, the thread pool's
// jobs (the fdatasync of aio=threads and aio=native, and aio=threads'
// writes) and io_uring's submissions and completions (aio=io_uring).
var qemuTraceEvents = []string{"virtqueue_pop", "virtio_blk_req_complete", "virtio_blk_handle_write",
	"virtio_blk_handle_read", "thread_pool_submit", "thread_pool_complete", "luring_co_submit", "luring_process_completion"}

// qemuAIOFlush is QEMU_AIO_FLUSH, luring_co_submit's type of a flush
// (QEMU's include/block/raw-aio.h).
const qemuAIOFlush = 8

// clockSample is CLOCK_REALTIME and CLOCK_MONOTONIC read back to back, ns.
type clockSample struct{ RealNs, MonoNs int64 }

// sampleRealtimeMono reads the two clocks QEMU's log backend (realtime,
// µs) and the host tracer (monotonic) stamp with: the best of 32 tries,
// the one whose monotonic reads around the realtime read are closest.
func sampleRealtimeMono() clockSample {
	var best clockSample
	bestGap := int64(math.MaxInt64)
	for i := 0; i < 32; i++ {
		var m0, r, m1 unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m0)
		unix.ClockGettime(unix.CLOCK_REALTIME, &r)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		if gap := m1.Nano() - m0.Nano(); gap < bestGap {
			bestGap = gap
			best = clockSample{RealNs: r.Nano(), MonoNs: m0.Nano() + gap/2}
		}
	}
	return best
}

// qemuSpan is one piece of QEMU's work in the host's CLOCK_MONOTONIC, ns.
type qemuSpan struct{ StartNs, EndNs int64 }

// qemuFlush is one virtio-blk flush request as QEMU's trace events show
// it, host CLOCK_MONOTONIC ns: popped from its virtqueue, completed, and
// the host I/O jobs QEMU ran for it in between, in order: thread pool
// jobs (the fdatasync under aio=threads and aio=native; qcow2's metadata
// writes, and the fdatasync that orders its L2 writes before its
// refcount writes) or the io_uring flush. No job: QEMU skipped the host
// flush (nothing written since the last).
type qemuFlush struct {
	VQ            string
	PopNs, DoneNs int64
	Jobs          []qemuJob
}

// qemuJob is one thread pool job or io_uring flush submission, from
// submission to QEMU's completion callback; FD is io_uring's image fd
// (-1 for a thread pool job).
type qemuJob struct {
	qemuSpan
	FD int
}

// qemuTrace reads QEMU's log-backend trace ("tid@sec.usec:event args",
// -msg timestamp=on) and returns its virtio-blk flush requests by pop.
// Timestamps are realtime µs, mapped to CLOCK_MONOTONIC by the line
// through the two samples taken around the run. A flush request is one
// with one out and one in descriptor (header, status) that is neither a
// read nor a write.
func qemuTrace(r io.Reader, before, after clockSample) ([]qemuFlush, error) {
	if after.RealNs <= before.RealNs {
		return nil, fmt.Errorf("clock samples out of order: %+v, %+v", before, after)
	}
	rate := float64(after.MonoNs-before.MonoNs) / float64(after.RealNs-before.RealNs)
	mono := func(realNs int64) int64 {
		return before.MonoNs + int64(math.Round(float64(realNs-before.RealNs)*rate))
	}
	type req struct {
		vq      string
		pop     int64
		in, out int
		rw      bool
	}
	reqs := map[string]*req{}
	// Thread pool jobs and io_uring flushes by pointer while in flight;
	// done ones in order.
	poolStart := map[string]int64{}
	uring := map[string]qemuJob{}
	var jobs []qemuJob
	var flushes []qemuFlush
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		at, rest, ok := strings.Cut(l, "@")
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(at); err != nil {
			continue
		}
		stamp, rest, ok := strings.Cut(rest, ":")
		sec, usec, ok2 := strings.Cut(stamp, ".")
		if !ok || !ok2 || len(usec) != 6 {
			return nil, fmt.Errorf("line %d: no sec.usec timestamp (run QEMU with -msg timestamp=on): %q", line, l)
		}
		s, err1 := strconv.ParseInt(sec, 10, 64)
		u, err2 := strconv.ParseInt(usec, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: bad timestamp %q", line, stamp)
		}
		ns := mono(s*1e9 + u*1e3)
		name, argStr, _ := strings.Cut(rest, " ")
		f := strings.Fields(argStr)
		arg := func(k string) string {
			for i := 0; i+1 < len(f); i++ {
				if f[i] == k {
					return f[i+1]
				}
			}
			return ""
		}
		switch name {
		case "virtqueue_pop":
			in, _ := strconv.Atoi(arg("in_num"))
			out, _ := strconv.Atoi(arg("out_num"))
			reqs[arg("elem")] = &req{vq: arg("vq"), pop: ns, in: in, out: out}
		case "virtio_blk_handle_write", "virtio_blk_handle_read":
			if q := reqs[arg("req")]; q != nil {
				q.rw = true
			}
		case "virtio_blk_req_complete":
			// VirtIOBlockReq begins with its VirtQueueElement: req is
			// the popped elem.
			q := reqs[arg("req")]
			delete(reqs, arg("req"))
			if q == nil || q.rw || q.in != 1 || q.out != 1 {
				continue
			}
			fl := qemuFlush{VQ: q.vq, PopNs: q.pop, DoneNs: ns}
			// The host I/O done for it: jobs inside [pop, done].
			k := len(jobs)
			for k > 0 && jobs[k-1].EndNs >= q.pop {
				k--
			}
			for _, j := range jobs[k:] {
				if j.StartNs >= q.pop {
					fl.Jobs = append(fl.Jobs, j)
				}
			}
			flushes = append(flushes, fl)
		case "thread_pool_submit":
			poolStart[arg("req")] = ns
		case "thread_pool_complete":
			if s, ok := poolStart[arg("req")]; ok {
				delete(poolStart, arg("req"))
				jobs = append(jobs, qemuJob{qemuSpan{s, ns}, -1})
			}
		case "luring_co_submit":
			if t, _ := strconv.Atoi(arg("type")); t == qemuAIOFlush {
				fd, _ := strconv.Atoi(arg("fd"))
				uring[arg("luringcb")] = qemuJob{qemuSpan{StartNs: ns}, fd}
			}
		case "luring_process_completion":
			if j, ok := uring[arg("luringcb")]; ok {
				delete(uring, arg("luringcb"))
				j.EndNs = ns
				jobs = append(jobs, j)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(flushes, func(i, j int) bool { return flushes[i].PopNs < flushes[j].PopNs })
	return flushes, nil
}

// qemuOracleStats is what checkAgainstQEMU measured on one drive, ns.
type qemuOracleStats struct {
	VQ                  string
	Pairs, Found        int
	ClockViolations     int
	WorstClockExcessNs  int64   // the farthest a QEMU request sat outside its guest window (negative: inside)
	JobMinusFdatasyncNs []int64 // QEMU's flush job less the host flush merge paired: thread pool or io_uring dispatch
	RequestMinusHostNs  []int64 // per guest fsync: QEMU's request time less merge's host part
	ImageWritesNs       int64   // merge's host_image_writes_ns in all
	QEMUWritesBeforeNs  int64   // QEMU's jobs holding no paired host flush in the same requests, in all
	RequestNs           []int64 // QEMU's flush requests, pop to completion
	// Intervals: per pair, the offsets (host − guest) that keep QEMU's
	// request inside the guest window, [done − guest complete, pop −
	// guest issue], at the guest issue: the oracle's own clock (qemuLine).
	Intervals []offsetInterval
}

// offsetInterval is the range of offsets host − guest, ns, one pair allows
// at guest time G.
type offsetInterval struct {
	G      uint64
	Lo, Hi int64
}

// qemuLine fits one line offset(g) = a + b·(g − ivs[0].G) through the
// intervals the way merge does (b minimising the gap between the largest
// lower and the smallest upper bound, ternary search within ±5000 ppm),
// but on QEMU's intervals alone: the oracle's clock. gapNs < 0 means
// every interval holds the line (−gapNs is the band's width).
func qemuLine(ivs []offsetInterval) (a, driftPPM, gapNs float64) {
	ref := ivs[0].G
	bounds := func(b float64) (lo, hi float64) {
		lo, hi = math.Inf(-1), math.Inf(1)
		for _, iv := range ivs {
			x := float64(int64(iv.G - ref))
			lo, hi = math.Max(lo, float64(iv.Lo)-b*x), math.Min(hi, float64(iv.Hi)-b*x)
		}
		return lo, hi
	}
	l, r := -5000e-6, 5000e-6
	for k := 0; k < 200; k++ {
		m1, m2 := l+(r-l)/3, r-(r-l)/3
		lo1, hi1 := bounds(m1)
		lo2, hi2 := bounds(m2)
		if lo1-hi1 <= lo2-hi2 {
			r = m2
		} else {
			l = m1
		}
	}
	b := (l + r) / 2
	lo, hi := bounds(b)
	return (lo + hi) / 2, b * 1e6, lo - hi
}

// checkAgainstQEMU checks one drive's merge against QEMU's own account
// of the same flushes (qf, from qemuTrace), every ε = epsNs (QEMU's µs
// stamps and the realtime→monotonic map):
//   - pairing: every host flush merge paired lies inside exactly one QEMU
//     flush request's flush job, all on one virtqueue, none claimed twice;
//   - clock: that request's pop and completion, mapped to the guest by
//     merge's clock, lie inside the guest flush window within the clock's
//     stated error there (ErrorAt) + ε;
//   - values: each paired host flush lasts no longer than QEMU's flush job
//     around it (+2ε), each guest fsync's host part (host_* parts)
//     no longer than QEMU's requests for its flushes, pop to completion
//     (+2ε per flush): what remains of the guest's device flush time is
//     at least the time the request spent outside QEMU, so
//     virtualization_ns is not understated; and host_image_writes_ns is no
//     more than QEMU's own jobs before the flush job in those requests.
//
// It returns what it measured; the caller logs it.
func checkAgainstQEMU(t testing.TB, dev string, res merge.Result, qf []qemuFlush, epsNs int64) qemuOracleStats {
	var st qemuOracleStats
	claimed := map[int]bool{}
	vqs := map[string]int{}
	for _, f := range res.Fsyncs {
		var reqNs, beforeNs int64
		for _, p := range f.Pairs {
			st.Pairs++
			if len(p.Host) == 0 {
				continue
			}
			// The request one of whose jobs holds the first host flush.
			inJob := func(j qemuJob, h merge.HostFlush) bool {
				return j.StartNs-epsNs <= int64(h.StartNs) && int64(h.EndNs) <= j.EndNs+epsNs
			}
			h := p.Host[0]
			k := -1
			// Requests by pop: the one holding it popped before it started
			// (within 10 s: longer ones are not flushes of interest), and
			// requests overlap, so an earlier one may still hold it.
			for i := sort.Search(len(qf), func(i int) bool { return qf[i].PopNs > int64(h.StartNs)+epsNs }) - 1; i >= 0 && k < 0 && qf[i].PopNs >= int64(h.StartNs)-10e9; i-- {
				for _, j := range qf[i].Jobs {
					if inJob(j, h) {
						k = i
						break
					}
				}
			}
			if k < 0 {
				t.Errorf("%s: merge paired guest flush [%d, %d] with host %s [%d, %d] ns, inside no QEMU flush request's job", dev,
					p.GuestIssueNs, p.GuestCompleteNs, h.Syscall, h.StartNs, h.EndNs)
				continue
			}
			st.Found++
			q := qf[k]
			if claimed[k] {
				t.Errorf("%s: QEMU flush request popped at %d ns paired with two guest flushes", dev, q.PopNs)
			}
			claimed[k] = true
			vqs[q.VQ]++
			// Every host flush of the pair in a job of that request; the
			// jobs that hold none are the request's other host I/O.
			holds := make([]bool, len(q.Jobs))
			var hostNs, jobNs int64
			for _, hh := range p.Host {
				hostNs += int64(hh.EndNs - hh.StartNs)
				found := false
				for i, j := range q.Jobs {
					if inJob(j, hh) {
						found, holds[i] = true, true
						break
					}
				}
				if !found {
					t.Errorf("%s: host %s [%d, %d] paired with the guest flush at %d lies in no job of QEMU's request [%d, %d]", dev,
						hh.Syscall, hh.StartNs, hh.EndNs, p.GuestIssueNs, q.PopNs, q.DoneNs)
				}
			}
			for i, j := range q.Jobs {
				if holds[i] {
					jobNs += j.EndNs - j.StartNs
				} else {
					beforeNs += j.EndNs - j.StartNs
				}
			}
			st.JobMinusFdatasyncNs = append(st.JobMinusFdatasyncNs, jobNs-hostNs)
			if hostNs > jobNs+2*epsNs*int64(len(p.Host)) {
				t.Errorf("%s: host flush work %d ns, QEMU's jobs around it %d ns", dev, hostNs, jobNs)
			}
			off := res.Clock.Offset(p.GuestIssueNs)
			e := res.Clock.ErrorAt(p.GuestIssueNs) + epsNs
			excess := max(int64(p.GuestIssueNs)-(q.PopNs-off), (q.DoneNs-off)-int64(p.GuestCompleteNs))
			if st.Found == 1 || excess > st.WorstClockExcessNs {
				st.WorstClockExcessNs = excess
			}
			if excess > e {
				st.ClockViolations++
			}
			reqNs += q.DoneNs - q.PopNs
			st.RequestNs = append(st.RequestNs, q.DoneNs-q.PopNs)
			st.Intervals = append(st.Intervals, offsetInterval{p.GuestIssueNs, q.DoneNs - int64(p.GuestCompleteNs), q.PopNs - int64(p.GuestIssueNs)})
		}
		if len(f.Pairs) > 0 {
			st.RequestMinusHostNs = append(st.RequestMinusHostNs, reqNs-f.Split.HostNs())
			if f.Split.HostNs() > reqNs+2*epsNs*int64(len(f.Pairs)) {
				t.Errorf("%s: fsync at %d: host part %d ns, QEMU spent %d ns on its flush requests", dev, f.StartNs, f.Split.HostNs(), reqNs)
			}
			st.ImageWritesNs += f.Split.HostImageWritesNs
			st.QEMUWritesBeforeNs += beforeNs
		}
	}
	for vq := range vqs {
		st.VQ += vq
	}
	if len(vqs) != 1 {
		t.Errorf("%s: merge's pairs lie in QEMU flush requests of %d virtqueues %v, want one", dev, len(vqs), vqs)
	}
	if st.Found < st.Pairs {
		t.Errorf("%s: %d of %d pairs found in QEMU's trace", dev, st.Found, st.Pairs)
	}
	if st.ClockViolations > 0 {
		t.Errorf("%s: %d of %d QEMU flush requests lie outside their guest windows by more than the clock's error + %d ns (worst by %.1f µs)",
			dev, st.ClockViolations, st.Found, epsNs, float64(st.WorstClockExcessNs)/1e3)
	}
	if st.ImageWritesNs > st.QEMUWritesBeforeNs+2*epsNs*int64(st.Found) {
		t.Errorf("%s: host_image_writes %d ns in all, QEMU's jobs before its flush jobs %d ns", dev, st.ImageWritesNs, st.QEMUWritesBeforeNs)
	}
	return st
}
