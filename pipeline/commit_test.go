package pipeline

import (
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// scrapeOf parses a /metrics text with a WAL fsync histogram (count,
// sum seconds) and, when rttCount > 0, a peer RTT histogram toward "To".
func scrapeOf(t *testing.T, fsyncCount int, fsyncSum float64, to string, rttCount int, rttSum float64) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation) // as etcdinfo.Families parses a scrape
	fams, err := p.TextToMetricFamilies(strings.NewReader(metricsText(fsyncCount, fsyncSum, to, rttCount, rttSum)))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricsText is the /metrics text scrapeOf parses.
func metricsText(fsyncCount int, fsyncSum float64, to string, rttCount int, rttSum float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n")
	fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} %d\n", fsyncCount)
	fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_sum %g\netcd_disk_wal_fsync_duration_seconds_count %d\n", fsyncSum, fsyncCount)
	if rttCount > 0 {
		fmt.Fprintf(&b, "# TYPE etcd_network_peer_round_trip_time_seconds histogram\n")
		fmt.Fprintf(&b, "etcd_network_peer_round_trip_time_seconds_bucket{To=%q,le=\"+Inf\"} %d\n", to, rttCount)
		fmt.Fprintf(&b, "etcd_network_peer_round_trip_time_seconds_sum{To=%q} %g\n", to, rttSum)
		fmt.Fprintf(&b, "etcd_network_peer_round_trip_time_seconds_count{To=%q} %d\n", to, rttCount)
	}
	return b.String()
}

// TestModelInputShortRun: etcd observes the peer RTT once per 30 s per
// prober, so a run shorter than that can hold no RTT observation toward
// a follower that fsynced all along. It is up (the scenarios' 6.8 s phase
// read it as down and the model lost its vote): its RTT is the mean since
// etcd started, named as such. A follower that fsynced nothing is down.
func TestModelInputShortRun(t *testing.T) {
	const leader, up, dead = 1, 2, 3
	members := []etcdmetric.Member{{ID: leader, Leader: true}, {ID: up}, {ID: dead}}
	res := &CommitResult{LocalID: leader, LeaderID: leader, Cluster: commit.ClusterState{Names: commit.Names{leader: "m1", up: "m2", dead: "m3"}}}
	start := map[uint64]map[string]*dto.MetricFamily{
		leader: scrapeOf(t, 100, 0.2, "2", 4, 0.2), // 4 RTTs of 50 ms before the run
		up:     scrapeOf(t, 100, 0.3, "", 0, 0),
		dead:   scrapeOf(t, 50, 0.1, "", 0, 0),
	}
	end := map[uint64]map[string]*dto.MetricFamily{
		leader: scrapeOf(t, 140, 0.28, "2", 4, 0.2), // none during the run
		up:     scrapeOf(t, 140, 0.42, "", 0, 0),
		dead:   scrapeOf(t, 50, 0.1, "", 0, 0),
	}
	in, err := modelInput(members, res, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Followers) != 2 {
		t.Fatalf("followers %+v", in.Followers)
	}
	for _, f := range in.Followers {
		switch f.ID {
		case up:
			if f.Down {
				t.Errorf("follower m2 fsynced during the run but reads down: %+v", f)
			}
			if f.RTT.Ns != 50e6 || f.RTT.From == nil || f.RTT.From.Window != commit.WindowSinceStart || !f.RTT.From.Prober {
				t.Errorf("m2's RTT %d ns from %+v, want 50 ms since etcd started, by etcd's prober", f.RTT.Ns, f.RTT.From)
			}
			if f.Fsync.Ns != 3e6 {
				t.Errorf("m2's fsync %d ns, want the run's mean 3 ms", f.Fsync.Ns)
			}
		case dead:
			if !f.Down {
				t.Errorf("follower m3 fsynced nothing during the run and has no RTT, but is not down: %+v", f)
			}
		}
	}
	if in.LeaderWAL.Ns != 2e6 {
		t.Errorf("leader WAL %d ns, want 2 ms", in.LeaderWAL.Ns)
	}
}

// TestPromSeries: a model source names its series as PromQL does, not as
// Go prints a map (`..._secondsmap[To:28d1...]` before).
func TestPromSeries(t *testing.T) {
	if got := promSeries("etcd_disk_wal_fsync_duration_seconds", nil); got != "etcd_disk_wal_fsync_duration_seconds" {
		t.Errorf("no labels: %q", got)
	}
	got := promSeries("etcd_network_peer_round_trip_time_seconds", map[string]string{"To": "28d1a2b3", "Le": `a"b`})
	if want := `etcd_network_peer_round_trip_time_seconds{Le="a\"b",To="28d1a2b3"}`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	start := map[string]*dto.MetricFamily{}
	end := scrapeOf(t, 0, 0, "28d1", 2, 0.1)
	m, ok := histMean(start, end, "etcd_network_peer_round_trip_time_seconds", map[string]string{"To": "28d1"}, commit.WindowRun, "m1")
	want := commit.MetricSource{Series: `etcd_network_peer_round_trip_time_seconds{To="28d1"}`, Window: commit.WindowRun, Member: "m1"}
	if !ok || m.Ns != 50e6 || m.From == nil || *m.From != want || m.Source != "" {
		t.Errorf("histMean: %+v %v", m, ok)
	}
}
