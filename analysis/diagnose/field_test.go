package diagnose

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type want struct {
	topic    string
	severity Severity
	summary  string // substring of the summary
}

// TestFieldInputs runs the diagnosis on real inputs from public etcd and
// Kubernetes reports (testdata/README.md cites each) and checks what a
// careful engineer concludes from each, worked out by hand there.
func TestFieldInputs(t *testing.T) {
	cases := []struct {
		file  string
		kind  Kind
		wants []want
	}{
		{"etcd-9407-old-name-scientific.prom", KindMetrics, []want{{"wal_fsync", Bad, "p99 ≈ 14.93ms"}}},
		{"etcd-8586-old-name-cut.txt", KindMetrics, []want{{"wal_fsync", Bad, "p99 > 128.00ms"}}},
		{"etcd-9561-gap.txt", KindMetrics, []want{{"wal_fsync", Bad, "p99 652.78ms"}}},
		{"k8s-34709-wal.prom", KindMetrics, []want{{"wal_fsync", Bad, "p99 31.48ms"}, {"backend_commit", Unknown, "no finite buckets"}}},
		{"etcd-5870-excerpt-high.txt", KindMetrics, []want{{"wal_fsync", Unknown, "so no bound can be placed; the buckets shown count at least 223 over 0.064 s and 1 over 4.096 s"}}},
		{"etcd-5870-full.prom", KindMetrics, []want{{"wal_fsync", Bad, "p99 32.90ms"}}},
		{"etcd-9593-curl-noise.txt", KindMetrics, []want{{"backend_commit", Unknown, "total is unknown (at least 9)"}}},
		{"etcd-11100-prober-labels.prom", KindMetrics, []want{{"peer_rtt", OK, "kept-alive prober"}, {"peer_rtt", OK, "new-connection prober"}}},
		{"etcd-11884-peer-bimodal.txt", KindMetrics, []want{{"peer_rtt", Warn, "RTT ≤ 800µs"}}},
		{"etcd-15579-peer-bimodal.txt", KindMetrics, []want{{"peer_rtt", Warn, "(25.60ms–51.20ms]"}}},
		{"etcd-11100-upstream-peer.txt", KindMetrics, []want{{"peer_rtt", OK, "(1.60ms–3.20ms]"}}},
		{"etcd-10080-peer-one.txt", KindMetrics, []want{{"peer_rtt", OK, "one hump (400µs–800µs]"}}},
		{"etcd-7312-heartbeat.log", KindLog, []want{{"heartbeat", Warn, "2 leader stall(s); longest gap between heartbeats 489ms"}}},
		{"etcd-13346-heartbeat-leader.log", KindLog, []want{{"heartbeat", Bad, "gap between heartbeats 1.018s"}, {"leader", Warn, "over 1 term"}}},
		{"etcd-5870-syslog.log", KindLog, []want{{"heartbeat", Bad, "1.149s (2×200ms heartbeat interval + 749ms exceeded)"}, {"apply", OK, "the longest 12.6ms"}}},
		{"etcd-10215-wal-sync.log", KindLog, []want{{"slow_fdatasync", Bad, "12 WAL fdatasync calls logged over etcd's 1 s warning, the longest 7.645s"}}},
		{"dailywork-13-syslog.log", KindLog, []want{{"slow_fdatasync", Bad, "5 WAL fdatasync calls"}, {"apply", Warn, "the longest 731ms"}}},
		{"minikube-9668-mixed.log", KindLog, []want{{"slow_fdatasync", Bad, "2 WAL fdatasync calls logged over etcd's 1 s warning, the longest 2.118s"}, {"leader", Warn, "over 1 term"}}},
		{"zap-juejin-heartbeat.log", KindLog, []want{{"slow_fdatasync", Bad, "the longest 1.263s"}, {"heartbeat", Warn, "261ms (2×100ms heartbeat interval + 61ms exceeded)"}}},
		{"etcd-5870-docker-json.log", KindLog, []want{{"heartbeat", Warn, "longest gap between heartbeats 3.851s (2×1s heartbeat interval + 1.851s exceeded); 0 stall(s) reached the 5s election timeout"}}},
		{"rke-2295-wal-from-2ms.txt", KindMetrics, []want{{"wal_fsync", Bad, "WAL fsync p99 227.26ms (in the bucket 128.00ms–256.00ms"}}},
		{"etcd-12405-node.prom", KindMetrics, []want{{"wal_fsync", Bad, "p99 17.44ms"}}},
		{"etcd-15247-zap-apply.log", KindLog, []want{{"apply", Warn, "the longest 4.999s"}}},
		{"ibm-blog-fio.txt", KindFioText, []want{{"fio", Warn, "fdatasync p99 2.38ms"}}},
		{"k8s-homelab-fio.txt", KindFioText, []want{{"fio", OK, "fdatasync p99 260µs"}}},
		{"fio-etcdcheck-buildhost.json", KindFioJSON, []want{{"fio", Warn, "fdatasync p99 6.65ms: under etcd's 10 ms WAL budget"}}},
		{"fio-878-no-sync-shown.txt", KindFioText, []want{{"fio", Unknown, "the job synced (fdatasync=1) but this output shows no sync latency"}}},
		{"openshift-etcd-suite-hdd.txt", KindFioText, []want{{"fio", Bad, "fdatasync p99 268ms: over etcd's 10 ms WAL budget"}}},
		{"openshift-etcd-perf-hdd.txt", KindFioText, []want{{"fio", Bad, "fdatasync p99 692ms: over etcd's 10 ms WAL budget"}}},
		{"fio-libaio-interrupted.json", KindFioJSON, []want{{"fio", Warn, "this fio run made no fsync/fdatasync"}}},
		{"fio31-read-only.json", KindFioJSON, []want{{"fio", Warn, "this fio job only reads (rw=read)"}}},
		{"etcd-tools-annotated-fio.txt", KindFioText, []want{{"fio", Bad, "fdatasync p99 38ms: over etcd's 10 ms WAL budget"}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			if k, err := Detect(data); err != nil || k != c.kind {
				t.Fatalf("detected %q (%v), want %q", k, err, c.kind)
			}
			rep, err := Diagnose([]Input{{Name: c.file, Data: data}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.wants {
				found := false
				for _, f := range rep.Findings {
					if f.Topic == w.topic && f.Severity == w.severity && strings.Contains(f.Summary, w.summary) {
						found = true
					}
				}
				if !found {
					t.Errorf("no %s finding [%s] with %q; findings:", w.topic, w.severity, w.summary)
					for _, f := range rep.Findings {
						t.Logf("  %s [%s] %s", f.Topic, f.Severity, f.Summary)
					}
				}
			}
		})
	}
}

func approx(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

// TestFieldNumbers checks the numbers behind the verdicts, by hand.
func TestFieldNumbers(t *testing.T) {
	read := func(name string) []MemberWindow {
		t.Helper()
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ReadMetrics(Input{Name: name, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return Members(sc)
	}
	// etcd #9407: pre-3.0 name, scientific notation, +Inf but no _count.
	w := read("etcd-9407-old-name-scientific.prom")[0]
	if w.WALName != "etcd_wal_fsync_durations_seconds" {
		t.Errorf("WAL metric name %q", w.WALName)
	}
	h := Stats(w.WAL)
	// rank 0.99·56055631 = 55495074.7 in (8 ms, 16 ms] holding 976768.
	if !h.HasCount || h.Observations != 56055631 || !approx(h.P99.Value, 0.008+0.008*(55495074.69-54649043)/976768, 1e-6) {
		t.Errorf("9407: n %v p99 %+v", h.Observations, h.P99)
	}
	if !approx(h.Mean, 329832.62183343136/56055631, 1e-9) {
		t.Errorf("9407 mean %v", h.Mean)
	}
	// etcd #9561: le=4.096 missing; p50 in the first bucket from 0.
	h = Stats(read("etcd-9561-gap.txt")[0].WAL)
	if !approx(h.P50.Value, 0.001*63012.5/100675, 1e-9) || !approx(h.P99.Value, 0.512+0.512*(124764.75-124594)/621, 1e-6) {
		t.Errorf("9561: p50 %+v p99 %+v", h.P50, h.P99)
	}
	// etcd #8586: no +Inf, no _count: total ≥ 35752512, so fewer than
	// half are ≤ 32 ms (848052) and under 1% above 128 ms is impossible.
	h = Stats(read("etcd-8586-old-name-cut.txt")[0].WAL)
	if h.HasCount || h.P50.Interpolated || h.P50.Lo != 0.032 || h.P99.Lo != 0.128 || !h.P99.TotalUnknown {
		t.Errorf("8586: %+v %+v", h.P50, h.P99)
	}
	// etcd #5870 excerpt starting at 64 ms: nothing can be placed.
	h = Stats(read("etcd-5870-excerpt-high.txt")[0].WAL)
	if h.P99.Lo != 0 || h.P99.Interpolated {
		t.Errorf("5870 excerpt: %+v", h.P99)
	}
	// rke #2295: the stored excerpt starts at le=0.002 but has +Inf and
	// _count: p50 rank 5887698.5 in (2, 4] ms, p99 rank 11657643.03 in
	// (128, 256] ms.
	h = Stats(read("rke-2295-wal-from-2ms.txt")[0].WAL)
	if !h.HasCount || h.Observations != 11775397 || !approx(h.P50.Value, 0.002+0.002*(5887698.5-208222)/(7031156-208222), 1e-9) || !approx(h.P99.Value, 0.128+0.128*(0.99*11775397-11577606)/(11680821-11577606), 1e-9) || !approx(h.Mean, 140588.59175589486/11775397, 1e-9) {
		t.Errorf("rke 2295: n %v p50 %+v p99 %+v mean %v", h.Observations, h.P50, h.P99, h.Mean)
	}
	// etcd #11884: humps (0.4, 0.8] ms (1811) and (12.8, 25.6] ms (2298).
	m := FindModes(read("etcd-11884-peer-bimodal.txt")[0].Peers[0])
	if m.Verdict != "two" || m.LowHi != 0.0008 || m.HighLo != 0.0128 || m.HighHi != 0.0256 || !approx(m.LowShare, 1811.0/(1811+2298), 1e-9) {
		t.Errorf("11884 modes %+v", m)
	}
}

// TestFieldFioNumbers checks what the fio readers take from the field's
// fio outputs, by hand from the files (testdata/README.md).
func TestFieldFioNumbers(t *testing.T) {
	read := func(name string, kind Kind) FioRun {
		t.Helper()
		in := readInputs(t, name)[0]
		var runs []FioRun
		var err error
		if kind == KindFioJSON {
			runs, err = ReadFioJSON(in)
		} else {
			runs, err = ReadFioText(in)
		}
		if err != nil || len(runs) != 1 {
			t.Fatalf("%s: %d runs, %v", name, len(runs), err)
		}
		return runs[0]
	}
	ms := time.Millisecond
	// openshift-etcd-suite on an HDD: fio printed the sync block in msec.
	r := read("openshift-etcd-suite-hdd.txt", KindFioText)
	for pct, want := range map[float64]time.Duration{1: 6 * ms, 50: 23 * ms, 99: 268 * ms, 99.9: 642 * ms, 99.99: 1028 * ms} {
		if got, ok := r.P(pct); !ok || got != want {
			t.Errorf("suite p%g = %v, want %v", pct, got, want)
		}
	}
	if r.SyncMin != 5*ms || r.SyncMax != 1523*ms || r.SyncMean != 40240*time.Microsecond || r.Job != "cleanfsynctest" || r.Version != "fio-3.30" {
		t.Errorf("suite: %+v", r)
	}
	if r.Options["bs"] != "2300B" || r.Options["ioengine"] != "sync" || r.Options["rw"] != "write" {
		t.Errorf("suite options %v", r.Options)
	}
	// A how-to's fio block with the author's HTML bold and notes inside
	// the percentile lines.
	r = read("etcd-tools-annotated-fio.txt", KindFioText)
	for pct, want := range map[float64]time.Duration{50: 3294 * time.Microsecond, 99: 38011 * time.Microsecond, 99.9: 62653 * time.Microsecond, 99.95: 65799 * time.Microsecond} {
		if got, ok := r.P(pct); !ok || got != want {
			t.Errorf("annotated p%g = %v, want %v", pct, got, want)
		}
	}
	if len(r.Percentiles) != 17 || r.SyncMax != 293908*time.Microsecond || r.Job != "cleanfsynctest" {
		t.Errorf("annotated: %d percentiles, max %v, job %q", len(r.Percentiles), r.SyncMax, r.Job)
	}
	// etcd-perf with its JSON elided: the p99 from its summary line, the
	// options from the intact "global options" object.
	r = read("openshift-etcd-perf-hdd.txt", KindFioText)
	if p, ok := r.P(99); !ok || p != 692060160 || len(r.Percentiles) != 1 || !r.HasSync {
		t.Errorf("etcd-perf p99 %v (%v), %+v", p, ok, r.Percentiles)
	}
	if r.Version != "fio-3.27" || r.Options["bs"] != "8000" || r.SyncOption() != "fdatasync=1" || r.Options["ioengine"] != "sync" {
		t.Errorf("etcd-perf: %s %v", r.Version, r.Options)
	}
	// A real JSON run without syncs, stopped by Ctrl-C.
	r = read("fio-libaio-interrupted.json", KindFioJSON)
	if r.HasSync || r.Synced() || r.WriteP99 != 6848512 || !r.Interrupted || r.Options["rw"] != "rw" || r.Options["ioengine"] != "libaio" || r.Options["bs"] != "4k" {
		t.Errorf("interrupted libaio run: %+v", r)
	}
	// fio 3.1's JSON: no "N", no sync section, duplicate "0.00" keys in
	// every percentile map, numjobs=4 without group_reporting (one entry
	// per clone, same name) for two disks.
	runs, err := ReadFioJSON(readInputs(t, "fio31-read-only.json")[0])
	if err != nil || len(runs) != 8 {
		t.Fatalf("fio 3.1 JSON: %d runs, %v", len(runs), err)
	}
	if runs[0].Job != "job /dev/sdb [1/4]" || runs[7].Job != "job /dev/sda [4/4]" || runs[0].Version != "fio-3.1" || runs[0].HasSync || runs[0].WriteP99 != 0 || runs[0].Options["rw"] != "read" {
		t.Errorf("fio 3.1 JSON: %+v … %+v", runs[0], runs[7])
	}
	// fio's own errors and no result: the job never ran.
	failed := readInputs(t, "fio-failed-to-start.json")
	if k, _ := Detect(failed[0].Data); k != KindFioText {
		t.Errorf("fio errors detected as %q", k)
	}
	if _, err := Diagnose(failed, Options{}); err == nil || !strings.Contains(err.Error(), `fio ran no job (fio: "C is not a directory; fio: failed parsing directory=`) || !strings.Contains(err.Error(), "fix the job file or command line and rerun") {
		t.Errorf("fio that ran no job: %v", err)
	}
	// fio JSON cut by hand without etcd-perf's summary: one line naming
	// the fix, not a misleading "no sync".
	cut := []byte(`{"fio version" : "fio-3.27", "jobs" : [ ...`)
	if k, err := Detect(cut); k != KindFioText {
		t.Errorf("cut fio JSON detected as %q (%v)", k, err)
	}
	_, err = ReadFioText(Input{Name: "cut.json", Data: cut})
	if err == nil || !strings.Contains(err.Error(), "paste fio's whole --output-format=json output") {
		t.Errorf("cut fio JSON: %v", err)
	}
}

// TestModesAdjacent: RTT and 2×RTT in neighbouring buckets cannot be told
// from one hump.
func TestModesAdjacent(t *testing.T) {
	data := `etcd_network_peer_round_trip_time_seconds_bucket{le="0.0001",To="a"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0002"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0004"} 100
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0008"} 200
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="+Inf"} 200
`
	sc, err := ReadMetrics(Input{Name: "x", Data: []byte(data)})
	if err != nil {
		t.Fatal(err)
	}
	if m := FindModes(sc[0].Peers[0]); m.Verdict != "adjacent" {
		t.Errorf("modes %+v", m)
	}
}

// TestTwoScrapesAndReset: two scrapes of one member (same
// etcd_server_id) are subtracted, whatever order the files come in; a
// process start that moved (a restart) takes the later scrape whole.
func TestTwoScrapesAndReset(t *testing.T) {
	scrape := func(start int, n0, n1, inf int, sum string) []byte {
		return []byte(strings.Join([]string{
			"process_start_time_seconds " + itoa(start),
			`etcd_server_id{server_id="8e9e05c52164694d"} 1`,
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} ` + itoa(n0),
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} ` + itoa(n1),
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} ` + itoa(inf),
			"etcd_disk_wal_fsync_duration_seconds_sum " + sum,
			"etcd_disk_wal_fsync_duration_seconds_count " + itoa(inf), ""}, "\n"))
	}
	var sc []Scrape
	for _, in := range []Input{{Name: "b.prom", Data: scrape(100, 150, 200, 300, "1.0")}, {Name: "a.prom", Data: scrape(100, 100, 100, 100, "0.05")}} {
		s, err := ReadMetrics(in)
		if err != nil {
			t.Fatal(err)
		}
		sc = append(sc, s...)
	}
	ws := Members(sc)
	if len(ws) != 1 || ws[0].Window != "between scrapes" || ws[0].WAL.Count != 200 || ws[0].WAL.Buckets[0].Count != 50 {
		t.Fatalf("windows %+v", ws)
	}
	// the second scrape after a restart: counts fell
	s2, _ := ReadMetrics(Input{Name: "c.prom", Data: scrape(900, 10, 10, 10, "0.005")})
	ws = Members(append(sc[:1], s2...))
	if len(ws) != 1 || ws[0].Window != "since restart" || ws[0].WAL.Count != 10 {
		t.Fatalf("after restart: %+v", ws)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPromJSON: a query_range matrix of one instance's buckets, with a
// counter reset inside the range.
func TestPromJSON(t *testing.T) {
	js := `{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"etcd_disk_wal_fsync_duration_seconds_bucket","instance":"10.0.0.1:2381","job":"etcd","le":"0.008"},"values":[[1700000000,"100"],[1700000060,"160"],[1700000120,"20"]]},
{"metric":{"__name__":"etcd_disk_wal_fsync_duration_seconds_bucket","instance":"10.0.0.1:2381","job":"etcd","le":"0.016"},"values":[[1700000000,"100"],[1700000060,"190"],[1700000120,"30"]]},
{"metric":{"__name__":"etcd_disk_wal_fsync_duration_seconds_bucket","instance":"10.0.0.1:2381","job":"etcd","le":"+Inf"},"values":[[1700000000,"100"],[1700000060,"200"],[1700000120,"30"]]}]}}`
	if k, _ := Detect([]byte(js)); k != KindPromJSON {
		t.Fatalf("detected %q", k)
	}
	ws, err := ReadPromJSON(Input{Name: "q.json", Data: []byte(js)}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// increase: +Inf 100 then reset to 30: 130; le=0.008: 60 + 20 = 80.
	if len(ws) != 1 || ws[0].Member != "10.0.0.1:2381" || ws[0].WAL.Count != 130 || ws[0].WAL.Buckets[0].Count != 80 || ws[0].Duration != 2*time.Minute {
		t.Fatalf("%+v %+v", ws, ws[0].WAL)
	}
	// --since leaving one sample per series: say so, not "no series".
	_, err = ReadPromJSON(Input{Name: "q.json", Data: []byte(js)}, time.Unix(1700000100, 0), time.Time{})
	if err == nil || !strings.Contains(err.Error(), "the 3 etcd series have fewer than two samples inside --since/--until") {
		t.Errorf("one sample left by --since: %v", err)
	}
	_, err = ReadPromJSON(Input{Name: "q.json", Data: []byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"x"},"values":[[1,"0.01"],[2,"0.02"]]}]}}`)}, time.Time{}, time.Time{})
	if err == nil || !strings.Contains(err.Error(), "histogram_quantile") {
		t.Errorf("quantile answer: %v", err)
	}
}

