package merge

import (
	"slices"
	"sort"
	"strings"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// Level is one row of the per-level table: L1 the guest, L0 the host
// (numbered from the bottom, as nested virtualization is).
type Level struct {
	Level string `json:"level"` // "L1 guest" or "L0 host"
	// Device names the device and filesystem: the guest's disk and
	// filesystem; the host image with its format, cache and aio mode and
	// the host filesystem it lives on (render.WordMerge words it from
	// Image).
	Device string `json:"device"`
	// Image: on the L0 row, the host image the row is of (nil: none).
	Image *Image `json:"-"`
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
	// DroppedBy is Result.DroppedBy: the image the host never flushed
	// while the guest did (no durability), "" otherwise.
	DroppedBy string `json:"-"`
	// Durability is DroppedBy worded ("none: ..."), Warnings
	// Warnings(Images) worded: render.WordMerge fills both.
	Durability string   `json:"durability,omitempty"`
	Images     []Image  `json:"images,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Summarize builds the per-level table and counts from a Result; images
// describe the host side (from the host recording's summary), and the
// first that matches image (or the only one) names the L0 row.
func Summarize(res Result, images []Image, image string) Summary {
	var z Summarizer
	for i := range res.Fsyncs {
		z.Add(&res.Fsyncs[i])
	}
	return z.Summary(res, images, image)
}

// Summarizer is Summarize over a stream of merged calls (GuestIndex.Merge
// emits them): it keeps each call's wall time (8 bytes, for the
// percentiles), each distinct host flush's, and sums. The zero value is
// ready.
type Summarizer struct {
	total, hostFlushReqs int64
	sum                  Split
	guestLat, hostLat    []int64
	devs                 map[string]bool
	seenHost             map[uint64]bool
}

// Add counts merged call f.
func (z *Summarizer) Add(f *MergedFsync) {
	if z.devs == nil {
		z.devs, z.seenHost = map[string]bool{}, map[uint64]bool{}
	}
	z.total += f.TotalNs
	z.guestLat = append(z.guestLat, f.TotalNs)
	z.devs[strings.TrimSpace(f.Dev+" "+f.FS)] = true
	p, sum := f.Split, &z.sum
	sum.GuestDataWritebackNs += p.GuestDataWritebackNs
	sum.GuestFSJournalNs += p.GuestFSJournalNs
	sum.GuestBlockQueueNs += p.GuestBlockQueueNs
	sum.GuestDMNs += p.GuestDMNs
	sum.GuestOtherNs += p.GuestOtherNs
	sum.VirtualizationNs += p.VirtualizationNs
	sum.HostDataWritebackNs += p.HostDataWritebackNs
	sum.HostFSJournalNs += p.HostFSJournalNs
	sum.HostBlockQueueNs += p.HostBlockQueueNs
	sum.HostDMNs += p.HostDMNs
	sum.HostDeviceFlushNs += p.HostDeviceFlushNs
	sum.HostOtherNs += p.HostOtherNs
	sum.HostImageWritesNs += p.HostImageWritesNs
	for _, pr := range f.Pairs {
		for _, h := range pr.Host {
			if z.seenHost[h.StartNs] {
				continue
			}
			z.seenHost[h.StartNs] = true
			z.hostLat = append(z.hostLat, int64(h.EndNs-h.StartNs))
			z.hostFlushReqs += int64(h.Flushes)
		}
	}
}

// Summary is Summarize of the calls added: res gives the counts and the
// clock (its Fsyncs are not read).
func (z *Summarizer) Summary(res Result, images []Image, image string) Summary {
	s := Summary{Type: "merge_summary", V: SummaryVersion, Clock: res.Clock, GuestFsyncs: res.GuestFsyncs,
		Matched: res.Matched, Unmatched: res.Unmatched, GuestFlushes: res.GuestFlushes,
		GuestFlushesMatched: res.GuestFlushesMatched, HostFlushes: res.HostFlushes, HostFlushesMatched: res.HostFlushesMatched,
		Images: images, DroppedBy: res.DroppedBy}
	total, hostFlushReqs, sum, guestLat, hostLat, devs := z.total, z.hostFlushReqs, z.sum, z.guestLat, z.hostLat, z.devs
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
	// The dm shares only where a device-mapper target held bios, as the
	// fsync report's dm column.
	withDM := func(shares []Share, at int, name string, ns int64) []Share {
		if ns == 0 {
			return shares
		}
		return slices.Insert(shares, at, Share{name, share(ns)})
	}
	s.Levels = append(s.Levels, Level{Level: "L1 guest", Device: strings.Join(names, ", "), P50Ns: g.P50, P99Ns: g.P99,
		FlushesPerFsync: float64(res.GuestFlushes) / n,
		Shares: withDM([]Share{{"guest_fs_journal", share(sum.GuestFSJournalNs)}, {"guest_data_writeback", share(sum.GuestDataWritebackNs)},
			{"guest_block_queue", share(sum.GuestBlockQueueNs)}, {"virtualization", share(sum.VirtualizationNs)},
			{"guest_other", share(sum.GuestOtherNs)}, {"host (L0)", share(sum.HostNs())}}, 3, "guest_dm", sum.GuestDMNs)})
	h := stats.Summarize(hostLat)
	var hostIm *Image
	for _, im := range images {
		if image == "" || im.Path == image {
			hostIm = &im
			break
		}
	}
	s.Levels = append(s.Levels, Level{Level: "L0 host", Image: hostIm, P50Ns: h.P50, P99Ns: h.P99,
		FlushesPerFsync: float64(hostFlushReqs) / n,
		Shares: withDM([]Share{{"host_fs_journal", share(sum.HostFSJournalNs)}, {"host_device_flush", share(sum.HostDeviceFlushNs)},
			{"host_data_writeback", share(sum.HostDataWritebackNs)}, {"host_block_queue", share(sum.HostBlockQueueNs)},
			{"host_other", share(sum.HostOtherNs)}, {"host_image_writes", share(sum.HostImageWritesNs)}}, 4, "host_dm", sum.HostDMNs)})
	return s
}
