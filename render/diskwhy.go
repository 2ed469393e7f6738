package render

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/etcdscope/etcdscope/analysis"
)

// DiskWhyText words why a group got no disk verdict (analysis.DiskWhy),
// each share printed exactly enough to fall on its side of the threshold
// it is compared with ("device_flush 39.98%, under the 40% the floor
// verdict needs": the table rounds it to 40.0%); "" for nil.
func DiskWhyText(w *analysis.DiskWhy) string {
	if w == nil {
		return ""
	}
	if w.WouldRead != "" {
		s := "s"
		if w.Calls == 1 {
			s = ""
		}
		return fmt.Sprintf("%d call%s, and a disk verdict needs at least %d; the shares alone would read %s", w.Calls, s, analysis.DiskVerdictMinCalls, w.WouldRead)
	}
	flush, queue, top := w.DeviceFlushShare, w.BlockQueueShare, w.Largest
	// Each share printed once, exact enough against every threshold and
	// layer it is compared with.
	flushS := exactShare(flush, analysis.FloorMinFlushShare, top.Share, queue)
	queueS := exactShare(queue, analysis.FloorMaxQueueShare, analysis.ContentionMinQueueShare, flush)
	why := make([]string, 0, len(w.Misses))
	for _, m := range w.Misses {
		switch m {
		case analysis.MissFlushUnderFloor:
			why = append(why, fmt.Sprintf("device_flush %s, under the %.0f%% the floor verdict needs", flushS, 100*analysis.FloorMinFlushShare))
		case analysis.MissFlushNotLargest:
			why = append(why, fmt.Sprintf("device_flush %s not the largest layer (%s %s), as floor needs", flushS, top.Name, exactShare(top.Share, flush)))
		case analysis.MissQueueOverFloor:
			why = append(why, fmt.Sprintf("block_queue %s, not under the %.0f%% the floor verdict allows", queueS, 100*analysis.FloorMaxQueueShare))
		case analysis.MissQueueUnderContention:
			why = append(why, fmt.Sprintf("block_queue %s, under the %.0f%% the contention verdict needs", queueS, 100*analysis.ContentionMinQueueShare))
		case analysis.MissQueueUnderFlush:
			why = append(why, fmt.Sprintf("block_queue %s under device_flush %s, where contention needs no less", queueS, flushS))
		}
	}
	return strings.Join(why, "; ")
}

// exactShare prints share as a percentage with two decimals, or as many
// more (up to six) as it takes for the printed number to fall on the
// same side as share of each of the thresholds it is compared with:
// 39.999% against 40% is not printed "40.00%".
func exactShare(share float64, thresholds ...float64) string {
	for d := 2; ; d++ {
		s := strconv.FormatFloat(100*share, 'f', d, 64)
		v, _ := strconv.ParseFloat(s, 64)
		ok := true
		for _, t := range thresholds {
			// A threshold equal to share (the largest layer compared
			// with itself) is printed with the same digits: no side.
			ok = ok && (t == share || cmp.Compare(v/100, t) == cmp.Compare(share, t))
		}
		if ok || d == 6 {
			return s + "%"
		}
	}
}
