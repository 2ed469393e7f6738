package render

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// These tests check the words of diagnose's findings on field inputs
// (they were analysis/diagnose's until render took the words).

type want struct {
	topic    string
	severity diagnose.Severity
	summary  string // substring of the summary
}

// diagnoseWorded diagnoses in and words the report, as the sinks do.
func diagnoseWorded(in []diagnose.Input, opt diagnose.Options) (diagnose.Report, error) {
	rep, err := diagnose.Diagnose(in, opt)
	return wordedReport(rep), err
}

func findingOf(r diagnose.Report, topic string) *diagnose.Finding {
	for i := range r.Findings {
		if r.Findings[i].Topic == topic {
			return &r.Findings[i]
		}
	}
	return nil
}

// TestFieldInputs runs the diagnosis on real inputs from public etcd and
// Kubernetes reports (testdata/README.md cites each) and checks what a
// careful engineer concludes from each, worked out by hand there.
func TestFieldInputs(t *testing.T) {
	cases := []struct {
		file  string
		kind  diagnose.Kind
		wants []want
	}{
		{"etcd-9407-old-name-scientific.prom", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 ≈ 14.93ms"}}},
		{"etcd-8586-old-name-cut.txt", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 > 128.00ms"}}},
		{"etcd-9561-gap.txt", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 652.78ms"}}},
		{"k8s-34709-wal.prom", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 31.48ms"}, {"backend_commit", diagnose.Unknown, "no finite buckets"}}},
		{"etcd-5870-excerpt-high.txt", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Unknown, "so no bound; the buckets shown count at least 223 over 0.064 s, 1 over 4.096 s"}}},
		{"etcd-5870-full.prom", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 32.90ms"}}},
		{"etcd-9593-curl-noise.txt", diagnose.KindMetrics, []want{{"backend_commit", diagnose.Unknown, "total unknown (at least 9)"}}},
		{"etcd-11100-prober-labels.prom", diagnose.KindMetrics, []want{{"peer_rtt", diagnose.OK, "kept-alive prober"}, {"peer_rtt", diagnose.OK, "new-connection prober"}}},
		{"etcd-11884-peer-bimodal.txt", diagnose.KindMetrics, []want{{"peer_rtt", diagnose.Warn, "≤ 800µs the kept-alive prober"}}},
		{"etcd-15579-peer-bimodal.txt", diagnose.KindMetrics, []want{{"peer_rtt", diagnose.Warn, "(25.60ms–51.20ms]"}}},
		{"etcd-11100-upstream-peer.txt", diagnose.KindMetrics, []want{{"peer_rtt", diagnose.OK, "(1.60ms–3.20ms]"}}},
		{"etcd-10080-peer-one.txt", diagnose.KindMetrics, []want{{"peer_rtt", diagnose.OK, "one hump (400µs–800µs]"}}},
		{"etcd-7312-heartbeat.log", diagnose.KindLog, []want{{"heartbeat", diagnose.Warn, "2 leader stall(s); longest heartbeat gap 489ms"}}},
		{"etcd-13346-heartbeat-leader.log", diagnose.KindLog, []want{{"heartbeat", diagnose.Bad, "heartbeat gap 1.018s"}, {"leader", diagnose.Warn, "over 1 term"}}},
		{"etcd-5870-syslog.log", diagnose.KindLog, []want{{"heartbeat", diagnose.Bad, "1.149s (2×200ms interval + 749ms)"}, {"apply", diagnose.OK, "the longest 12.6ms"}}},
		{"etcd-10215-wal-sync.log", diagnose.KindLog, []want{{"slow_fdatasync", diagnose.Bad, "12 WAL fdatasync calls logged over etcd's 1 s warning, the longest 7.645s"}}},
		{"dailywork-13-syslog.log", diagnose.KindLog, []want{{"slow_fdatasync", diagnose.Bad, "5 WAL fdatasync calls"}, {"apply", diagnose.Warn, "the longest 731ms"}}},
		{"minikube-9668-mixed.log", diagnose.KindLog, []want{{"slow_fdatasync", diagnose.Bad, "2 WAL fdatasync calls logged over etcd's 1 s warning, the longest 2.118s"}, {"leader", diagnose.Warn, "over 1 term"}}},
		{"zap-juejin-heartbeat.log", diagnose.KindLog, []want{{"slow_fdatasync", diagnose.Bad, "the longest 1.263s"}, {"heartbeat", diagnose.Warn, "261ms (2×100ms interval + 61ms)"}}},
		{"etcd-5870-docker-json.log", diagnose.KindLog, []want{{"heartbeat", diagnose.Warn, "longest heartbeat gap 3.851s (2×1s interval + 1.851s); 0 stall(s) reached the 5s election timeout"}}},
		{"rke-2295-wal-from-2ms.txt", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "WAL fsync p99 227.26ms (in the bucket 128.00ms–256.00ms"}}},
		{"etcd-12405-node.prom", diagnose.KindMetrics, []want{{"wal_fsync", diagnose.Bad, "p99 17.44ms"}}},
		{"etcd-15247-zap-apply.log", diagnose.KindLog, []want{{"apply", diagnose.Warn, "the longest 4.999s"}}},
		{"ibm-blog-fio.txt", diagnose.KindFioText, []want{{"fio", diagnose.Warn, "fdatasync p99 2.38ms"}}},
		{"k8s-homelab-fio.txt", diagnose.KindFioText, []want{{"fio", diagnose.OK, "fdatasync p99 260µs"}}},
		{"fio-etcdcheck-buildhost.json", diagnose.KindFioJSON, []want{{"fio", diagnose.Warn, "fdatasync p99 6.65ms: under etcd's 10 ms WAL budget"}}},
		{"fio-878-no-sync-shown.txt", diagnose.KindFioText, []want{{"fio", diagnose.Unknown, "the job synced (fdatasync=1) but this output shows no sync latency"}}},
		{"openshift-etcd-suite-hdd.txt", diagnose.KindFioText, []want{{"fio", diagnose.Bad, "fdatasync p99 268ms: over etcd's 10 ms WAL budget"}}},
		{"openshift-etcd-perf-hdd.txt", diagnose.KindFioText, []want{{"fio", diagnose.Bad, "fdatasync p99 692ms: over etcd's 10 ms WAL budget"}}},
		{"fio-libaio-interrupted.json", diagnose.KindFioJSON, []want{{"fio", diagnose.Warn, "this fio run made no fsync/fdatasync"}}},
		{"fio31-read-only.json", diagnose.KindFioJSON, []want{{"fio", diagnose.Warn, "this fio job only reads (rw=read)"}}},
		{"etcd-tools-annotated-fio.txt", diagnose.KindFioText, []want{{"fio", diagnose.Bad, "fdatasync p99 38ms: over etcd's 10 ms WAL budget"}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(fieldData + c.file)
			if err != nil {
				t.Fatal(err)
			}
			if k, err := diagnose.Detect(data); err != nil || k != c.kind {
				t.Fatalf("detected %q (%v), want %q", k, err, c.kind)
			}
			rep, err := diagnoseWorded([]diagnose.Input{{Name: c.file, Data: data}}, diagnose.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.wants {
				found := false
				for _, f := range rep.Findings {
					// The summary, or for the counts behind it the
					// uncertainty that says why a p99 has no value.
					if f.Topic == w.topic && f.Severity == w.severity && strings.Contains(f.Summary+"\n"+strings.Join(f.Uncertainty, "\n"), w.summary) {
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

// TestLogMatchedToMetrics: etcd #5870's reporter pasted both a heartbeat
// line (200 ms interval, 748.8 ms over) and the member's WAL histogram
// (p99 32.9 ms); the heartbeat finding cites the histogram and the
// election timeout from the start-up lines.
func TestLogMatchedToMetrics(t *testing.T) {
	rep, err := diagnoseWorded(fieldInputs(t, "etcd-5870-syslog.log", "etcd-5870-full.prom"), diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "heartbeat")
	if f == nil || f.Severity != diagnose.Bad {
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
	in := fieldInputs(t, "etcd-15247-zap-apply.log", "zap-juejin-heartbeat.log", "etcd-7312-heartbeat.log")
	lr := diagnose.ReadLog(in[0])
	if len(lr.Events) != 1 || !lr.Events[0].Time.Equal(time.Date(2024, 1, 31, 8, 54, 41, 675186000, time.UTC)) || !lr.Events[0].ZoneKnown {
		t.Fatalf("+0800 stamp: %+v", lr.Events)
	}
	// Only the juejin log's slow fdatasync (09:19:17Z) and its leader
	// change fall in the window; the heartbeat (09:17:30Z) and the
	// other files do not.
	since := time.Date(2022, 8, 30, 9, 19, 0, 0, time.UTC)
	until := time.Date(2022, 8, 30, 9, 20, 0, 0, time.UTC)
	rep, err := diagnoseWorded(in, diagnose.Options{Since: since, Until: until})
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
	rep, err := diagnoseWorded([]diagnose.Input{{Name: "federate.txt", Data: []byte(federate(990, 995))}}, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Members) != 3 {
		t.Fatalf("%d members", len(rep.Members))
	}
	f := findingOf(rep, "slow_member")
	if f == nil || f.Severity != diagnose.Bad || !strings.HasPrefix(f.Summary, "10.0.0.3:2381 is the slow member") {
		t.Errorf("slow member: %+v", f)
	}
}

// TestSlowMemberOnlyOne: the README walk's case, one member's WAL fsync
// p99 (≈ 11.79 ms) over the 10 ms budget and another's (≈ 9.85 ms) just
// under it, says one member is over, by name, not "more than one"; two
// over say how many.
func TestSlowMemberOnlyOne(t *testing.T) {
	fed := func(c8 ...int) []diagnose.Input {
		var b strings.Builder
		for i, c := range c8 {
			for _, le := range []string{"0.004", "0.008", "0.016", "+Inf"} {
				n := c
				if le == "0.016" || le == "+Inf" {
					n = 1000
				}
				fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{instance=\"m%d\",le=%q} %d\n", i+1, le, n)
			}
		}
		return []diagnose.Input{{Name: "federate.txt", Data: []byte(b.String())}}
	}
	for _, tc := range []struct {
		c8   []int
		sev  diagnose.Severity
		want string
	}{
		{[]int{981, 987, 1000}, diagnose.Warn, "WAL fsync is over budget on m1 alone (p99 11.79ms), the others close behind (at most 9.85ms)"},
		{[]int{981, 983, 1000}, diagnose.Bad, "WAL fsync is over budget on 2 of 3 members: a shared cause"},
	} {
		rep, err := diagnoseWorded(fed(tc.c8...), diagnose.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if f := findingOf(rep, "slow_member"); f == nil || f.Severity != tc.sev || !strings.HasPrefix(f.Summary, tc.want) {
			t.Errorf("%v: %+v, want %s %q", tc.c8, f, tc.sev, tc.want)
		}
	}
}

// The shared fixture's README: 137 observations of one prober at one per
// 30 s is about 68.5 minutes (rounded: 1h9m), not 137 probes.
func TestObservationSpan(t *testing.T) {
	rep, err := diagnoseWorded(fieldInputs(t, "etcd-11100-prober-labels.prom"), diagnose.Options{})
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
			if !strings.Contains(strings.Join(f.Uncertainty, "\n"), "bounds only: in the first bucket shown (le=3.2768)") {
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
	in := fieldInputs(t, "etcd-13346-heartbeat-leader.log")
	in = append(in, peerMetricInput())
	rep, err := diagnoseWorded(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "heartbeat")
	if f == nil || !strings.Contains(strings.Join(f.Evidence, ";"), "RTT to e337a53965c9eed8 ≤ 800µs (peer metric): the network cannot explain a 1.018s gap") {
		t.Errorf("heartbeat evidence: %+v", f)
	}
}

// TestOneMember: two excerpts of one member's WAL histogram with no member
// identity (etcd #5870's ladder, and the same 1000 fsyncs later, all
// under 4 ms) were read as two members, both over budget since start, and
// called a cluster with a shared cause (a new user's report). Without
// --one-member they stay two members but an inputs finding says they look
// like two scrapes of one member and names the command, and the
// slow_member finding says so too; with it, their difference: 1000
// fsyncs, p99 under 4 ms, diagnose.OK. Two members' real histograms (#12405 and
// #5870: other ladders of counts) get no such finding.
func TestOneMember(t *testing.T) {
	in := scrapePair(t)

	rep, err := diagnoseWorded(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "inputs")
	if f == nil || f.Subject != "before.txt, after.txt" || !strings.Contains(f.Summary, "1000 more WAL fsyncs") || !strings.Contains(f.Next, "--one-member before.txt after.txt") {
		t.Fatalf("no inputs finding naming the pair: %+v", rep.Findings)
	}
	if s := findingOf(rep, "slow_member"); s != nil && !strings.Contains(strings.Join(s.Uncertainty, "\n"), "may be scrapes of one member") {
		t.Errorf("slow_member without the caveat: %+v", s)
	}

	rep, err = diagnoseWorded(in, diagnose.Options{OneMember: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Members) != 1 || rep.Members[0].Window != "between scrapes" || rep.Members[0].WAL.Observations != 1000 {
		t.Fatalf("--one-member: %+v", rep.Members)
	}
	if p99 := rep.Members[0].WAL.P99; p99 == nil || p99.Value > 0.004 || p99.Value <= 0.002 {
		t.Errorf("--one-member p99 %+v, want in (2, 4] ms", p99)
	}
	if w := findingOf(rep, "wal_fsync"); w == nil || w.Severity != diagnose.OK || findingOf(rep, "inputs") != nil || findingOf(rep, "slow_member") != nil {
		t.Errorf("--one-member findings: %+v", rep.Findings)
	}

	rep, err = diagnoseWorded(fieldInputs(t, "etcd-12405-node.prom", "etcd-5870-full.prom"), diagnose.Options{})
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
	rep, err := diagnoseWorded(fieldInputs(t, "etcd-9561-gap.txt", "minikube-9668-mixed.log"), diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Inputs[0].Note; !strings.Contains(n, `1 line the parser rejected, e.g. "curl http://127.0.0.1:2379/metrics | grep fsync"`) || strings.Contains(n, "non-metric") {
		t.Errorf("note %q", n)
	}
	if f := findingOf(rep, "apply"); f == nil || !strings.HasPrefix(f.Summary, "1 request or apply logged") {
		t.Errorf("apply finding: %+v", f)
	}
	if pluralOf(2, "request or apply") != "2 requests or applies" || pluralOf(1, "term") != "1 term" || pluralOf(3, "term") != "3 terms" {
		t.Error(pluralOf(2, "request or apply"), pluralOf(1, "term"), pluralOf(3, "term"))
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
		rep, err := diagnoseWorded(fieldInputs(t, file), diagnose.Options{})
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
	var in []diagnose.Input
	for _, f := range []string{"etcd-5870-syslog.log", "minikube-9668-mixed.log", "etcd-5870-full.prom"} {
		in = append(in, fieldInputs(t, f)...)
	}
	rep, err := diagnoseWorded(in, diagnose.Options{})
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

// TestHeartbeatEvidenceTime: a Prometheus export from 2023 is not
// evidence for heartbeat stalls a 2017 log shows; the finding says so
// instead of citing it as the stalls' WAL fsync (a reviewer's catch).
func TestHeartbeatEvidenceTime(t *testing.T) {
	js := `{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"etcd_disk_wal_fsync_duration_seconds_bucket","instance":"10.0.0.1:2381","le":"0.008"},"values":[[1700000000,"100"],[1700000060,"160"]]},
{"metric":{"__name__":"etcd_disk_wal_fsync_duration_seconds_bucket","instance":"10.0.0.1:2381","le":"+Inf"},"values":[[1700000000,"100"],[1700000060,"200"]]}]}}`
	in := append(fieldInputs(t, "etcd-7312-heartbeat.log"), diagnose.Input{Name: "q.json", Data: []byte(js)})
	rep, err := diagnoseWorded(in, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findingOf(rep, "heartbeat")
	if f == nil {
		t.Fatal("no heartbeat finding")
	}
	ev := strings.Join(f.Evidence, "\n")
	if !strings.Contains(ev, "NOT the stalls' time: the metrics cover 2023-11-14T22:13:20Z to 2023-11-14T22:14:20Z, the stalls 2017-02-10") {
		t.Errorf("2023 metrics cited for 2017 stalls without saying so:\n%s", ev)
	}
}

// federate: a federated text of three members' WAL fsync histograms
// (labels in any order, one with the instance label first), 1000 fsyncs
// each; the first two have fast1 and fast2 of them ≤ 1-64 ms, the third
// 100: the slow member.
func federate(fast1, fast2 int) string {
	var b strings.Builder
	for _, m := range []struct {
		inst        string
		fast, total int
	}{{"10.0.0.1:2381", fast1, 1000}, {"10.0.0.2:2381", fast2, 1000}, {"10.0.0.3:2381", 100, 1000}} {
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
	return b.String()
}

// peerMetricInput: a hand-made peer RTT series to etcd #13346's follower
// e337a53965c9eed8, half ≤ 800 µs.
func peerMetricInput() diagnose.Input {
	return diagnose.Input{Name: "m.txt", Data: []byte(`etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0001"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0002"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0004"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0008"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0016"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0032"} 50
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="0.0064"} 100
etcd_network_peer_round_trip_time_seconds_bucket{To="e337a53965c9eed8",le="+Inf"} 100
`)}
}

// scrapePair: etcd #5870's WAL histogram and the same with 1000 more
// fsyncs of 2 ms, neither with a member identity.
func scrapePair(t *testing.T) []diagnose.Input {
	var before []string
	for _, l := range strings.Split(string(fieldInputs(t, "etcd-5870-full.prom")[0].Data), "\n") {
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
	return []diagnose.Input{{Name: "before.txt", Data: []byte(strings.Join(before, "\n") + "\n")}, {Name: "after.txt", Data: []byte(strings.Join(after, "\n") + "\n")}}
}
