package etcdmetric

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, name string) (Scrape, error) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Parse(f)
}

func find(t *testing.T, sc Scrape, k Key) Series {
	t.Helper()
	for _, s := range sc.Series {
		if s.Key == k {
			return s
		}
	}
	t.Fatalf("no series %+v in %+v", k, sc.Series)
	return Series{}
}

func approx(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

// TestFixtureIssue11100 reads the excerpts pasted in etcd #11100 (builds
// labelling the prober as Name= or rtt_name=, bucket lists cut short).
func TestFixtureIssue11100(t *testing.T) {
	sc, err := parseFile(t, "etcd-issue-11100-prober-labels.prom")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Series) != 4 {
		t.Fatalf("%d series, want 4: %+v", len(sc.Series), sc.Series)
	}
	cases := []struct {
		key       Key
		mean      float64 // seconds; 0 = no sum/count in the excerpt
		count     float64
		ladderErr string
	}{
		{Key{"a169a2e70f66fc4c", "ROUND_TRIPPER_RAFT_MESSAGE"}, 0.003034, 17, "first bucket le=0.4096"},
		{Key{"72ad62cfd6d822de", "ROUND_TRIPPER_SNAPSHOT"}, 0.001401, 137, "first bucket le=3.2768"},
		{Key{"ad92111fb2982047", "ROUND_TRIPPER_RAFT_MESSAGE"}, 0, 0, "no +Inf bucket"},
		{Key{"1bc9350e1625b95e", "ROUND_TRIPPER_RAFT_MESSAGE"}, 0, 0, "no +Inf bucket"},
	}
	for _, c := range cases {
		s := find(t, sc, c.key)
		err := s.Ladder()
		if !errors.Is(err, ErrIncompleteLadder) || !strings.Contains(err.Error(), c.ladderErr) {
			t.Errorf("%v: ladder error %v, want %q", c.key, err, c.ladderErr)
		}
		if _, err := s.Quantile(0.5); !errors.Is(err, ErrIncompleteLadder) {
			t.Errorf("%v: Quantile interpolated an incomplete ladder (err %v)", c.key, err)
		}
		mean, ok := s.Mean()
		if c.mean == 0 {
			if ok {
				t.Errorf("%v: mean %v from an excerpt without sum/count", c.key, mean)
			}
			continue
		}
		if !ok || !approx(mean, c.mean, 0.001) {
			t.Errorf("%v: mean %v, want %v", c.key, mean, c.mean)
		}
		if s.Count != c.count {
			t.Errorf("%v: count %v, want %v", c.key, s.Count, c.count)
		}
	}
	// 137 observations of one prober at one per 30 s: about 68 minutes.
	s := find(t, sc, Key{"72ad62cfd6d822de", "ROUND_TRIPPER_SNAPSHOT"})
	if up := time.Duration(s.Count) * ObserveInterval; up < 68*time.Minute || up > 69*time.Minute {
		t.Errorf("uptime implied by the count: %v, want ~68 min", up)
	}
}

// TestRecorded36 reads two scrapes of member m0 of a 3-member TLS cluster
// of the etcd 3.6.16 built here, 40 s apart, the first 3 s after start.
func TestRecorded36(t *testing.T) {
	start, err := parseFile(t, "etcd-3.6.16-tls-loopback-start.prom")
	if !errors.Is(err, ErrNoMetric) {
		t.Fatalf("start scrape (before the first observation): err %v, want ErrNoMetric", err)
	}
	if start.ProcessStart.IsZero() {
		t.Fatal("process_start_time_seconds not read")
	}
	end, err := parseFile(t, "etcd-3.6.16-tls-loopback-end.prom")
	if err != nil {
		t.Fatal(err)
	}
	if end.Leader != 0 && end.Leader != 1 {
		t.Errorf("etcd_server_is_leader %d", end.Leader)
	}
	deltas, resets := DeltaScrapes(start, end)
	if len(deltas) != 2 || len(resets) != 0 {
		t.Fatalf("deltas %+v resets %v", deltas, resets)
	}
	d := deltas[0]
	if d.Key != (Key{To: "3d823c658ed0bde8"}) {
		t.Fatalf("first key %+v", d.Key)
	}
	if err := d.Ladder(); err != nil {
		t.Fatalf("complete 3.6 ladder rejected: %v", err)
	}
	if len(d.Buckets) != 17 {
		t.Errorf("%d buckets, want 16 + Inf", len(d.Buckets))
	}
	// 4 observations: two probers, at 5 s and 35 s after start.
	if d.Count != 4 {
		t.Errorf("count %v, want 4", d.Count)
	}
	mean, _ := d.Mean()
	if !approx(mean, 0.006345744/4, 1e-9) {
		t.Errorf("mean %v", mean)
	}
	// le=0.0008: 1, le=0.0016: 3 → rank 2 interpolates to 1.2 ms.
	if p50, _ := d.Quantile(0.5); !approx(p50, 0.0012, 1e-9) {
		t.Errorf("p50 %v, want 0.0012", p50)
	}
	// rank 3.96 in (0.0032, 0.0064] holding 1 → 0.0032 + 0.96·0.0032.
	if p99, _ := d.Quantile(0.99); !approx(p99, 0.006272, 1e-9) {
		t.Errorf("p99 %v, want 0.006272", p99)
	}
}

