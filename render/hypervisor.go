package render

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// HostTable prints the report of `etcdscope hypervisor`: one row per image. Flush latencies cover the
// fdatasync/fsync calls and io_uring fsync requests (IORING_OP_FSYNC, 3);
// the layers only the calls (an io_uring fsync runs in an io-wq worker).
func HostTable(w io.Writer, s merge.HostSummary, fsyncs []analysis.FsyncRecord, ios []merge.HostIO) error {
	return escaped(w, func(w io.Writer) error { return hostTable(w, s, fsyncs, ios) })
}

func hostTable(w io.Writer, s merge.HostSummary, fsyncs []analysis.FsyncRecord, ios []merge.HostIO) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " image\t format\t cache\t aio\t on\t writes\t io_submit\t io_uring\t flushes\t flush p50 ms\t flush p99 ms\t host layers of the flushes (share)")
	for _, im := range s.Images {
		var lat []int64
		var sum analysis.Layers
		var total int64
		for _, r := range fsyncs {
			if r.Path == im.Path {
				lat = append(lat, r.TotalNs)
				total += r.TotalNs
				sum.JournalNs += r.Layers.JournalNs
				sum.DeviceFlushNs += r.Layers.DeviceFlushNs
				sum.DataWritebackNs += r.Layers.DataWritebackNs
				sum.BlockQueueNs += r.Layers.BlockQueueNs
				sum.OtherNs += r.Layers.OtherNs
			}
		}
		for _, r := range ios {
			if r.Path == im.Path && r.Op == "io_uring_req" && r.Opcode == 3 && r.EndNs >= r.StartNs {
				lat = append(lat, int64(r.EndNs-r.StartNs))
			}
		}
		st := stats.Summarize(lat)
		shares := ""
		if total > 0 {
			for _, name := range analysis.LayerNames {
				if v := sum.Get(name); v > 0 {
					shares += fmt.Sprintf("%s %.1f%% ", name, 100*float64(v)/float64(total))
				}
			}
		}
		on := im.FS
		if im.DevName != "" {
			on = im.DevName + " " + im.FS
		}
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\t %s\t %d\t %d\t %d\t %d\t %s\t %s\t %s\n", im.Path, im.Format, im.Cache, im.AIO, on,
			im.Writes, im.IOSubmits, im.IOUringReqs, im.Flushes, Ms(st.P50), Ms(st.P99), shares)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	fmt.Fprintf(w, "lost events: %d (hypervisor), %d (fsync); missed: %d (hypervisor), %d (fsync)\n", s.LostEvents, s.FsyncLostEvents, s.MissedEvents, s.FsyncMissedEvents)
	for _, u := range s.Unavailable {
		Unavailable(w, u)
	}
	return nil
}
