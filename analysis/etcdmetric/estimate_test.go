package etcdmetric

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// An excerpt with a # TYPE line and no +Inf/_count: expfmt builds a typed
// histogram whose sample count is unset. No +Inf bucket of 0 may be
// invented (that made the counts "fall" and hid the real problem): the
// total is unknown, so only lower bounds come out.
func TestTypedExcerptWithoutInf(t *testing.T) {
	text := `# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 10
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 50
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.004"} 100
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := Histograms(fams, WALFsync)
	if err != nil || len(ss) != 1 {
		t.Fatalf("%v %+v", err, ss)
	}
	s := ss[0]
	if s.HasCount || len(s.Buckets) != 3 {
		t.Fatalf("invented a count or a +Inf bucket: %+v", s)
	}
	e, err := s.Estimate(0.5)
	// total ≥ 100: 10 ≤ 1 ms < 50, so the median is above 1 ms.
	if err != nil || e.Interpolated || !e.TotalUnknown || e.Lo != 0.001 {
		t.Errorf("estimate %+v %v", e, err)
	}
	if _, err := s.Quantile(0.5); !errors.Is(err, ErrIncompleteLadder) {
		t.Errorf("quantile error %v", err)
	}
	// The same text through ParseText (TYPE lines dropped) reads alike.
	fams2, _, err := ParseText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	ss2, _ := Histograms(fams2, WALFsync)
	if len(ss2) != 1 || ss2[0].HasCount || len(ss2[0].Buckets) != 3 {
		t.Errorf("loose path: %+v", ss2)
	}
}

// _count without a +Inf line is the total: quantiles work, and one above
// the highest bucket shown is a lower bound, not a number.
func TestCountWithoutInf(t *testing.T) {
	s := Series{HasCount: true, Count: 200, FirstBound: 0.001, Buckets: []Bucket{{0.001, 100}, {0.002, 180}, {0.004, 190}}}
	if q, err := s.Quantile(0.5); err != nil || math.Abs(q-0.001) > 1e-12 {
		t.Errorf("p50 %v %v", q, err)
	}
	// rank 198 > 190: above le=0.004
	e, err := s.Estimate(0.99)
	if err != nil || e.Interpolated || !e.Unbounded || e.Lo != 0.004 || e.Reason != EstimateAboveLadder || e.AbovePct != 5 {
		t.Errorf("p99 %+v %v", e, err)
	}
	if _, err := s.Quantile(0.99); !errors.Is(err, ErrBeyondLadder) {
		t.Errorf("p99 error %v", err)
	}
}

// A ladder starting high is usable where its first bucket is empty; where
// the quantile falls in a populated first bucket only an upper bound is.
func TestLadderStartingHigh(t *testing.T) {
	s := Series{HasCount: true, Count: 10, FirstBound: 0.001, Buckets: []Bucket{{0.016, 0}, {0.032, 5}, {0.064, 10}, {math.Inf(1), 10}}}
	if q, err := s.Quantile(0.5); err != nil || math.Abs(q-0.032) > 1e-12 {
		t.Errorf("p50 %v %v", q, err)
	}
	s.Buckets[0].Count = 4
	e, err := s.Estimate(0.3)
	if err != nil || e.Interpolated || e.Hi != 0.016 || e.Lo != 0 {
		t.Errorf("p30 %+v %v", e, err)
	}
}

// The same To from two instances of a federated scrape stays two series
// (they used to be merged into one bucket list).
func TestFederatedKeptApart(t *testing.T) {
	text := `etcd_network_peer_round_trip_time_seconds_bucket{instance="a:2381",To="1",le="0.0001"} 1
etcd_network_peer_round_trip_time_seconds_bucket{To="1",instance="a:2381",le="+Inf"} 1
etcd_network_peer_round_trip_time_seconds_bucket{le="0.0001",instance="b:2381",To="1"} 0
etcd_network_peer_round_trip_time_seconds_bucket{instance="b:2381",To="1",le="+Inf"} 3
`
	sc, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Series) != 2 || sc.Series[0].Labels["instance"] != "a:2381" || sc.Series[1].Count != 3 {
		t.Errorf("series %+v", sc.Series)
	}
}

// Pasted text: curl's progress meter glued to # HELP, prompts, prose and
// a sample line expfmt refuses are dropped; the rest parses.
func TestParseTextNoise(t *testing.T) {
	text := "$ curl -s 127.0.0.1:2379/metrics | grep fsync\n" +
		"  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0# HELP etcd_disk_wal_fsync_duration_seconds x\n" +
		"```\n" +
		"> etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 1.5e+01\r\n" +
		"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 2e1\n" +
		"etcd_grpc_proxy_cache_hits_total \n" +
		"etcd_disk_wal_fsync_duration_seconds_count 20\n"
	fams, c, err := ParseText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := Histograms(fams, WALFsync)
	if len(ss) != 1 || ss[0].Count != 20 || ss[0].Buckets[0].Count != 15 {
		t.Errorf("series %+v", ss)
	}
	if c.Dropped != 2 || len(c.Rejected) != 1 {
		t.Errorf("cleaned %+v", c)
	}
}