// Synthetic series shaped as other etcd versions emit them.
var (
	// etcd 3.4: HELP ends with a period, 16 buckets, label To only.
	v34 = `# HELP etcd_network_peer_round_trip_time_seconds Round-Trip-Time histogram between peers.
# TYPE etcd_network_peer_round_trip_time_seconds histogram
` + ladder34
	// etcd 3.5: no period; federated through Prometheus, so extra labels
	// come first and last; counts in scientific notation.
	v35 = `# HELP etcd_network_peer_round_trip_time_seconds Round-Trip-Time histogram between peers
# TYPE etcd_network_peer_round_trip_time_seconds histogram
` + ladder35
)

var ladder34, ladder35 = func() (string, string) {
	var a, b strings.Builder
	cum := 0.0
	for i := 0; i < 16; i++ {
		le := FirstBound * math.Pow(2, float64(i))
		// bimodal: 100 observations at ≤0.0002 s (reused connection), 100
		// at ≤0.0064 s (new TLS connection per probe)
		if i == 1 || i == 6 {
			cum += 100
		}
		a.WriteString(`etcd_network_peer_round_trip_time_seconds_bucket{To="8e9e05c52164694d",le="` + fmtG(le) + `"} ` + fmtG(cum) + "\n")
		b.WriteString(`etcd_network_peer_round_trip_time_seconds_bucket{instance="10.0.0.1:2379",To="8e9e05c52164694d",le="` + fmtG(le) + `",job="etcd"} ` + sci(cum) + "\n")
	}
	a.WriteString(`etcd_network_peer_round_trip_time_seconds_bucket{To="8e9e05c52164694d",le="+Inf"} 200` + "\n")
	a.WriteString(`etcd_network_peer_round_trip_time_seconds_sum{To="8e9e05c52164694d"} 0.52` + "\n")
	a.WriteString(`etcd_network_peer_round_trip_time_seconds_count{To="8e9e05c52164694d"} 200` + "\n")
	b.WriteString(`etcd_network_peer_round_trip_time_seconds_bucket{instance="10.0.0.1:2379",To="8e9e05c52164694d",le="+Inf",job="etcd"} 2e+02` + "\n")
	b.WriteString(`etcd_network_peer_round_trip_time_seconds_sum{job="etcd",To="8e9e05c52164694d",instance="10.0.0.1:2379"} 5.2e-01` + "\n")
	b.WriteString(`etcd_network_peer_round_trip_time_seconds_count{job="etcd",To="8e9e05c52164694d",instance="10.0.0.1:2379"} 2.0e+02` + "\n")
	return a.String(), b.String()
}()

func fmtG(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
func sci(f float64) string  { return fmt.Sprintf("%e", f) }

func TestOtherVersions(t *testing.T) {
	for name, text := range map[string]string{"3.4": v34, "3.5 federated, scientific notation": v35} {
		t.Run(name, func(t *testing.T) {
			sc, err := Parse(strings.NewReader(text))
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Series) != 1 {
				t.Fatalf("%d series: %+v", len(sc.Series), sc.Series)
			}
			s := sc.Series[0]
			if s.Key != (Key{To: "8e9e05c52164694d"}) {
				t.Errorf("key %+v (extra labels must not split the series)", s.Key)
			}
			if err := s.Ladder(); err != nil {
				t.Fatal(err)
			}
			if s.Count != 200 {
				t.Errorf("count %v", s.Count)
			}
			// Bimodal: the median sits at the top of the low hump, the p99
			// in the high one; the mean (2.6 ms) is in neither.
			p50, _ := s.Quantile(0.5)
			p99, _ := s.Quantile(0.99)
			mean, _ := s.Mean()
			if !approx(p50, 0.0002, 1e-9) || !approx(p99, 0.0032+0.0032*98/100, 1e-9) || !approx(mean, 0.0026, 1e-9) {
				t.Errorf("p50 %v p99 %v mean %v", p50, p99, mean)
			}
		})
	}
}

