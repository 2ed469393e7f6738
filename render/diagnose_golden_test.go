package render

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// diagnoseCase is one diagnosis pinned by its table and its JSON.
type diagnoseCase struct {
	name string
	in   []diagnose.Input
	opt  diagnose.Options
}

// diagnoseGoldenCases: every field input alone, every one together, and
// the pairs and hand-made inputs whose findings no single input reaches
// (a slow member of three, scrapes of one member, a late heartbeat to a
// peer whose RTT a metric bounds, a log matched to its metrics, humps in
// neighbouring buckets, a window over mixed zones).
func diagnoseGoldenCases(t *testing.T) []diagnoseCase {
	names, _ := filepath.Glob(fieldData + "*")
	var cs []diagnoseCase
	var all []diagnose.Input
	for _, n := range names {
		base := filepath.Base(n)
		if base == "README.md" || base == "start" {
			continue
		}
		in := fieldInputs(t, base)
		cs = append(cs, diagnoseCase{name: "field/" + base, in: in})
		if base != "fio-failed-to-start.json" {
			all = append(all, in...)
		}
	}
	cs = append(cs, diagnoseCase{name: "all", in: all})
	// etcd v3.6.16's own start-up logs (testdata/start/README.md): one
	// member, its restart, three members together and staggered, and the
	// three stopped
	starts, _ := filepath.Glob(fieldData + "start/*.log")
	var startIn []diagnose.Input
	for _, n := range starts {
		startIn = append(startIn, fieldInputs(t, "start/"+filepath.Base(n))...)
	}
	cs = append(cs, diagnoseCase{name: "start-logs", in: startIn})
	// two real scrapes 11.069 s apart, 2 peer RTT observations between
	// them: as files (no time), then with their fetch times (a polled URL)
	scrapes := fieldInputs(t, "start/etcd3616-three-r1-scrape-1.prom", "start/etcd3616-three-r1-scrape-2.prom")
	cs = append(cs, diagnoseCase{name: "peer-span-files", in: scrapes})
	timed := slices.Clone(scrapes)
	timed[0].At = time.Date(2026, 12, 7, 6, 2, 14, 783932699, time.UTC)
	timed[1].At = time.Date(2026, 12, 7, 6, 2, 25, 853426009, time.UTC)
	cs = append(cs, diagnoseCase{name: "peer-span-timed", in: timed})

	cs = append(cs, diagnoseCase{name: "slow-member", in: []diagnose.Input{{Name: "federate.txt", Data: []byte(federate(990, 995))}}})
	// three members over budget alike: a shared cause
	cs = append(cs, diagnoseCase{name: "shared-cause", in: []diagnose.Input{{Name: "federate.txt", Data: []byte(federate(100, 100))}}})
	// three members under budget: none stands out
	fast := strings.ReplaceAll(federate(990, 995), " 100\n", " 999\n")
	cs = append(cs, diagnoseCase{name: "no-slow-member", in: []diagnose.Input{{Name: "federate.txt", Data: []byte(fast)}}})
	cs = append(cs, diagnoseCase{name: "heartbeat-rtt", in: append(fieldInputs(t, "etcd-13346-heartbeat-leader.log"), peerMetricInput())})
	cs = append(cs, diagnoseCase{name: "adjacent", in: []diagnose.Input{{Name: "x", Data: []byte(`etcd_network_peer_round_trip_time_seconds_bucket{le="0.0001",To="a"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0002"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0004"} 100
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="0.0008"} 200
etcd_network_peer_round_trip_time_seconds_bucket{To="a",le="+Inf"} 200
`)}}})
	// a WAL ladder with buckets missing in the middle, p99 interpolated
	// across the gap; and one whose p99 is above its highest bucket
	cs = append(cs, diagnoseCase{name: "ladder-gap", in: []diagnose.Input{{Name: "gap.txt", Data: []byte(`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 10
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 20
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.016"} 100
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 100
etcd_disk_wal_fsync_duration_seconds_sum 0.5
etcd_disk_wal_fsync_duration_seconds_count 100
`)}, {Name: "above.txt", Data: []byte(`etcd_disk_backend_commit_duration_seconds_bucket{le="0.001"} 10
etcd_disk_backend_commit_duration_seconds_bucket{le="0.002"} 20
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} 100
etcd_disk_backend_commit_duration_seconds_sum 5
etcd_disk_backend_commit_duration_seconds_count 100
`)}}})
	cs = append(cs, diagnoseCase{name: "log-and-metrics", in: fieldInputs(t, "etcd-5870-syslog.log", "minikube-9668-mixed.log", "etcd-5870-full.prom")})
	cs = append(cs, diagnoseCase{name: "two-members", in: fieldInputs(t, "etcd-12405-node.prom", "etcd-5870-full.prom")})
	cs = append(cs, diagnoseCase{name: "gap-and-mixed", in: fieldInputs(t, "etcd-9561-gap.txt", "minikube-9668-mixed.log")})
	cs = append(cs, diagnoseCase{name: "mixed-zones-window", in: fieldInputs(t, "etcd-15247-zap-apply.log", "zap-juejin-heartbeat.log", "etcd-7312-heartbeat.log"),
		opt: diagnose.Options{Since: time.Date(2022, 8, 30, 9, 19, 0, 0, time.UTC), Until: time.Date(2022, 8, 30, 9, 20, 0, 0, time.UTC)}})

	// two scrapes of one member without identity: the inputs finding,
	// then the same pair with --one-member
	pair := scrapePair(t)
	cs = append(cs, diagnoseCase{name: "scrapes-alike", in: pair})
	cs = append(cs, diagnoseCase{name: "one-member", in: pair, opt: diagnose.Options{OneMember: true}})
	// a restart between two scrapes of one member
	scrape := func(start int, n0, n1, inf int, sum string) []byte {
		i := strconv.Itoa
		return []byte(strings.Join([]string{
			"process_start_time_seconds " + i(start),
			`etcd_server_id{server_id="8e9e05c52164694d"} 1`,
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} ` + i(n0),
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} ` + i(n1),
			`etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} ` + i(inf),
			"etcd_disk_wal_fsync_duration_seconds_sum " + sum,
			"etcd_disk_wal_fsync_duration_seconds_count " + i(inf), ""}, "\n"))
	}
	cs = append(cs, diagnoseCase{name: "between-scrapes", in: []diagnose.Input{{Name: "b.prom", Data: scrape(100, 150, 200, 300, "1.0")}, {Name: "a.prom", Data: scrape(100, 100, 100, 100, "0.05")}}})
	cs = append(cs, diagnoseCase{name: "since-restart", in: []diagnose.Input{{Name: "b.prom", Data: scrape(100, 150, 200, 300, "1.0")}, {Name: "c.prom", Data: scrape(900, 10, 10, 10, "0.005")}}})
	// a restart between two scrapes with no fetch times or process start:
	// the order given decides
	untimed := func(name string, sum float64, cum ...int) diagnose.Input {
		var b strings.Builder
		for i, le := range []string{"0.001", "0.002", "0.004", "0.008", "+Inf"} {
			b.WriteString(`etcd_disk_wal_fsync_duration_seconds_bucket{instance="m1",le="` + le + `"} ` + strconv.Itoa(cum[i]) + "\n")
		}
		b.WriteString(`etcd_disk_wal_fsync_duration_seconds_sum{instance="m1"} ` + strconv.FormatFloat(sum, 'g', -1, 64) + "\n")
		b.WriteString(`etcd_disk_wal_fsync_duration_seconds_count{instance="m1"} ` + strconv.Itoa(cum[4]) + "\n")
		return diagnose.Input{Name: name, Data: []byte(b.String())}
	}
	cs = append(cs, diagnoseCase{name: "restart-as-given", in: []diagnose.Input{untimed("before.prom", 1.0, 900, 990, 999, 1000, 1000), untimed("after.prom", 0.1, 10, 20, 30, 40, 80)}})
	cs = append(cs, diagnoseCase{name: "partial", in: append([]diagnose.Input{{Name: "junk.txt", Data: []byte("hello, this is not evidence\n")}},
		append(fieldInputs(t, "etcd-9544-wal-p99-ok-tail.prom"), diagnose.Input{Name: "gone.prom", Err: os.ErrNotExist})...)})
	return cs
}

