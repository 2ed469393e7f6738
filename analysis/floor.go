package analysis

import (
	"strings"
)

// Disk verdict kinds (DiskVerdict.Kind).
const (
	// DiskFloor: the calls' time is mostly the device's flushes, and
	// almost none of it waiting in the block queue: a fixed price per
	// flush that the disk charges whatever else runs on it.
	DiskFloor = "floor"
	// DiskContention: the calls' requests wait in the block queue behind
	// other I/O on the disk.
	DiskContention = "contention"
)

// Thresholds of the disk verdict, as shares of a group's summed wall time
// (docs/schema.md states them; TestDiskVerdict pins them).
const (
	// FloorMinFlushShare: device_flush must hold at least this share,
	// and more than any other layer, for a floor verdict.
	FloorMinFlushShare = 0.4
	// FloorMaxQueueShare: and block_queue less than this share. Above
	// it part of the cost is queueing, which other I/O does change.
	FloorMaxQueueShare = 0.1
	// ContentionMinQueueShare: block_queue at least this share, and at
	// least device_flush's, for a contention verdict.
	ContentionMinQueueShare = 0.3
	// DiskVerdictMinCalls: fewer calls in a group give no disk verdict (a
	// share of a handful of calls says little about the disk).
	DiskVerdictMinCalls = 10
	// DiskWhyMargin: a group with no verdict says why (Group.DiskWhy) when
	// device_flush or block_queue is within this share of a threshold it
	// must reach (40% less this for device_flush, 30% less this for
	// block_queue) or already past it. Farther off, no verdict is
	// expected and a line would be noise.
	DiskWhyMargin = 0.1
)

// DiskVerdict says whether a group's fsyncs pay a fixed price per flush
// (floor) or wait behind other I/O on the disk (contention), with the
// numbers it rests on. The field's lesson behind it: halving the load
// gave 30% back where the cost was the flush of a consumer drive without
// power-loss protection, not contention.
type DiskVerdict struct {
	Kind string `json:"kind"` // DiskFloor or DiskContention
	// DeviceFlushShare and BlockQueueShare are the two layers' shares
	// of the group's summed wall time (0..1), as in Group.Layers.
	DeviceFlushShare float64 `json:"device_flush_share"`
	BlockQueueShare  float64 `json:"block_queue_share"`
	// DeviceFlushP50Ns and BlockQueueP99Ns are the layers' per-call
	// p50 and p99 (ns), as in Group.Layers.
	DeviceFlushP50Ns int64 `json:"device_flush_p50_ns"`
	BlockQueueP99Ns  int64 `json:"block_queue_p99_ns"`
	// PerFlushNs is the device_flush time per flush or FUA write waited
	// on (its sum over Group.Flushes + Group.FUAWrites, ns): the price
	// of one; 0 when none was seen.
	PerFlushNs int64 `json:"per_flush_ns"`
	// LoopDevice: the disk is a loop device, which has no write cache: a
	// floor there is the loop driver's fsync of the backing file on the
	// host filesystem. Not in the JSON itself: its disk_verdict.text says
	// it (render.SummaryJSON), and ReadJSONL sets it again from the
	// group's dev_name.
	LoopDevice bool `json:"-"`
}

// diskLayers returns a group's device_flush and block_queue stats and its
// largest layer (the first of equal shares, in LayerNames order).
func diskLayers(g *Group) (flush, queue, largest LayerStat) {
	largest.Share = -1
	for _, l := range g.Layers {
		switch l.Name {
		case LayerDeviceFlush:
			flush = l
		case LayerBlockQueue:
			queue = l
		}
		if l.Share > largest.Share {
			largest = l
		}
	}
	return flush, queue, largest
}

// diskVerdict judges a group by its layers (nil: neither floor nor
// contention, or too few calls).
func diskVerdict(g *Group) *DiskVerdict {
	if g.Total.Count < DiskVerdictMinCalls {
		return nil
	}
	return judgeDisk(g)
}

// judgeDisk is diskVerdict's rule on the shares alone, whatever the
// number of calls (nil: neither floor nor contention, or no time).
func judgeDisk(g *Group) *DiskVerdict {
	if g.Total.Sum <= 0 {
		return nil
	}
	flush, queue, top := diskLayers(g)
	largest := top.Name
	v := DiskVerdict{DeviceFlushShare: flush.Share, BlockQueueShare: queue.Share,
		DeviceFlushP50Ns: flush.Stats.P50, BlockQueueP99Ns: queue.Stats.P99}
	if n := g.Flushes + g.FUAWrites; n > 0 {
		v.PerFlushNs = flush.Stats.Sum / n
	}
	switch {
	case largest == LayerDeviceFlush && flush.Share >= FloorMinFlushShare && queue.Share < FloorMaxQueueShare:
		v.Kind = DiskFloor
		v.LoopDevice = isLoopDev(g.Key.DevName)
	case queue.Share >= ContentionMinQueueShare && queue.Share >= flush.Share:
		v.Kind = DiskContention
	default:
		return nil
	}
	return &v
}

