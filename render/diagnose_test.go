package render

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// fieldData: diagnose's field inputs (public reports, cited in its
// README.md), the evidence these tests word.
const fieldData = "../analysis/diagnose/testdata/"

// fieldInputs reads field inputs by name.
func fieldInputs(t *testing.T, names ...string) []diagnose.Input {
	t.Helper()
	var in []diagnose.Input
	for _, n := range names {
		b, err := os.ReadFile(fieldData + n)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, diagnose.Input{Name: n, Data: b})
	}
	return in
}

// fieldReport diagnoses one field input alone, checking its kind.
func fieldReport(t *testing.T, file string, kind diagnose.Kind) diagnose.Report {
	t.Helper()
	in := fieldInputs(t, file)
	if k, err := diagnose.Detect(in[0].Data); err != nil || k != kind {
		t.Fatalf("detected %q (%v), want %q", k, err, kind)
	}
	rep, err := diagnose.Diagnose(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// diagnoseTable diagnoses in and writes the report as a table.
func diagnoseTable(t *testing.T, in []diagnose.Input) (diagnose.Report, *strings.Builder) {
	t.Helper()
	rep, err := diagnose.Diagnose(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Diagnose(&b, rep); err != nil {
		t.Fatal(err)
	}
	return rep, &b
}

// TestDiagnoseField: the report of every field input together is written
// as JSON (worded, and read back) and as a table, and leaves no unknown
// time as 0001-01-01.
func TestDiagnoseField(t *testing.T) {
	names, _ := filepath.Glob(fieldData + "*")
	var in []diagnose.Input
	for _, n := range names {
		// README.md, the one input diagnose refuses (fio ran no job), and
		// start/ (etcd's own start-up logs: the start-logs golden).
		if strings.HasSuffix(n, "README.md") || strings.HasSuffix(n, "fio-failed-to-start.json") || strings.HasSuffix(n, "/start") {
			continue
		}
		in = append(in, fieldInputs(t, filepath.Base(n))...)
	}
	rep, err := diagnose.Diagnose(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := DiagnoseJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "0001-01-01") {
		t.Error("an unknown time is printed as 0001-01-01 instead of left out")
	}
	var back diagnose.Report
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || len(back.Findings) != len(rep.Findings) || len(back.Inputs) != len(in) {
		t.Errorf("round trip: %v, %d findings", err, len(back.Findings))
	}
	for _, f := range back.Findings {
		if (f.Perf != nil || f.Status != nil || f.Health != nil || f.Stalls != nil || f.CutOff != nil) && f.Summary == "" {
			t.Errorf("%s %s: a typed finding without words in the JSON", f.Topic, f.Subject)
		}
	}
	var tb strings.Builder
	if err := Diagnose(&tb, rep); err != nil || !strings.Contains(tb.String(), "[BAD] wal_fsync") {
		t.Errorf("table: %v", err)
	}
}

// TestDiagnoseWordedCutOff: a member cut off (diagnose's TestCutOffField
// counts the rounds and peers) is worded with what the disk did, and
// rounds that end with a leader say so.
func TestDiagnoseWordedCutOff(t *testing.T) {
	for _, file := range []string{"cloudstack-7537-zap-prevote.log", "apisix-11674-zap-prevote.log", "skuba-1327-candidate.log", "etcd-10721-syslog-candidate.log", "etcd-3639-etcd2-dial-timeout.log"} {
		for _, f := range fieldReport(t, file, diagnose.KindLog).Findings {
			if w := wordFinding(f); f.Topic == "cut_off" && !strings.Contains(w.Meaning, "not the disk (no slow fdatasync logged)") {
				t.Errorf("%s: meaning %q", file, w.Meaning)
			}
		}
	}
	f := wordedConstructed(t, `{"level":"info","ts":"2024-01-01T00:00:00Z","msg":"a became pre-candidate at term 5"}
{"level":"info","ts":"2024-01-01T00:00:01Z","msg":"raft.node: a elected leader b at term 6"}
`, func(f diagnose.Finding) bool { return f.CutOff != nil })
	if !strings.Contains(f.Summary, "then a leader") {
		t.Errorf("summary %q", f.Summary)
	}
}

// wordedConstructed diagnoses one constructed input and words its one
// finding that is typed.
func wordedConstructed(t *testing.T, data string, typed func(diagnose.Finding) bool) diagnose.Finding {
	t.Helper()
	rep, err := diagnose.Diagnose([]diagnose.Input{{Name: "constructed", Data: []byte(data)}}, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []diagnose.Finding
	for _, f := range rep.Findings {
		if typed(f) {
			got = append(got, wordFinding(f))
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d findings of the type, want 1: %+v", len(got), rep.Findings)
	}
	return got[0]
}

// TestDiagnoseWordedPerfLoadUnknown: a check perf paste with neither the
// command line nor a throughput that only one load fails names the loads
// it may have run at (diagnose's TestCheckPerfLoadUnknown has the numbers).
func TestDiagnoseWordedPerfLoadUnknown(t *testing.T) {
	f := wordedConstructed(t, "FAIL: Throughput too low: 4790 writes/s\nPASS: Slowest request took 0.300000s\nPASS: Stddev is 0.010000s\nFAIL\n",
		func(f diagnose.Finding) bool { return f.Perf != nil })
	if !strings.Contains(f.Summary, "at load l or xl") {
		t.Errorf("summary %q", f.Summary)
	}
}

// FuzzDiagnose feeds pasted evidence through diagnose and both of its
// writers: no panic on any input. Seeds: diagnose's field inputs.
func FuzzDiagnose(f *testing.F) {
	files, _ := filepath.Glob(fieldData + "*")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rep, err := diagnose.Diagnose([]diagnose.Input{{Name: "fuzz", Data: in}}, diagnose.Options{})
		if err != nil {
			return
		}
		if err := Diagnose(io.Discard, rep); err != nil {
			t.Fatal(err)
		}
		if err := DiagnoseJSON(io.Discard, rep); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
	})
}

// TestDiagnoseTablePeerOnlyMember: a member known only from a peer RTT excerpt
// (etcd #11884) gets a disk row that says its input has no disk
// histogram, not a row of dashes that reads like an idle disk; a member
// with a WAL histogram (etcd #12405) keeps its numbers.
func TestDiagnoseTablePeerOnlyMember(t *testing.T) {
	in := append(fieldInputs(t, "etcd-11884-peer-bimodal.txt"), fieldInputs(t, "etcd-12405-node.prom")...)
	_, b := diagnoseTable(t, in)
	var peerRow, walRow string
	for _, l := range strings.Split(b.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "  etcd-11884-peer-bimodal.txt  since start"):
			peerRow = l
		case strings.HasPrefix(l, "  etcd-12405-node.prom  ") && strings.Contains(l, "since start"):
			walRow = l
		}
	}
	if !strings.Contains(peerRow, "no WAL fsync or backend commit histogram") {
		t.Errorf("peer-only member's disk row: %q", peerRow)
	}
	if walRow == "" || strings.Contains(walRow, "no WAL fsync") || !strings.Contains(walRow, "ms") {
		t.Errorf("WAL member's disk row: %q\n%s", walRow, b.String())
	}
}

// TestDiagnoseFioTable: the fio table says how many syncs each run made
// (or that it made none, or that its paste does not show them), and a
// percentile fio printed above the run's exact max is explained (fio-3.33
// on a build host: p99.99 25.8ms, max 25.7ms; fio prints a bin's middle).
func TestDiagnoseFioTable(t *testing.T) {
	var in []diagnose.Input
	for _, f := range []string{"fio-etcdcheck-buildhost.json", "openshift-etcd-perf-hdd.txt", "fio-878-no-sync-shown.txt", "fio-libaio-interrupted.json"} {
		in = append(in, fieldInputs(t, f)...)
	}
	rep, b := diagnoseTable(t, in)
	rows := map[string]string{
		"fio-etcdcheck-buildhost.json etcdcheck":      "911 syncs",
		"openshift-etcd-perf-hdd.txt":                 "synced",
		"fio-878-no-sync-shown.txt test":              "syncs unshown",
		"fio-libaio-interrupted.json sequential_read": "no sync",
	}
	for _, line := range strings.Split(b.String(), "\n") {
		for name, want := range rows {
			if rest, ok := strings.CutPrefix(line, "  "+name+" "); ok && strings.HasPrefix(strings.TrimSpace(rest), want+" ") {
				delete(rows, name)
			}
		}
	}
	if len(rows) > 0 {
		t.Errorf("fio rows without their sync column %v:\n%s", rows, b.String())
	}
	for _, want := range []string{
		"p99.99 25.821ms reads above the max 25.709ms: fio prints a percentile as the middle of its histogram bin",
		"evidence: as fio-3.33 printed them, from 911 syncs",
		"evidence: as fio-3.27 printed them\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	for _, f := range rep.Findings {
		if f.Topic == "fio" && (f.Severity == diagnose.Unknown || strings.Contains(f.Summary, "no fsync")) && strings.Contains(f.Meaning, "can meet") {
			t.Errorf("%s: a run without sync latency said %q", f.Subject, f.Meaning)
		}
	}
	if strings.Contains(b.String(), "sync=true") || strings.Contains(b.String(), "sync=false") {
		t.Errorf("table still prints Go's bool:\n%s", b.String())
	}
}

// TestDiagnoseWordedField: the sinks word the typed findings with the numbers
// worked out by hand above, and the table lists what was not read.
func TestDiagnoseWordedField(t *testing.T) {
	cases := []struct {
		file, topic string
		kind        diagnose.Kind
		want        []string // substrings of the worded finding
	}{
		{"etcd-13455-check-perf-l-xl.txt", "check_perf", diagnose.KindEtcdctl, []string{"FAIL at load l on throughput only (6643 writes/s)", "load l (8000 writes/s by 500 clients, 60 s): ", "at least 18584 writes/s", "mean put took about 75.3ms (500 / 6643 writes/s)"}},
		{"etcd-10609-check-perf-l.txt", "check_perf", diagnose.KindEtcdctl, []string{"1000 puts failed (etcdserver: request timed out)", "1000 × etcdserver: request timed out"}},
		{"k8s-82067-check-perf-s.txt", "check_perf", diagnose.KindEtcdctl, []string{"load s (150 writes/s by 50 clients, 60 s): the command line has no --load", "slowest put (127ms) took longer than etcd's 100ms heartbeat interval", "a pass at s (150 writes/s) loads the disk lightly"}},
		{"etcd-9544-wal-p99-ok-tail.prom", "disk_stalls", diagnose.KindMetrics, []string{"WAL fsync stalls of 367535: 354 took over 128.00ms, 48 over 512.00ms; the p99 is under budget", "thresholds: 128.00ms: the 100ms heartbeat, 512.00ms: half the 1s election timeout"}},
		{"weliu-nospace-status.txt", "endpoint_status", diagnose.KindEtcdctl, []string{"172.20.0.18:12379 reports alarm:NOSPACE", "errors: memberID:16386505787103497523 alarm:NOSPACE", "2.2 GB, 102% of the default 2 GiB quota"}},
		{"etcd-10897-status-health.txt", "endpoint_health", diagnose.KindEtcdctl, []string{"1 of 3 endpoints unhealthy (http://192.168.195.128:2379: context deadline exceeded)"}},
		{"etcdctl-readme-status.json", "endpoint_status", diagnose.KindEtcdctl, []string{"none of them the leader (they follow fd422379fda50e48, raft term 2)", "127.0.0.1:2379: id 8211f1d0f64f3269, follower, term 2, index 32623"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			rep := fieldReport(t, c.file, c.kind)
			var text []string
			for _, f := range rep.Findings {
				if f.Topic == c.topic {
					w := wordFinding(f)
					text = append(text, w.Summary, strings.Join(w.Evidence, "\n"), strings.Join(w.Uncertainty, "\n"), w.Meaning, w.Next)
				}
			}
			all := strings.Join(text, "\n")
			for _, s := range c.want {
				if !strings.Contains(all, s) {
					t.Errorf("no %q in:\n%s", s, all)
				}
			}
		})
	}
	good, _ := os.ReadFile(fieldData + "johncming-54-status-table.txt")
	_, b := diagnoseTable(t, []diagnose.Input{{Name: "good.txt", Data: good}, {Name: "junk.txt", Data: []byte("hello\n")}})
	if !strings.Contains(b.String(), "not read (left out of the findings):\n  junk.txt: not etcd /metrics text") || !strings.Contains(b.String(), "[OK] endpoint_status good.txt: endpoint status: 3 of 3 endpoints answered") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestFewSamplesWords: a fleet cluster with too few samples on the grid
// names the history Prometheus holds and the flag that reads it (the
// README walk: 35 s of 7 s scrapes under --last 5m), never "widen".
func TestFewSamplesWords(t *testing.T) {
	p := diagnose.FleetProbe{Members: 1, Interval: 7 * time.Second, First: time.Unix(100, 0).UTC(), Last: time.Unix(135, 0).UTC()}
	for _, c := range []struct {
		few  diagnose.FewSamples
		want string
	}{
		{diagnose.FewSamples{Series: 216, Step: 50 * time.Second, Probe: p, EndsNow: true, Last: 30 * time.Second},
			"the 216 etcd series have fewer than two samples on the query grid (a point every 50s): Prometheus holds 35s of these series: use --last 30s or wait"},
		{diagnose.FewSamples{Series: 216, Step: 50 * time.Second, Probe: p, Last: 30 * time.Second},
			"Prometheus holds 35s of these series, from 1970-01-01T00:01:40Z: use --since 1970-01-01T00:01:40Z or wait"},
		{diagnose.FewSamples{Series: 3, Step: time.Minute, EndsNow: true},
			"holds one sample of each of these series at most: wait"},
	} {
		u := diagnose.Unread{Name: `job="etcd"`, Few: &c.few}
		if got := unreadText(u); !strings.Contains(got, c.want) || strings.Contains(got, "widen") {
			t.Errorf("%+v: %s", c.few, got)
		}
		if r := wordedReport(diagnose.Report{Unread: []diagnose.Unread{u}}); r.Unread[0].Err != unreadText(u) {
			t.Errorf("JSON error %q", r.Unread[0].Err)
		}
	}
}