// TestDiagnoseGoldens pins every word of diagnose's table and JSON, for
// each case of diagnoseGoldenCases, in testdata/render/diagnose, and the
// report of inputs that name several clusters.
func TestDiagnoseGoldens(t *testing.T) {
	for _, c := range diagnoseGoldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			rep, err := diagnose.Diagnose(c.in, c.opt)
			var tb, jb bytes.Buffer
			if err != nil {
				tb.WriteString("error: " + err.Error() + "\n")
			}
			if err := Diagnose(&tb, rep); err != nil {
				t.Fatal(err)
			}
			if err := DiagnoseJSON(&jb, rep); err != nil {
				t.Fatal(err)
			}
			renderGolden(t, "diagnose/"+c.name+".txt", tb.Bytes())
			renderGolden(t, "diagnose/"+c.name+".json", jb.Bytes())
		})
	}
	t.Run("clusters", func(t *testing.T) {
		in := fieldInputs(t, "etcd-17855-member-join.log", "etcd-9544-wal-p99-ok-tail.prom", "minikube-9668-mixed.log", "weliu-nospace-status.txt", "etcdctl-readme-status.json")
		var rs []ClusterReport
		for _, g := range diagnose.SplitClusters(in) {
			rep, err := diagnose.Diagnose(g.Inputs, diagnose.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, ClusterReport{Cluster: g.Cluster, Report: rep})
		}
		var tb, jb bytes.Buffer
		if err := DiagnoseClusters(&tb, rs); err != nil {
			t.Fatal(err)
		}
		if err := DiagnoseClustersJSON(&jb, rs); err != nil {
			t.Fatal(err)
		}
		renderGolden(t, "diagnose/clusters.txt", tb.Bytes())
		renderGolden(t, "diagnose/clusters.json", jb.Bytes())
	})
}