// TestOldLadder: etcd 3.2/3.3 had 14 buckets (to 0.8192 s): complete.
func TestOldLadder(t *testing.T) {
	s := Series{HasCount: true, HasSum: true, Count: 1, Sum: 0.001}
	for i := 0; i < 14; i++ {
		s.Buckets = append(s.Buckets, Bucket{FirstBound * math.Pow(2, float64(i)), 1})
	}
	s.Buckets = append(s.Buckets, Bucket{math.Inf(1), 1})
	if err := s.Ladder(); err != nil {
		t.Fatal(err)
	}
	gap := s
	gap.Buckets = append(append([]Bucket{}, s.Buckets[:3]...), s.Buckets[4:]...)
	if err := gap.Ladder(); !errors.Is(err, ErrIncompleteLadder) {
		t.Errorf("ladder with a missing bucket accepted: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse(strings.NewReader("<html>502 Bad Gateway</html>\n")); err == nil {
		t.Error("HTML parsed as metrics")
	}
	if _, err := Parse(strings.NewReader("go_goroutines 12\n")); !errors.Is(err, ErrNoMetric) {
		t.Errorf("metrics without the peer RTT: %v", err)
	}
}

func TestDeltaReset(t *testing.T) {
	start := Series{Key: Key{To: "a"}, Count: 10, Sum: 1, HasCount: true, HasSum: true, Buckets: []Bucket{{0.0001, 10}, {math.Inf(1), 10}}}
	end := Series{Key: Key{To: "a"}, Count: 2, Sum: 0.1, HasCount: true, HasSum: true, Buckets: []Bucket{{0.0001, 2}, {math.Inf(1), 2}}}
	d, reset := Delta(&start, end)
	if !reset || d.Count != 2 {
		t.Errorf("restart not detected: %+v %v", d, reset)
	}
	end2 := Series{Key: Key{To: "a"}, Count: 14, Sum: 1.5, HasCount: true, HasSum: true, Buckets: []Bucket{{0.0001, 12}, {math.Inf(1), 14}}}
	d, reset = Delta(&start, end2)
	if reset || d.Count != 4 || d.Buckets[0].Count != 2 || d.Buckets[1].Count != 4 || !approx(d.Sum, 0.5, 1e-9) {
		t.Errorf("delta %+v reset %v", d, reset)
	}
}

func TestModel(t *testing.T) {
	us := time.Microsecond
	ms := time.Millisecond
	cases := []struct {
		name      string
		in        ModelInput
		metric    float64 // observed mean, s
		wantMean  float64 // steady-state model mean, s
		explained bool
	}{{
		// 50 ms WAN, TLS 1.3: new connection = handshake + TLS (1 RTT +
		// 2 ms of crypto and certificate reads) + request = 3 RTT + 2 ms.
		name:      "WAN 50 ms: the metric reads ~2x",
		in:        ModelInput{RTT: 50 * ms, ReusedProbe: 50*ms + 300*us, NewConnProbe: 152 * ms, NewConnPerMinute: 15},
		metric:    0.100,
		wantMean:  (0.0503 + 0.152) / 2,
		explained: true,
	}, {
		name:      "loopback plain: 0.7 ms from a 30 µs RTT",
		in:        ModelInput{RTT: 30 * us, ReusedProbe: 150 * us, NewConnProbe: 1250 * us, NewConnPerMinute: 15},
		metric:    0.0007,
		wantMean:  0.0007,
		explained: true,
	}, {
		name:      "loopback TLS: 3 ms, most of it the TLS handshake with certificate re-reads",
		in:        ModelInput{RTT: 30 * us, ReusedProbe: 200 * us, NewConnProbe: 5800 * us, NewConnPerMinute: 15},
		metric:    0.003,
		wantMean:  0.003,
		explained: true,
	}, {
		name:      "slow DNS before every dial (etcd #11781): not explained",
		in:        ModelInput{RTT: 30 * us, ReusedProbe: 200 * us, NewConnProbe: 5800 * us, NewConnPerMinute: 15},
		metric:    0.500,
		wantMean:  0.003,
		explained: false,
	}, {
		name:      "no new connections: the metric should read the reused-connection time",
		in:        ModelInput{RTT: 1 * ms, ReusedProbe: 1200 * us, NewConnPerMinute: 0},
		metric:    0.0012,
		wantMean:  0.0012,
		explained: true,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Predict(c.in)
			if !approx(p.SteadyMean, c.wantMean, 0.01) || !approx(p.Mean, c.wantMean, 0.01) {
				t.Errorf("model mean %v steady %v, want %v", p.Mean, p.SteadyMean, c.wantMean)
			}
			// a metric series built from the observed mean
			s := Series{Key: Key{To: "x"}, HasCount: true, HasSum: true, Count: 10, Sum: 10 * c.metric}
			cmp := Compare(s, c.in)
			if cmp.Explained != c.explained {
				t.Errorf("explained %v, want %v: kind %v", cmp.Explained, c.explained, cmp.Kind)
			}
			if cmp.QuantileError == "" {
				t.Error("quantiles from a series without buckets")
			}
			t.Log(cmp.Kind, cmp.Ratio)
		})
	}
}

