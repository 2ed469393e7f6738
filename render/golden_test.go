package render

import (
	"bytes"
	"flag"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/render from the renderers (only when a change of output is intended)")

// renderGolden compares what render wrote with testdata/render/name.
func renderGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.File(t, filepath.Join("../testdata/render", name), got, *update)
}

// TestRenderGoldens pins the bytes of the tables that no capture covers:
// the guest/host merge table, the hypervisor's per-image table and the
// peers table with members, a leader warning and the metric comparison.
func TestRenderGoldens(t *testing.T) {
	t.Run("merge", func(t *testing.T) {
		s := merge.Summary{Type: "merge_summary", V: merge.SchemaVersion,
			Clock: merge.Clock{OffsetNs: -1234567890, DriftPPM: 3.25, DriftErrorPPM: 12.5, ErrorNs: 41200, Consistent: false, Pairs: 180},
			Levels: []merge.Level{
				{Level: "L1 guest", Device: "254:1 ext4", P50Ns: 812345, P99Ns: 4100000, FlushesPerFsync: 1.5,
					Shares: []merge.Share{{Layer: "guest_fs_journal", Share: 0.12}, {Layer: "virtualization", Share: 0.0004}, {Layer: "host (L0)", Share: 0.61}}},
				{Level: "L0 host", Device: "/var/lib/vm.qcow2 (qcow2, cache=none, aio=native) on vda ext4", P50Ns: 400000, P99Ns: 2500000, FlushesPerFsync: 1,
					Shares: []merge.Share{{Layer: "host_device_flush", Share: 0.5}}},
			},
			GuestFsyncs: 200, Matched: 180, Unmatched: map[string]int{merge.ReasonNoHostFlush: 15, merge.ReasonNoGuestFlush: 5},
			GuestFlushes: 300, GuestFlushesMatched: 280, HostFlushes: 290, HostFlushesMatched: 280,
			Images:   []merge.Image{{Path: "/var/lib/vm.qcow2", Format: "qcow2", Cache: "none", AIO: "native", Threads: 4, Writes: 1000, IOSubmits: 900, Flushes: 290}},
			Warnings: []string{"image /var/lib/vm.qcow2: cache=none"}}
		var b bytes.Buffer
		if err := Merge(&b, &s); err != nil {
			t.Fatal(err)
		}
		renderGolden(t, "merge.txt", b.Bytes())
	})
	t.Run("hypervisor", func(t *testing.T) {
		s := merge.HostSummary{Type: "hv_summary", V: merge.SchemaVersion,
			Images: []merge.Image{
				{Path: "/var/lib/a.img", Format: "raw", Cache: "writeback", AIO: "threads", FS: "ext4", DevName: "vda", Writes: 10, Flushes: 3},
				{Path: "/var/lib/b.qcow2", Format: "qcow2", Cache: "none", AIO: "io_uring", FS: "xfs", IOUringReqs: 7, Flushes: 2},
			},
			Warnings: []string{"a warning"}, LostEvents: 1, MissedEvents: 2, FsyncLostEvents: 3, FsyncMissedEvents: 4, Unavailable: []analysis.Unavailable{{Probe: "probe", Text: "why"}}}
		fsyncs := []analysis.FsyncRecord{
			{Path: "/var/lib/a.img", TotalNs: 1e6, Layers: analysis.Layers{DeviceFlushNs: 6e5, JournalNs: 3e5, OtherNs: 1e5}},
			{Path: "/var/lib/a.img", TotalNs: 3e6, Layers: analysis.Layers{DeviceFlushNs: 2e6, DataWritebackNs: 1e6}},
		}
		ios := []merge.HostIO{
			{Path: "/var/lib/b.qcow2", Op: "io_uring_req", Opcode: 3, StartNs: 100, EndNs: 2100},
			{Path: "/var/lib/b.qcow2", Op: "io_uring_req", Opcode: 3, StartNs: 100, EndNs: 900100},
			{Path: "/var/lib/b.qcow2", Op: "io_uring_req", Opcode: 1, StartNs: 100, EndNs: 5e9},
		}
		var b bytes.Buffer
		if err := HostTable(&b, s, fsyncs, ios); err != nil {
			t.Fatal(err)
		}
		renderGolden(t, "hypervisor.txt", b.Bytes())
	})
	t.Run("peers", func(t *testing.T) {
		a, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
		rep := etcdmetric.PeersReport{Port: 2380, WindowSeconds: 120.04, Events: 4242, LostEvents: 7,
			Links: []peers.LinkStats{{Link: peers.Link{Direction: event.PeerActive, FromPID: 42, FromComm: "etcd", From: a, To: c, Peer: c},
				Opened: 30, Closed: 29, OpenedPerMinute: 15, ClosedPerMinute: 14.5,
				HandshakeRTT: stats.Summary{Count: 30, P50: 20e6, P99: 21500000}, SRTT: stats.Summary{Count: 2, P50: 20100000, Max: 20400000},
				MinRTT: stats.Summary{P50: 19900000}, PerRequest: stats.Summary{Count: 29, P50: 61e6, P99: 65e6}, Lifetime: stats.Summary{P50: 62e6}, Retransmits: 3}},
			MetricsURL: "http://127.0.0.1:2381/metrics", MetricsError: "end scrape: boom", MemberPID: 42,
			Members:       []etcdmetric.Member{{ID: 0xabc, Name: "m1", PeerIPs: []netip.Addr{a}}, {ID: 0xdef, Name: "m2", PeerIPs: []netip.Addr{c}, Leader: true}},
			LeaderWarning: "the leader is the farthest member",
			Metric: []etcdmetric.PeerComparison{
				{Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "def", Prober: "ROUND_TRIPPER_RAFT_MESSAGE"}, Observations: 8, Mean: 0.041, P50: 0.04, P99: 0.05,
					Input: etcdmetric.ModelInput{RTT: 20012345 * time.Nanosecond}, Prediction: etcdmetric.Prediction{Mean: 0.0405}, Inflation: 2.05, ModelInflation: 2.02,
					Explained: true, Verdict: "explained by the per-probe dial"}, Peer: c, Member: "m2"},
				{Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "abc"}, Observations: 3, Mean: 0.001, QuantileError: "too few observations",
					Verdict: "not explained"}},
			},
			Resets: []etcdmetric.Key{{To: "abc"}}}
		var b bytes.Buffer
		Peers(&b, &rep)
		renderGolden(t, "peers.txt", b.Bytes())
	})
}