func TestDetectUnknown(t *testing.T) {
	for _, s := range []string{"", "<html>502 Bad Gateway</html>", "hello world\n", `{"a":1}`} {
		if k, err := Detect([]byte(s)); err == nil {
			t.Errorf("%q detected as %q", s, k)
		}
	}
}

func readInputs(t *testing.T, names ...string) []Input {
	t.Helper()
	var in []Input
	for _, n := range names {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, Input{Name: n, Data: b})
	}
	return in
}

func findingOf(r Report, topic string) *Finding {
	for i := range r.Findings {
		if r.Findings[i].Topic == topic {
			return &r.Findings[i]
		}
	}
	return nil
}

// TestLogMatchedToMetrics: etcd #5870's reporter pasted both a heartbeat
// line (200 ms interval, 748.8 ms over) and the member's WAL histogram
// (p99 32.9 ms); the heartbeat finding cites the histogram and the
// election timeout from the start-up lines.
func TestLogMatchedToMetrics(t *testing.T) {
	rep, err := Diagnose(readInputs(t, "etcd-5870-syslog.log", "etcd-5870-full.prom"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "heartbeat")
	if f == nil || f.Severity != Bad {
		t.Fatalf("heartbeat finding %+v", f)
	}
	ev := strings.Join(f.Evidence, "\n")
	for _, w := range []string{"election timeout 1s (from the log)", "metrics, member etcd-5870-full.prom: WAL fsync p99 32.90ms", "stall at Jan 24 15:10:43"} {
		if !strings.Contains(ev, w) {
			t.Errorf("evidence lacks %q:\n%s", w, ev)
		}
	}
}

// TestMixedZones: a zap line stamped +0800 and one stamped Z are both
// read in UTC; --since/--until keep only what falls inside.
func TestMixedZones(t *testing.T) {
	in := readInputs(t, "etcd-15247-zap-apply.log", "zap-juejin-heartbeat.log", "etcd-7312-heartbeat.log")
	lr := ReadLog(in[0])
	if len(lr.Events) != 1 || !lr.Events[0].Time.Equal(time.Date(2024, 1, 31, 8, 54, 41, 675186000, time.UTC)) || !lr.Events[0].ZoneKnown {
		t.Fatalf("+0800 stamp: %+v", lr.Events)
	}
	// Only the juejin log's slow fdatasync (09:19:17Z) and its leader
	// change fall in the window; the heartbeat (09:17:30Z) and the
	// other files do not.
	since := time.Date(2022, 8, 30, 9, 19, 0, 0, time.UTC)
	until := time.Date(2022, 8, 30, 9, 20, 0, 0, time.UTC)
	rep, err := Diagnose(in, Options{Since: since, Until: until})
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, f := range rep.Findings {
		topics = append(topics, f.Topic+":"+f.Subject)
	}
	got := strings.Join(topics, ",")
	if got != "slow_fdatasync:zap-juejin-heartbeat.log,leader:zap-juejin-heartbeat.log" {
		t.Errorf("findings in the window: %s", got)
	}
	if f := findingOf(rep, "slow_fdatasync"); f == nil || !strings.Contains(strings.Join(f.Evidence, ";"), "1 of them followed by a leader change within 20 s") {
		t.Errorf("slow fdatasync not tied to the election: %+v", f)
	}
}

// TestSlowMember: a federated text with three instances (labels in any
// order, one with the instance label first) names the slow one.
func TestSlowMember(t *testing.T) {
	var b strings.Builder
	for _, m := range []struct {
		inst        string
		fast, total int
	}{{"10.0.0.1:2381", 990, 1000}, {"10.0.0.2:2381", 995, 1000}, {"10.0.0.3:2381", 100, 1000}} {
		for i, le := range []string{"0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "+Inf"} {
			c := m.fast
			if i >= 7 {
				c = m.total
			}
			if i == 0 {
				b.WriteString(`etcd_disk_wal_fsync_duration_seconds_bucket{instance="` + m.inst + `",job="etcd",le="` + le + `"} ` + strconv.Itoa(c) + "\n")
			} else {
				b.WriteString(`etcd_disk_wal_fsync_duration_seconds_bucket{le="` + le + `",job="etcd",instance="` + m.inst + `"} ` + strconv.Itoa(c) + "\n")
			}
		}
	}
	rep, err := Diagnose([]Input{{Name: "federate.txt", Data: []byte(b.String())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Members) != 3 {
		t.Fatalf("%d members", len(rep.Members))
	}
	f := findingOf(rep, "slow_member")
	if f == nil || f.Severity != Bad || !strings.HasPrefix(f.Summary, "10.0.0.3:2381 is the slow member") {
		t.Errorf("slow member: %+v", f)
	}
}

// The shared fixture's README: 137 observations of one prober at one per
// 30 s is about 68.5 minutes (rounded: 1h9m), not 137 probes.
func TestObservationSpan(t *testing.T) {
	rep, err := Diagnose(readInputs(t, "etcd-11100-prober-labels.prom"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if strings.Contains(f.Subject, "72ad62cfd6d822de") {
			if ev := strings.Join(f.Evidence, ";"); !strings.Contains(ev, "137 observations from 1 prober(s) span about 1h9m0s") || !strings.Contains(ev, "mean 1.40ms") {
				t.Errorf("evidence %s", ev)
			}
			// Its excerpt starts at le=3.2768: p50 "≤3.277s" is a bound,
			// and the finding says why.
			if !strings.Contains(f.Uncertainty, "quantiles are bounds only: falls in the first bucket shown (le=3.2768)") {
				t.Errorf("uncertainty %q", f.Uncertainty)
			}
			return
		}
	}
	t.Error("no finding for 72ad62cfd6d822de")
}

// TestHeartbeatRTTEvidence: a late heartbeat to a peer whose RTT the
// metric bounds says the network cannot explain the gap (etcd #13346's
// log with a hand-made peer series for the same To).
func TestHeartbeatRTTEvidence(t *testing.T) {
	in := readInputs(t, "etcd-13346-heartbeat-leader.log")
	in = append(in, Input{Name: "m.txt", Data: []byte(`etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0001"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0002"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0004"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0008"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0016"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0032"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0064"} 100
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="+Inf"} 100
`)})
	rep, err := Diagnose(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "heartbeat")
	if f == nil || !strings.Contains(strings.Join(f.Evidence, ";"), "RTT to e337a53965c9eed8 ≤ 800µs (peer metric): the network cannot explain a 1.018s gap") {
		t.Errorf("heartbeat evidence: %+v", f)
	}
}

// TestFioTextMsec: fio switches its percentile block to msec for slow
// disks and prints large values with a k suffix.
func TestFioTextMsec(t *testing.T) {
	text := `  fsync/fdatasync/sync_file_range:
    sync (msec): min=2, max=1201, avg=23.41, stdev=61.02
    sync percentiles (msec):
     |  1.00th=[    3],  5.00th=[    4], 10.00th=[    5], 20.00th=[    7],
     | 50.00th=[   12], 90.00th=[   41], 95.00th=[   68], 99.00th=[  271],
     | 99.90th=[ 1003], 99.99th=[1.2k]
`
	runs, err := ReadFioText(Input{Name: "slow.txt", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if p, _ := r.P(99); p != 271*time.Millisecond {
		t.Errorf("p99 %v", p)
	}
	if p, _ := r.P(99.99); p != 1200*time.Millisecond {
		t.Errorf("p99.99 %v", p)
	}
	if r.SyncMax != 1201*time.Millisecond || r.SyncMean != 23410*time.Microsecond {
		t.Errorf("max %v mean %v", r.SyncMax, r.SyncMean)
	}
}

// TestJSONEncodes: the whole report of every field input encodes (no map
// with float keys, no infinities); render's TestDiagnoseField writes it,
// worded, as JSON and as a table.
func TestJSONEncodes(t *testing.T) {
	names, _ := filepath.Glob("testdata/*")
	var in []Input
	for _, n := range names {
		// README.md, and the one input diagnose refuses (fio ran no
		// job: TestFieldFioNumbers pins its message).
		if strings.HasSuffix(n, "README.md") || strings.HasSuffix(n, "fio-failed-to-start.json") {
			continue
		}
		in = append(in, readInputs(t, filepath.Base(n))...)
	}
	rep, err := Diagnose(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "0001-01-01") {
		t.Error("an unknown time is printed as 0001-01-01 instead of left out")
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Findings) != len(rep.Findings) || len(back.Inputs) != len(in) {
		t.Errorf("round trip: %v, %d findings", err, len(back.Findings))
	}
}

// TestOneMember: two excerpts of one member's WAL histogram with no member
// identity (etcd #5870's ladder, and the same 1000 fsyncs later, all
// under 4 ms) were read as two members, both over budget since start, and
// called a cluster with a shared cause (a new user's report). Without
// --one-member they stay two members but an inputs finding says they look
// like two scrapes of one member and names the command, and the
// slow_member finding says so too; with it, their difference: 1000
// fsyncs, p99 under 4 ms, OK. Two members' real histograms (#12405 and
// #5870: other ladders of counts) get no such finding.
func TestOneMember(t *testing.T) {
	var before []string
	for _, l := range strings.Split(string(readInputs(t, "etcd-5870-full.prom")[0].Data), "\n") {
		if strings.Contains(l, "wal_fsync") {
			before = append(before, l)
		}
	}
	after := make([]string, len(before))
	for i, l := range before {
		after[i] = l
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(f[0], "_sum"):
			v += 2 // 1000 fsyncs of 2 ms
		case strings.Contains(f[0], `le="0.001"`), strings.Contains(f[0], `le="0.002"`):
		default: // le >= 0.004, +Inf and _count
			v += 1000
		}
		after[i] = f[0] + " " + strconv.FormatFloat(v, 'f', -1, 64)
	}
	in := []Input{{Name: "before.txt", Data: []byte(strings.Join(before, "\n") + "\n")}, {Name: "after.txt", Data: []byte(strings.Join(after, "\n") + "\n")}}

	rep, err := Diagnose(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "inputs")
	if f == nil || f.Subject != "before.txt, after.txt" || !strings.Contains(f.Summary, "1000 more WAL fsyncs") || !strings.Contains(f.Next, "--one-member before.txt after.txt") {
		t.Fatalf("no inputs finding naming the pair: %+v", rep.Findings)
	}
	if s := findingOf(rep, "slow_member"); s != nil && !strings.Contains(s.Uncertainty, "may be scrapes of one member") {
		t.Errorf("slow_member without the caveat: %+v", s)
	}

	rep, err = Diagnose(in, Options{OneMember: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Members) != 1 || rep.Members[0].Window != "between scrapes" || rep.Members[0].WAL.Observations != 1000 {
		t.Fatalf("--one-member: %+v", rep.Members)
	}
	if p99 := rep.Members[0].WAL.P99; p99 == nil || p99.Value > 0.004 || p99.Value <= 0.002 {
		t.Errorf("--one-member p99 %+v, want in (2, 4] ms", p99)
	}
	if w := findingOf(rep, "wal_fsync"); w == nil || w.Severity != OK || findingOf(rep, "inputs") != nil || findingOf(rep, "slow_member") != nil {
		t.Errorf("--one-member findings: %+v", rep.Findings)
	}

	rep, err = Diagnose(readInputs(t, "etcd-12405-node.prom", "etcd-5870-full.prom"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := findingOf(rep, "inputs"); f != nil {
		t.Errorf("two members' histograms read as alike: %+v", f)
	}
}

// TestInputNoteNamesRejectedLine: the one line of etcd #9561's excerpt
// that expfmt rejects is the pasted curl command, not a sample: the input
// note quotes it ("1 line the parser rejected, e.g. ...curl..."), in the
// singular, instead of "0 non-metric lines dropped, 1 rejected by the
// parser"; a single leader line or apply reads in the singular too.
func TestInputNoteNamesRejectedLine(t *testing.T) {
	rep, err := Diagnose(readInputs(t, "etcd-9561-gap.txt", "minikube-9668-mixed.log"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Inputs[0].Note; !strings.Contains(n, `1 line the parser rejected, e.g. "curl http://127.0.0.1:2379/metrics | grep fsync"`) || strings.Contains(n, "non-metric") {
		t.Errorf("note %q", n)
	}
	if f := findingOf(rep, "apply"); f == nil || !strings.HasPrefix(f.Summary, "1 request or apply logged") {
		t.Errorf("apply finding: %+v", f)
	}
	if plural(2, "request or apply") != "2 requests or applies" || plural(1, "term") != "1 term" || plural(3, "term") != "3 terms" {
		t.Error(plural(2, "request or apply"), plural(1, "term"), plural(3, "term"))
	}
}

// TestFioMeaningFollowsVerdict: what a fio finding says it means for
// commit latency follows its verdict: a run over the budget does not say
// the disk "can meet" it (it did, the same sentence for every verdict).
func TestFioMeaningFollowsVerdict(t *testing.T) {
	for file, want := range map[string]string{
		"openshift-etcd-suite-hdd.txt": "will miss the budget too",
		"k8s-homelab-fio.txt":          "the disk can meet etcd's budget",
	} {
		rep, err := Diagnose(readInputs(t, file), Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range rep.Findings {
			if f.Topic == "fio" {
				n++
				if !strings.Contains(f.Meaning, want) {
					t.Errorf("%s [%s]: meaning %q, want it to say %q", file, f.Severity, f.Meaning, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d fio findings, want 1", file, n)
		}
	}
}

// TestInputNotesAndNext: a log's note names its format the way a person
// would ("syslog format"; several with their lines), and a next command
// for a member known only by its file says where to run it.
func TestInputNotesAndNext(t *testing.T) {
	var in []Input
	for _, f := range []string{"etcd-5870-syslog.log", "minikube-9668-mixed.log", "etcd-5870-full.prom"} {
		in = append(in, readInputs(t, f)...)
	}
	rep, err := Diagnose(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, i := range rep.Inputs {
		notes[filepath.Base(i.Name)] = i.Note
	}
	if n := notes["etcd-5870-syslog.log"]; n != "6 lines, 4 etcd events; syslog format" {
		t.Errorf("syslog note %q", n)
	}
	if n := notes["minikube-9668-mixed.log"]; n != "12 lines, 5 etcd events; formats: capnslog 9 lines, raft-stdlog 3 lines" {
		t.Errorf("mixed note %q", n)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Topic == "wal_fsync" {
			found = true
			if !strings.Contains(f.Next, "# on the member etcd-5870-full.prom came from:") {
				t.Errorf("wal_fsync next %q", f.Next)
			}
		}
	}
	if !found {
		t.Errorf("no wal_fsync finding: %+v", rep.Findings)
	}
}
