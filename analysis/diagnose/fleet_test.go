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
		start, end, step := FleetRange(until.Add(-w), until)
		if !end.Equal(until) || step%time.Millisecond != 0 || end.Sub(start) != FleetSteps*step || start.After(until.Add(-w)) || until.Add(-w).Sub(start) >= FleetSteps*time.Millisecond {
			t.Errorf("window %s: %s to %s step %s", w, start, end, step)
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
