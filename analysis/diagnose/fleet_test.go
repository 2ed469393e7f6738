package diagnose

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestClusterOf(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"job": "etcd", "instance": "a:2381"}, `job="etcd"`},
		{map[string]string{"cluster": "prod", "cluster_name": "x", "job": "etcd"}, `cluster="prod",job="etcd"`},
		{map[string]string{"cluster_name": "x", "namespace": "kube-system", "job": "kube-etcd"}, `cluster_name="x",namespace="kube-system",job="kube-etcd"`},
		{map[string]string{"etcd_cluster": "events", "job": "etcd"}, `etcd_cluster="events",job="etcd"`},
		{map[string]string{"instance": "a:2381"}, ``},
	} {
		lbl, name := ClusterOf(c.labels)
		if name != c.want || len(lbl) != strings.Count(c.want, "=") {
			t.Errorf("ClusterOf(%v) = %v, %q; want %q", c.labels, lbl, name, c.want)
		}
	}
}

func TestFleetSelectors(t *testing.T) {
	for _, m := range []string{"", "{}", " { } "} {
		if s := FleetSelectors(m)[1]; s != `{__name__=~"etcd_disk_backend_commit_duration_seconds_(bucket|sum|count)"}` {
			t.Errorf("match %q: %s", m, s)
		}
	}
	if s := FleetSelectors(`{job="etcd", cluster=~"a|b"}`)[3]; !strings.HasSuffix(s, `etcd_server_is_leader",job="etcd", cluster=~"a|b"}`) {
		t.Errorf("with matchers: %s", s)
	}
}

func TestFleetRange(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, w := range []time.Duration{6 * time.Hour, 10*time.Second + 7*time.Millisecond, time.Millisecond} {
		start, end, step := FleetRange(until.Add(-w), until, FleetProbe{})
		if !end.Equal(until) || step%time.Millisecond != 0 || end.Sub(start) != FleetSteps*step || start.After(until.Add(-w)) || until.Add(-w).Sub(start) >= FleetSteps*time.Millisecond {
			t.Errorf("window %s: %s to %s step %s", w, start, end, step)
		}
	}
	// With the scrape interval known: a step of at most it, unless the
	// points per answer (members × fleetSeriesPerMember × steps) or
	// Prometheus' 11,000 per series would pass their bound.
	cases := []struct {
		w        time.Duration
		p        FleetProbe
		maxStep  time.Duration
		minSteps int
	}{
		// the walk: 5 min, a 7 s scrape, one member: 43 steps of ≤ 7 s
		{5 * time.Minute, FleetProbe{Members: 1, Interval: 7 * time.Second}, 7 * time.Second, 43},
		// a short window: never fewer than FleetSteps
		{10 * time.Second, FleetProbe{Members: 1, Interval: 7 * time.Second}, 10*time.Second/FleetSteps + time.Millisecond, FleetSteps},
		// 30 days at 1 s, one member: the points' bound (10,000 steps)
		{30 * 24 * time.Hour, FleetProbe{Members: 1, Interval: time.Second}, 30 * 24 * time.Hour / (FleetMaxPoints / fleetSeriesPerMember), FleetMaxPoints / fleetSeriesPerMember},
		// members unknown: Prometheus' bound
		{30 * 24 * time.Hour, FleetProbe{Interval: time.Second}, 30 * 24 * time.Hour / promMaxSteps, promMaxSteps},
		// 150 members over 6 h at 15 s: the points' bound
		{6 * time.Hour, FleetProbe{Members: 150, Interval: 15 * time.Second}, 6 * time.Hour / time.Duration(FleetMaxPoints/(150*fleetSeriesPerMember)), FleetMaxPoints / (150 * fleetSeriesPerMember)},
	}
	for _, c := range cases {
		start, end, step := FleetRange(until.Add(-c.w), until, c.p)
		steps := int(end.Sub(start) / step)
		if step > c.maxStep+time.Millisecond || steps < c.minSteps || step%time.Millisecond != 0 || start.After(until.Add(-c.w)) ||
			steps > promMaxSteps || c.p.Members*fleetSeriesPerMember*steps > max(FleetMaxPoints, c.p.Members*fleetSeriesPerMember*FleetSteps) {
			t.Errorf("window %s, %+v: %d steps of %s", c.w, c.p, steps, step)
		}
	}
}

// TestFleetProbe: the probe's raw samples give the scrape interval (the
// median gap: one late scrape does not move it) and the history held;
// no samples leave the grid at FleetSteps.
func TestFleetProbe(t *testing.T) {
	body := []byte(`{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"etcd_server_is_leader","instance":"a"},"values":[[100,"1"],[107,"1"],[114,"1"],[125,"1"],[132,"1"]]},
{"metric":{"__name__":"etcd_server_is_leader","instance":"b"},"values":[[103.5,"0"],[110.5,"0"]]}]}}`)
	p, err := ReadFleetProbe(body)
	if err != nil || p.Members != 2 || p.Interval != 7*time.Second || p.Held() != 32*time.Second || !p.First.Equal(time.Unix(100, 0).UTC()) {
		t.Errorf("%+v, %v", p, err)
	}
	if _, err := ReadFleetProbe([]byte("<html>")); !errors.Is(err, ErrNotPrometheus) {
		t.Errorf("html: %v", err)
	}
	if q := FleetProbeQuery(`{job="etcd"}`, time.Unix(0, 0), time.Unix(300, 0)); q != `{__name__="etcd_server_is_leader",job="etcd"}[300000ms]` {
		t.Errorf("probe query %s", q)
	}
	if q := FleetProbeQuery("", time.Unix(0, 0), time.Unix(86400, 0)); q != `{__name__="etcd_server_is_leader"}[3600000ms]` {
		t.Errorf("probe query over a day %s", q)
	}
}

