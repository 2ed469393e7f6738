package diagnose

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
	rep, err := Diagnose(failed, Options{})
	var noJob *FioNoJobError
	if !errors.As(err, &noJob) || len(noJob.Complaints) != 3 || !strings.HasPrefix(noJob.Complaints[0], `fio: "C is not a directory`) ||
		!strings.Contains(err.Error(), "fio ran no job (3 of fio's own errors): fix the job file or command line and rerun") {
		t.Errorf("fio that ran no job: %v", err)
	}
	if len(rep.Unread) != 1 || len(rep.Unread[0].Quoted) != 3 || rep.Unread[0].Quoted[1] != noJob.Complaints[1] {
		t.Errorf("fio that ran no job: unread %+v", rep.Unread)
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
	starts, _ := filepath.Glob("testdata/start/*.log")
	var in []Input
	for _, n := range append(names, starts...) {
		// README.md, the one input diagnose refuses (fio ran no job:
		// TestFieldFioNumbers pins its message), and the start/ folder
		// (its logs are globbed on their own).
		if strings.HasSuffix(n, "README.md") || strings.HasSuffix(n, "fio-failed-to-start.json") || strings.HasSuffix(n, "/start") {
			continue
		}
		in = append(in, readInputs(t, strings.TrimPrefix(n, "testdata/"))...)
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

// TestJSONInputsBoundObjects: a pasted JSON input of more than
// MaxJSONObjects objects is refused before it is decoded (a hostile check:
// 256 KB of "{}" in fio's "jobs" decoded to 425 MiB, 1 MB to 1.5 GiB, 16
// MiB was killed at 23 GB); one at the bound is read.
func TestJSONInputsBoundObjects(t *testing.T) {
	fio := func(n int) Input {
		return Input{Name: "fio.json", Data: []byte(`{"fio version":"fio-3.1","jobs":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]}")}
	}
	if _, err := ReadFioJSON(fio(MaxJSONObjects)); !errors.Is(err, ErrTooManyObjects) {
		t.Errorf("fio JSON of %d objects: %v, want ErrTooManyObjects", MaxJSONObjects+1, err)
	}
	if _, err := ReadFioJSON(fio(MaxJSONObjects - 1)); errors.Is(err, ErrTooManyObjects) {
		t.Errorf("fio JSON of %d objects refused", MaxJSONObjects)
	}
	prom := Input{Name: "q.json", Data: []byte(`{"status":"success","data":{"resultType":"vector","result":[` + strings.TrimSuffix(strings.Repeat("{},", MaxJSONObjects), ",") + "]}}")}
	if _, err := ReadPromJSON(prom, time.Time{}, time.Time{}); !errors.Is(err, ErrTooManyObjects) {
		t.Errorf("Prometheus JSON over the bound: %v", err)
	}
}
