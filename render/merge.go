package render

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/etcdscope/etcdscope/analysis/merge"
)

// Merge prints the summary of `etcdscope merge`: the per-level table, the
// clock fit, the match counts with the reasons for unmatched fsyncs, and
// warnings (WordMerge words those it has as numbers).
func Merge(w io.Writer, s *merge.Summary) error {
	worded := *s
	WordMerge(&worded)
	return escaped(w, func(w io.Writer) error { return mergeTable(w, &worded) })
}

func mergeTable(w io.Writer, s *merge.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " level\t device / filesystem\t p50 ms\t p99 ms\t flushes per fsync\t layers (share of guest fsync time)")
	for _, l := range s.Levels {
		var parts []string
		for _, sh := range l.Shares {
			if sh.Share >= 0.0005 {
				parts = append(parts, fmt.Sprintf("%s %.1f%%", sh.Layer, 100*sh.Share))
			}
		}
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\t %.2f\t %s\n", l.Level, l.Device, Ms(l.P50Ns), Ms(l.P99Ns), l.FlushesPerFsync, strings.Join(parts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := s.Clock
	cons := "every pair fits one offset"
	if !c.Consistent {
		cons = "no single offset fits every pair: windows widened by the misfit"
	}
	if s.Durability != "" {
		// Nothing to pair: no clock.
		fmt.Fprintf(w, "\nDURABILITY: %s\n", s.Durability)
	} else {
		fmt.Fprintf(w, "\nclock: host = guest %+.6f s, drift %+.1f ±%.1f ppm, error ±%.1f µs over %d pairs (%s)\n",
			float64(c.OffsetNs)/1e9, c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Pairs, cons)
	}
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
	if s.Unmatched[merge.ReasonNoHostFlush] > 0 {
		fmt.Fprintln(w, "no_host_flush: no host flush inside the guest flush window (QEMU skips the host flush when nothing was written since the last; or host events were lost)")
	}
	if s.Unmatched[merge.ReasonHostDropsFlushes] > 0 {
		fmt.Fprintln(w, "host_drops_flushes: the host never flushed the image: QEMU completes the guest's flushes without touching the host (cache=unsafe): their device time is all virtualization")
	}
	if s.Unmatched[merge.ReasonNoGuestFlush] > 0 {
		fmt.Fprintln(w, "no_guest_flush: the fsync issued no flush request of its own: nothing to match")
	}
	for _, im := range s.Images {
		fmt.Fprintf(w, "image %s: format %s, cache=%s%s, aio=%s, %s, %d writes, %d io_submit, %d io_uring requests, %d flushes\n",
			im.Path, im.Format, im.Cache, cacheFrom(im), im.AIO, threads(im), im.Writes, im.IOSubmits, im.IOUringReqs, im.Flushes)
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	return nil
}

// threads says how many threads did I/O on an image: at least that many
// when the calls of some were not counted (merge.MaxHostThreads).
func threads(im merge.Image) string {
	if im.ThreadsNotCounted > 0 {
		return fmt.Sprintf("%d threads or more (%d calls of threads past merge.MaxHostThreads not counted)", im.Threads, im.ThreadsNotCounted)
	}
	return fmt.Sprintf("%d threads", im.Threads)
}

// cacheFrom names where an image's cache mode came from, when QEMU's
// command line gave it (open flags cannot tell unsafe from writeback).
func cacheFrom(im merge.Image) string {
	if im.CacheFrom == merge.CacheFromCommandLine {
		return " (command line)"
	}
	return ""
}

// MergeWarning words one known-bad pairing of an image (the table's
// WARNING lines and the summaries' warnings[]).
func MergeWarning(w merge.Warning) string {
	switch w.Kind {
	case merge.WarnCacheUnsafe:
		return fmt.Sprintf("%s: cache=unsafe (QEMU's command line): durability: none — guest flushes are dropped; a host crash or power loss loses what etcd counted as committed; use cache=none", w.Image)
	case merge.WarnNeverFlushed:
		return fmt.Sprintf("%s: written %d times and never flushed in this recording: the guest did not flush, or QEMU drops its flushes (cache=unsafe, cache.no-flush=on: durability none); QEMU's command line did not say which", w.Image, w.Writes)
	case merge.WarnIOUringBlockdev:
		return fmt.Sprintf("%s: aio=io_uring on a block device (%s): io_uring over LVM/raw block devices is known to be slower than aio=native; use cache=none,aio=native", w.Image, w.Dev)
	case merge.WarnNativeBuffered:
		return fmt.Sprintf("%s: aio=native without O_DIRECT: Linux AIO on buffered files blocks in io_submit; use cache=none with aio=native", w.Image)
	case merge.WarnOpaqueBelow:
		return fmt.Sprintf("%s: on %s %s: its flushes leave the kernel's block layer (a user-space daemon or a server), so the host layers under each fdatasync are not seen: their time shows as host_other", w.Image, w.FS, w.Dev)
	case merge.WarnReplicated:
		return fmt.Sprintf("%s: on a replicated storage layer (%s %s) under etcd, which already replicates every write through Raft: each commit pays for the copies of both layers", w.Image, w.FS, w.Dev)
	}
	return fmt.Sprintf("%s: warning %d", w.Image, w.Kind)
}

// MergeWarnings words merge.Warnings(images), nil when there is none.
func MergeWarnings(images []merge.Image) []string {
	var out []string
	for _, w := range merge.Warnings(images) {
		out = append(out, MergeWarning(w))
	}
	return out
}

// WordMerge fills s's words from its numbers, as the table and `etcdscope
// merge --output json` give them: Durability from DroppedBy, Warnings from
// Images. Words a summary already holds (one read back) stay.
func WordMerge(s *merge.Summary) {
	if s.DroppedBy != "" && s.Durability == "" {
		s.Durability = fmt.Sprintf("none: guest flushes are dropped: the host wrote %s but never flushed it while the guest issued %d flushes (cache=unsafe or cache.no-flush=on)", s.DroppedBy, s.GuestFlushes)
	}
	if s.Warnings == nil {
		s.Warnings = MergeWarnings(s.Images)
	}
	s.Levels = slices.Clone(s.Levels) // s may be a copy whose rows are the caller's
	for i := range s.Levels {
		if l := &s.Levels[i]; l.Image != nil && l.Device == "" {
			im := l.Image
			l.Device = fmt.Sprintf("%s (%s, cache=%s, aio=%s) on %s %s", im.Path, im.Format, im.Cache, im.AIO, im.DeviceName(), im.FS)
		}
	}
}