// TestShortWindow: the --last the advice names lies within the history.
func TestShortWindow(t *testing.T) {
	for held, want := range map[time.Duration]time.Duration{0: 0, 400 * time.Millisecond: time.Second, 14500 * time.Millisecond: 14 * time.Second, 35 * time.Second: 30 * time.Second, 20 * time.Second: 20 * time.Second} {
		if got := shortWindow(held); got != want {
			t.Errorf("held %s: %s, want %s", held, got, want)
		}
	}
}

// matrix is a query_range answer: one series per labels string
// ("name{k=v,...}") with the values given at t = 1, 2, ...
func matrix(t *testing.T, series map[string][]float64) []byte {
	t.Helper()
	type res struct {
		Metric map[string]string `json:"metric"`
		Values [][]any           `json:"values"`
	}
	var rs []res
	for k, vs := range series {
		name, rest, _ := strings.Cut(k, "{")
		m := map[string]string{"__name__": name}
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if a, b, ok := strings.Cut(kv, "="); ok {
				m[a] = b
			}
		}
		r := res{Metric: m}
		for i, v := range vs {
			r.Values = append(r.Values, []any{float64(i + 1), fmt.Sprint(v)})
		}
		rs = append(rs, r)
	}
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": rs}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walSeries is one member's WAL ladder at two points: its bucket counts
// before and after (le 0.001 … 0.032, +Inf), the sum after (0 before).
func walSeries(lbl string, before, after []float64, sum float64) map[string][]float64 {
	out := map[string][]float64{}
	les := []string{"0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "+Inf"}
	for i, le := range les {
		out["etcd_disk_wal_fsync_duration_seconds_bucket{"+lbl+",le="+le+"}"] = []float64{before[i], after[i]}
	}
	out["etcd_disk_wal_fsync_duration_seconds_sum{"+lbl+"}"] = []float64{0, sum}
	out["etcd_disk_wal_fsync_duration_seconds_count{"+lbl+"}"] = []float64{before[len(les)-1], after[len(les)-1]}
	return out
}

// TestReadFleet: three clusters from one answer (by cluster label, by
// job), members by instance, ranked worst first; a counter that falls (a
// restart) counts its new value; MaxClusters cuts the best and names it.
func TestReadFleet(t *testing.T) {
	zero := []float64{0, 0, 0, 0, 0, 0, 0}
	fast := []float64{100, 100, 100, 100, 100, 100, 100} // all ≤ 1 ms
	slow := []float64{0, 0, 0, 0, 10, 100, 100}          // p99 in (16, 32] ms
	wal := map[string][]float64{}
	counters := map[string][]float64{}
	add := func(m map[string][]float64) {
		for k, v := range m {
			wal[k] = v
		}
	}
	for _, in := range []string{"a1", "a2", "a3"} {
		add(walSeries("cluster=a,job=etcd,instance="+in, zero, fast, 0.05))
		counters["etcd_server_leader_changes_seen_total{cluster=a,job=etcd,instance="+in+"}"] = []float64{4, 1, 2} // restarted: 1 + 1
	}
	add(walSeries("cluster=b,job=etcd,instance=b1", zero, slow, 2.5))
	add(walSeries("cluster=b,job=etcd,instance=b2", zero, fast, 0.05))
	add(walSeries("job=other,instance=c1", zero, fast, 0.05))
	counters["etcd_server_is_leader{cluster=b,job=etcd,instance=b2}"] = []float64{0, 1}
	answers := []PromAnswer{{Selector: "wal", Body: matrix(t, wal)}, {Selector: "counters", Body: matrix(t, counters)}}
	from := time.Unix(1, 0)
	fl, err := ReadFleet(answers, FleetOptions{Source: "http://p:9090", From: from, To: from.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range fl.Clusters {
		got = append(got, fmt.Sprintf("%s %s %d", c.Name, c.Severity, len(c.Report.Members)))
	}
	if want := []string{`cluster="b",job="etcd" bad 2`, `cluster="a",job="etcd" warn 3`, `job="other" ok 1`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("clusters %q, want %q", got, want)
	}
	b := fl.Clusters[0].Report
	if b.Members[0].Member != "b1" || b.Members[0].WAL.Observations != 100 || b.Members[0].WAL.Mean != 0.025 || b.Members[1].Leader != 1 {
		t.Errorf("cluster b members: %+v", b.Members)
	}
	for _, f := range fl.Clusters[1].Report.Findings {
		if f.Topic == "leader" && (f.Counter == nil || f.Counter.Max() != 2 || f.Counter.Window != time.Hour) {
			t.Errorf("cluster a leader changes: %+v", f.Counter)
		}
	}
	if fl.Queries[0].Series != len(wal) || fl.Cut != nil {
		t.Errorf("queries %+v, cut %+v", fl.Queries, fl.Cut)
	}

	fl, _ = ReadFleet(answers, FleetOptions{MaxClusters: 2})
	if len(fl.Clusters) != 2 || fl.Cut == nil || fl.Cut.Clusters != 1 || fl.Cut.Worst != OK || fl.Cut.Names[0] != `job="other"` {
		t.Errorf("MaxClusters 2: %d clusters, cut %+v", len(fl.Clusters), fl.Cut)
	}

	for _, body := range []string{"<html>hello</html>", `{"status":"success","data":{"resultType":"vector","result":[]}}`, `{"status":"error","errorType":"bad_data"}`} {
		if _, err := ReadFleet([]PromAnswer{{Selector: "wal", Body: []byte(body)}}, FleetOptions{}); !errors.Is(err, ErrNotPrometheus) {
			t.Errorf("%s: %v, want ErrNotPrometheus", body, err)
		}
	}
}
