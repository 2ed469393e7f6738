package exporter

import (
	"sync/atomic"
	"time"
)

// The bounds on series, whatever the node runs. Any local user chooses its
// processes' comm and can open connections to port 2380 from any loopback
// address, so neither label may grow with what users do: 10,000 comms
// each doing one fsync made /metrics 239 MB before these bounds.
//
//   - At most MaxComms distinct comm values are exported at a time; fsyncs
//     of further comms are counted under comm="other".
//   - At most MaxFsyncLabelSets (comm, device, fs, file_kind, syscall) label
//     sets; past it a call is counted under comm, device and fs "other"
//     (file_kind and syscall have a handful of values).
//   - At most MaxPeers distinct peer values; further peers are "other".
//   - A label set (or peer) not observed for SeriesTTL is deleted, which
//     frees its place: its counters restart from 0 if it comes back, which
//     rate() reads as a reset.
//
// etcdscope_series_overflow_total counts observations that went to "other"
// because a bound was reached. With every bound reached, /metrics holds at
// most about 7 histograms × MaxFsyncLabelSets + 5 series × MaxPeers plus the
// self-metrics: a few MB of text.
const (
	MaxComms          = 16
	MaxFsyncLabelSets = 64
	MaxPeers          = 64
	SeriesTTL         = 15 * time.Minute
)

// OtherLabel is the label value that stands for everything over a bound.
const OtherLabel = "other"

// coarseClock is a Unix-seconds clock advanced at each scrape (and each new
// series): an observation stores it with one atomic load instead of
// calling time.Now, and expiry has the precision of the scrape interval.
type coarseClock struct{ sec atomic.Int64 }

func (c *coarseClock) now() int64 { return c.sec.Load() }

func (c *coarseClock) tick(t time.Time) int64 {
	s := t.Unix()
	c.sec.Store(s)
	return s
}

// expired reports whether a series last seen at seen (coarse seconds) is
// older than SeriesTTL at now.
func expired(seen, now int64) bool { return now-seen > int64(SeriesTTL/time.Second) }
