package merge

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// Level is one row of the per-level table: L1 the guest, L2 the host.
type Level struct {
	Level string `json:"level"` // "L1 guest" or "L2 host"
	// Device names the device and filesystem: the guest's disk and
	// filesystem; the host image with its format, cache and aio mode and
	// the host filesystem it lives on.
	Device string `json:"device"`
	// P50Ns, P99Ns: the guest fsync wall time (L1) or the matched host
	// flush calls' wall time (L2), nearest rank.
	P50Ns int64 `json:"p50_ns"`
	P99Ns int64 `json:"p99_ns"`
	// FlushesPerFsync: guest flush requests (L1) or host device flush
	// requests (L2) per guest fsync.
	FlushesPerFsync float64 `json:"flushes_per_fsync"`
	// Shares of the summed guest fsync wall time, by split part.
	Shares []Share `json:"layers"`
}

// Share is one layer's part of the summed guest wall time.
type Share struct {
	Layer string  `json:"layer"`
	Share float64 `json:"share"` // 0..1
}

// Summary is the last record of `etcdscope merge --output json`.
type Summary struct {
	Type   string  `json:"type"` // "merge_summary"
	V      int     `json:"v"`
	Clock  Clock   `json:"clock"`
	Levels []Level `json:"levels"`
	// Guest fsyncs: all, with every flush matched, and unmatched by reason.
	GuestFsyncs         int            `json:"guest_fsyncs"`
	Matched             int            `json:"matched"`
	Unmatched           map[string]int `json:"unmatched"`
	GuestFlushes        int            `json:"guest_flushes"`
	GuestFlushesMatched int            `json:"guest_flushes_matched"`
	HostFlushes         int            `json:"host_flushes"`
	HostFlushesMatched  int            `json:"host_flushes_matched"`
	Images              []Image        `json:"images,omitempty"`
	Warnings            []string       `json:"warnings,omitempty"`
}

// Summarize builds the per-level table and counts from a Result; images
// describe the host side (from the host recording's summary), and the
// first that matches image (or the only one) names the L2 row.
func Summarize(res Result, images []Image, image string) Summary {
	s := Summary{Type: "merge_summary", V: SchemaVersion, Clock: res.Clock, GuestFsyncs: res.GuestFsyncs,
		Matched: res.Matched, Unmatched: res.Unmatched, GuestFlushes: res.GuestFlushes,
		GuestFlushesMatched: res.GuestFlushesMatched, HostFlushes: res.HostFlushes, HostFlushesMatched: res.HostFlushesMatched,
		Images: images, Warnings: Warnings(images)}
	var total, hostFlushReqs int64
	var sum Split
	var guestLat, hostLat []int64
	devs := map[string]bool{}
	seenHost := map[uint64]bool{}
	for _, f := range res.Fsyncs {
		total += f.TotalNs
		guestLat = append(guestLat, f.TotalNs)
		devs[strings.TrimSpace(f.Dev+" "+f.FS)] = true
		p := f.Split
		sum.GuestDataWritebackNs += p.GuestDataWritebackNs
		sum.GuestFSJournalNs += p.GuestFSJournalNs
		sum.GuestBlockQueueNs += p.GuestBlockQueueNs
		sum.GuestOtherNs += p.GuestOtherNs
		sum.VirtualizationNs += p.VirtualizationNs
		sum.HostDataWritebackNs += p.HostDataWritebackNs
		sum.HostFSJournalNs += p.HostFSJournalNs
		sum.HostBlockQueueNs += p.HostBlockQueueNs
		sum.HostDeviceFlushNs += p.HostDeviceFlushNs
		sum.HostOtherNs += p.HostOtherNs
		for _, pr := range f.Pairs {
			for _, h := range pr.Host {
				if seenHost[h.StartNs] {
					continue
				}
				seenHost[h.StartNs] = true
				hostLat = append(hostLat, int64(h.EndNs-h.StartNs))
				hostFlushReqs += int64(h.Flushes)
			}
		}
	}
	share := func(ns int64) float64 {
		if total == 0 {
			return 0
		}
		return float64(ns) / float64(total)
	}
	var names []string
	for d := range devs {
		names = append(names, d)
	}
	sort.Strings(names)
	g := stats.Summarize(guestLat)
	n := float64(max(res.GuestFsyncs, 1))
	s.Levels = append(s.Levels, Level{Level: "L1 guest", Device: strings.Join(names, ", "), P50Ns: g.P50, P99Ns: g.P99,
		FlushesPerFsync: float64(res.GuestFlushes) / n,
		Shares: []Share{{"guest_fs_journal", share(sum.GuestFSJournalNs)}, {"guest_data_writeback", share(sum.GuestDataWritebackNs)},
			{"guest_block_queue", share(sum.GuestBlockQueueNs)}, {"virtualization", share(sum.VirtualizationNs)},
			{"guest_other", share(sum.GuestOtherNs)}, {"host (L2)", share(sum.HostNs())}}})
	h := stats.Summarize(hostLat)
	hostDev := ""
	for _, im := range images {
		if image == "" || im.Path == image {
			hostDev = fmt.Sprintf("%s (%s, cache=%s, aio=%s) on %s %s", im.Path, im.Format, im.Cache, im.AIO, nameOr(im), im.FS)
			break
		}
	}
	s.Levels = append(s.Levels, Level{Level: "L2 host", Device: hostDev, P50Ns: h.P50, P99Ns: h.P99,
		FlushesPerFsync: float64(hostFlushReqs) / n,
		Shares: []Share{{"host_fs_journal", share(sum.HostFSJournalNs)}, {"host_device_flush", share(sum.HostDeviceFlushNs)},
			{"host_data_writeback", share(sum.HostDataWritebackNs)}, {"host_block_queue", share(sum.HostBlockQueueNs)},
			{"host_other", share(sum.HostOtherNs)}}})
	return s
}