// TestModelWarmup: the EWMA starts at 0, so the first observations read
// low: at 5 s one probe has been made (1/8 of the value), at 35 s eight.
func TestModelWarmup(t *testing.T) {
	in := ModelInput{RTT: 30 * time.Microsecond, ReusedProbe: 200 * time.Microsecond, NewConnProbe: 5800 * time.Microsecond,
		NewConnPerMinute: 15, UptimeStart: 3 * time.Second, UptimeEnd: 43 * time.Second}
	p := Predict(in)
	if p.Observations != 4 {
		t.Errorf("%v observations, want 4 (2 probers × {5 s, 35 s})", p.Observations)
	}
	// The dialing prober: 5.8 ms·(1 − 0.875^n). The kept-alive one: its
	// first probe dials too (5.8 ms), then 0.2 ms per probe.
	newAt := func(n float64) float64 { return 0.0058 * (1 - math.Pow(0.875, n)) }
	reusedAt8 := 0.0058*0.125*math.Pow(0.875, 7) + 0.0002*(1-math.Pow(0.875, 7))
	want := (newAt(1) + newAt(8) + 0.0058*0.125 + reusedAt8) / 4
	if !approx(p.Mean, want, 1e-6) {
		t.Errorf("mean %v, want %v", p.Mean, want)
	}

	// Replaying a slow first probe (30 ms, as a cluster's first TLS dial
	// can be) moves the first observation: srtt = 0.125·30 ms.
	in.NewConnSeries = []UptimeSample{{4 * time.Second, 30 * time.Millisecond}}
	for k := 2; k <= 10; k++ {
		in.NewConnSeries = append(in.NewConnSeries, UptimeSample{time.Duration(k) * 4 * time.Second, 5800 * time.Microsecond})
	}
	rep := Predict(in)
	ewma := 0.0
	for k := 1; k <= 8; k++ {
		v := 0.0058
		if k == 1 {
			v = 0.030
		}
		ewma = 0.875*ewma + 0.125*v
	}
	want = (0.125*0.030 + ewma + 0.0058*0.125 + reusedAt8) / 4
	if !approx(rep.Mean, want, 1e-6) {
		t.Errorf("replayed mean %v, want %v", rep.Mean, want)
	}
}

// TestNewConnFasterThanKeptAlive: a new connection's probe timed by the
// kernel can read faster than the kept-alive probe timed over HTTP; the
// model then says new connections add nothing, never a negative time
// (a run printed "new-connection probes add -87533µs").
func TestNewConnFasterThanKeptAlive(t *testing.T) {
	in := ModelInput{RTT: 50 * time.Millisecond, ReusedProbe: 140 * time.Millisecond, NewConnProbe: 52 * time.Millisecond,
		NewConnPerMinute: 15}
	p := Predict(in)
	if p.NewConnShare != 0 || p.NewConnProbers != 1 {
		t.Fatalf("new-connection share %v with %v dialing probers, want 0 and 1", p.NewConnShare, p.NewConnProbers)
	}
	c := Compare(series(8, 0.1), in)
	if !c.NewConnAddsNothing {
		t.Errorf("new connections add something: %+v", c)
	}
}