// isLoopDev reports whether name is a loop block device ("loop0", or a
// partition of one, "loop0p1"), as /sys/class/block names them.
func isLoopDev(name string) bool {
	rest, ok := strings.CutPrefix(name, "loop")
	return ok && rest != "" && rest[0] >= '0' && rest[0] <= '9'
}

// DiskMiss is one condition of the disk verdict a group missed
// (DiskWhy.Misses).
type DiskMiss int

// The conditions a group near a threshold can miss.
const (
	// MissFlushUnderFloor: device_flush under FloorMinFlushShare.
	MissFlushUnderFloor DiskMiss = iota + 1
	// MissFlushNotLargest: device_flush not the largest layer
	// (DiskWhy.Largest is).
	MissFlushNotLargest
	// MissQueueOverFloor: block_queue not under FloorMaxQueueShare.
	MissQueueOverFloor
	// MissQueueUnderContention: block_queue under
	// ContentionMinQueueShare.
	MissQueueUnderContention
	// MissQueueUnderFlush: block_queue under device_flush, where
	// contention needs no less.
	MissQueueUnderFlush
)

// DiskWhy says why a group got no disk verdict (Group.DiskWhy): too few
// calls for shares that would give one, or which conditions it missed
// with device_flush or block_queue within DiskWhyMargin of a threshold.
// The table and the page round shares (a 39.98% reads as 40.0%), so the
// words print them exactly (render.DiskWhyText).
type DiskWhy struct {
	// Calls and WouldRead: a group of fewer than DiskVerdictMinCalls
	// calls, one of them over etcd's WAL budget, whose shares alone
	// would read WouldRead (DiskFloor or DiskContention); "" otherwise.
	Calls     int64
	WouldRead string
	// Misses: the conditions missed, in the order of the rule.
	Misses []DiskMiss
	// The shares they were judged on, and the largest layer.
	DeviceFlushShare, BlockQueueShare float64
	Largest                           LayerStat
}

// diskWhy says which conditions of the disk verdict a group of at least
// DiskVerdictMinCalls calls with no verdict missed; and for a group of
// too few calls, one of them over etcd's WAL budget, whose shares would
// give a verdict, that it has too few. nil when the group has a
// verdict, too few calls, or neither layer within DiskWhyMargin of its
// threshold (floor's 40%, contention's 30%).
func diskWhy(g *Group) *DiskWhy {
	if g.Disk == nil && g.Total.Count > 0 && g.Total.Count < DiskVerdictMinCalls && g.Total.Max >= int64(WALFsyncBudget) {
		// Said only of a slow call whose shares would give a verdict:
		// every report has groups of one fast call (the WAL directory's
		// fsync), and a line on each would be noise.
		if v := judgeDisk(g); v != nil {
			return &DiskWhy{Calls: g.Total.Count, WouldRead: v.Kind}
		}
	}
	if g.Disk != nil || g.Total.Count < DiskVerdictMinCalls || g.Total.Sum <= 0 {
		return nil
	}
	flush, queue, top := diskLayers(g)
	w := DiskWhy{DeviceFlushShare: flush.Share, BlockQueueShare: queue.Share, Largest: top}
	if flush.Share >= FloorMinFlushShare-DiskWhyMargin {
		if flush.Share < FloorMinFlushShare {
			w.Misses = append(w.Misses, MissFlushUnderFloor)
		}
		if top.Name != LayerDeviceFlush {
			w.Misses = append(w.Misses, MissFlushNotLargest)
		}
		if queue.Share >= FloorMaxQueueShare {
			w.Misses = append(w.Misses, MissQueueOverFloor)
		}
	}
	if queue.Share >= ContentionMinQueueShare-DiskWhyMargin {
		if queue.Share < ContentionMinQueueShare {
			w.Misses = append(w.Misses, MissQueueUnderContention)
		}
		if queue.Share < flush.Share {
			w.Misses = append(w.Misses, MissQueueUnderFlush)
		}
	}
	if len(w.Misses) == 0 {
		return nil
	}
	return &w
}