// WriteTable prints the per-level table, the clock fit, the match counts
// with the reasons for unmatched fsyncs, and warnings.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " level\t device / filesystem\t p50 ms\t p99 ms\t flushes per fsync\t layers (share of guest fsync time)")
	for _, l := range s.Levels {
		var parts []string
		for _, sh := range l.Shares {
			if sh.Share >= 0.0005 {
				parts = append(parts, fmt.Sprintf("%s %.1f%%", sh.Layer, 100*sh.Share))
			}
		}
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\t %.2f\t %s\n", l.Level, l.Device, analysis.Ms(l.P50Ns), analysis.Ms(l.P99Ns), l.FlushesPerFsync, strings.Join(parts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := s.Clock
	cons := "every pair fits one offset"
	if !c.Consistent {
		cons = "no single offset fits every pair: error is 3×MAD"
	}
	fmt.Fprintf(w, "\nclock: host = guest %+.6f s, drift %+.1f ppm, error ±%.1f µs over %d pairs (%s)\n",
		float64(c.OffsetNs)/1e9, c.DriftPPM, float64(c.ErrorNs)/1e3, c.Pairs, cons)
	fmt.Fprintf(w, "guest fsyncs: %d, matched %d (%.1f%%)", s.GuestFsyncs, s.Matched, 100*float64(s.Matched)/float64(max(s.GuestFsyncs, 1)))
	var reasons []string
	for r, n := range s.Unmatched {
		reasons = append(reasons, r)
		_ = n
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "; %d %s", s.Unmatched[r], r)
	}
	fmt.Fprintf(w, "\nguest flush requests: %d, matched %d; host flushes: %d, matched %d (the rest: guest flushes outside the guest recording)\n",
		s.GuestFlushes, s.GuestFlushesMatched, s.HostFlushes, s.HostFlushesMatched)
	if s.Unmatched[ReasonNoHostFlush] > 0 {
		fmt.Fprintln(w, "no_host_flush: no host flush inside the guest flush window (QEMU skips the host flush when nothing was written since the last; or host events were lost)")
	}
	if s.Unmatched[ReasonNoGuestFlush] > 0 {
		fmt.Fprintln(w, "no_guest_flush: the fsync issued no flush request of its own: nothing to match")
	}
	for _, im := range s.Images {
		fmt.Fprintf(w, "image %s: format %s, cache=%s, aio=%s, %d threads, %d writes, %d io_submit, %d io_uring requests, %d flushes\n",
			im.Path, im.Format, im.Cache, im.AIO, im.Threads, im.Writes, im.IOSubmits, im.IOUringReqs, im.Flushes)
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	return nil
}
