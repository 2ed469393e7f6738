package exporter

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/render"
)

// LossLogEvery is how often serve writes one line per tracer that lost
// events or missed probe runs since the previous line: the loss of that
// interval, and the flag that fixes it.
const LossLogEvery = time.Minute

// logLoss writes, every interval until ctx ends, one line for each named
// source that lost events or missed probe runs in that interval, e.g.
// "etcdscope serve: fsync tracer lost 2210 events and missed 0 probe runs
// in the last 1m0s: raise --ring-size (now 2097152 bytes)", or that its
// loss is unknown when the count cannot be read. Nothing is written for an
// interval without loss.
func logLoss(ctx context.Context, w io.Writer, every time.Duration, ringBytes uint32, names []string, srcs []Source) {
	deltas := make([]analysis.LossDelta, len(srcs))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, s := range srcs {
			total, err := s.Lost()
			if err != nil {
				// Unknown is not 0: say so. The next readable total's
				// delta then covers the unreadable intervals too.
				fmt.Fprintf(w, "etcdscope serve: %s tracer's lost events unknown in the last %v: %v\n", names[i], every, err)
				continue
			}
			lost, missed := deltas[i].Since(total, s.Missed())
			if lost == 0 && missed == 0 {
				continue
			}
			fix := "raise --ring-size"
			if ringBytes != 0 {
				fix = fmt.Sprintf("raise --ring-size (now %d bytes)", ringBytes)
			}
			if lost == 0 {
				fix = render.MissedMeaning + ": calls or requests go unattributed; a bigger ring does not help"
			}
			fmt.Fprintf(w, "etcdscope serve: %s tracer lost %d events and missed %d probe runs in the last %v: %s\n",
				names[i], lost, missed, every, fix)
		}
	}
}
