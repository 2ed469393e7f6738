package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/pipeline"
)

// jaegerConfig is Jaeger v2's configuration for the test: an OTLP gRPC
// receiver, in-memory storage and the query API, on loopback ports.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
    traces:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    max_clock_skew_adjust: 0s
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
%sprocessors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// startJaeger runs bin/jaeger (make jaeger) with jaegerConfig and waits
// for its query API; it returns the API's base URL and the OTLP gRPC
// address, which has TLS with the PEM files cert and key when given.
// Without bin/jaeger the test skips (fails under
// ETCDSCOPE_REQUIRE_JAEGER=1, which make test-otlp sets).
func startJaeger(t *testing.T, cert, key string) (query, otlpAddr string, stop func()) {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "jaeger")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("ETCDSCOPE_REQUIRE_JAEGER") == "1" {
			t.Fatalf("ETCDSCOPE_REQUIRE_JAEGER=1 but no %s (make jaeger)", bin)
		}
		t.Skipf("SKIPPED: no %s: run 'make jaeger' (about 8 min on 2 cores with empty caches), or 'make test-otlp'", bin)
	}
	dir := t.TempDir()
	query = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	otlpAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tlsConf := ""
	if cert != "" {
		tlsConf = fmt.Sprintf("        tls:\n          cert_file: %s\n          key_file: %s\n", cert, key)
	}
	cfg := fmt.Sprintf(jaegerConfig, query, fmt.Sprintf("127.0.0.1:%d", freePort(t)), otlpAddr, tlsConf)
	if err := os.WriteFile(filepath.Join(dir, "jaeger.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+filepath.Join(dir, "jaeger.yaml"))
	var log testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("jaeger's log:\n%s", log.String())
		}
	})
	query = "http://" + query
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("jaeger's query API up after %v", time.Since(started).Round(time.Millisecond))
				return query, otlpAddr, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API not up after 30 s: %v\n%s", err, log.String())
		}
	}
}

// jaegerSpan is a span as Jaeger's query API returns it (times in µs).
type jaegerSpan struct {
	TraceID    string `json:"traceID"`
	SpanID     string `json:"spanID"`
	Operation  string `json:"operationName"`
	References []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"`
	Duration  int64 `json:"duration"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// tag returns a span tag's value as text.
func (s *jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// parent is the span's CHILD_OF reference ("" for a root).
func (s *jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// jaegerTrace GETs /api/traces/<id>: its spans, or nil when Jaeger has
// no such trace (404).
func jaegerTrace(t *testing.T, query, id string) []jaegerSpan {
	t.Helper()
	resp, err := http.Get(query + "/api/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("jaeger /api/traces/%s: %s: %s", id, resp.Status, b)
	}
	var r struct {
		Data []struct {
			TraceID string       `json:"traceID"`
			Spans   []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // int64 tags as their digits
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Data) != 1 || r.Data[0].TraceID != id {
		t.Fatalf("jaeger /api/traces/%s: %d traces: want exactly that one", id, len(r.Data))
	}
	return r.Data[0].Spans
}

// fetchRecords reads the agents' /commit/entries above index since: the
// windows, and their records by member and index.
func fetchRecords(ctx context.Context, t *testing.T, agents []string, since uint64) ([]commit.EntryWindow, map[commit.MemberID]map[uint64]commit.Entry) {
	t.Helper()
	windows, err := pipeline.FetchEntryWindows(ctx, agents, since, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[commit.MemberID]map[uint64]commit.Entry{}
	for _, w := range windows {
		recs[w.Member] = map[uint64]commit.Entry{}
		for _, e := range w.Entries {
			recs[w.Member][e.Index] = e
		}
	}
	return windows, recs
}

// clusterID is etcd's cluster id, from the member at url.
func clusterID(ctx context.Context, t *testing.T, url string) uint64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := cli.Status(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return st.Header.ClusterId
}

// TestClusterOTLPJaeger runs a real Jaeger (bin/jaeger, make jaeger) and
// three etcd members on loopback, each with its own `etcdscope serve
// --commit-pid --otlp-endpoint` (1 write in 2), makes puts at the leader
// and reads the traces back from Jaeger's query API by the IDs derived
// from (cluster, term, index): one trace per sampled write and none for
// the others, spans from all three members, each span's parent in Jaeger
// the one the design names (the write, the leader's replication, its
// vote of each follower, that follower's entry), and each duration the
// agents' /commit/entries records' and `etcdscope cluster`'s join's, to
// the microsecond Jaeger keeps. Then Jaeger stops, more puts are made,
// and every agent still exits within 2 s of SIGTERM.
func TestClusterOTLPJaeger(t *testing.T) {
	testenv.RequireRoot(t)
	query, otlpAddr, stopJaeger := startJaeger(t, "", "")
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const every = 2
	var agents []string
	var serves []*server
	began := time.Now()
	for _, m := range c.Members {
		s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL,
			"--otlp-endpoint", otlpAddr, "--otlp-insecure", "--otlp-sample-every", strconv.Itoa(every))
		agents = append(agents, "http://"+s.addr)
		serves = append(serves, s)
	}
	t.Logf("3 agents ready (probes attached) after %v", time.Since(began).Round(time.Millisecond))
	cluster := clusterID(ctx, t, leader.ClientURL)
	began = time.Now()
	before := restingCommitIndex(ctx, t, c, leader)
	const puts = 40
	lo, hi := putAndSettle(ctx, t, c, leader, agents, before, puts, "otlp")
	t.Logf("commit index at rest, %d puts made and in every agent's window after %v", puts, time.Since(began).Round(time.Millisecond))
	// The records, and the join `etcdscope cluster` prints.
	windows, recs := fetchRecords(ctx, t, agents, lo)
	j := commit.JoinCluster(windows)
	joined := map[uint64]commit.ClusterWrite{}
	for _, w := range j.Writes {
		joined[w.Index] = w
	}
	lead := commit.MemberID(leader.ID)
	var followers []commit.MemberID
	for _, m := range c.Members {
		if m != leader {
			followers = append(followers, commit.MemberID(m.ID))
		}
	}
	hex := func(id commit.MemberID) string { return strconv.FormatUint(uint64(id), 16) }

	// Each sampled write's trace, read once every span the records call
	// for is in (each agent exports on its own: a trace fills up in
	// several batches): the write's root; the leader's replication, WAL
	// append, fdatasync and a vote per follower; each follower's entry,
	// queue, WAL append, fdatasync and answer.
	traces := map[uint64][]jaegerSpan{}
	waited := time.Now()
	for i := lo + 1; i <= hi; i++ {
		if i%every != 0 {
			continue
		}
		le := recs[lead][i]
		k := otlp.Key{Cluster: cluster, Term: le.Term, Index: i}
		need := []string{otlp.SpanID(k, 0, otlp.PartWrite).String(), otlp.SpanID(k, lead, otlp.PartReplicate).String(),
			otlp.SpanID(k, lead, otlp.PartWALAppend).String()}
		if le.SyncEndNs > le.SyncStartNs {
			need = append(need, otlp.SpanID(k, lead, otlp.PartFdatasync).String())
		}
		for _, f := range followers {
			need = append(need, otlp.SpanID(k, lead, otlp.VotePart(f)).String())
			for _, p := range []string{otlp.PartEntry, otlp.PartQueue, otlp.PartWALAppend, otlp.PartRespond} {
				need = append(need, otlp.SpanID(k, f, p).String())
			}
			if fe := recs[f][i]; fe.SyncEndNs > fe.SyncStartNs {
				need = append(need, otlp.SpanID(k, f, otlp.PartFdatasync).String())
			}
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			traces[i] = jaegerTrace(t, query, otlp.TraceID(k).String())
			have := map[string]bool{}
			for _, s := range traces[i] {
				have[s.SpanID] = true
			}
			all := true
			for _, id := range need {
				all = all && have[id]
			}
			if all || time.Now().After(deadline) {
				break
			}
		}
	}
	t.Logf("commit index %d -> %d: %d sampled traces read from jaeger after %v", lo, hi, len(traces), time.Since(waited).Round(time.Millisecond))
	if hi-lo < puts {
		t.Fatalf("commit index moved %d, want at least %d puts", hi-lo, puts)
	}
	ms := func(ns int64) int64 { return ns / 1000 } // Jaeger keeps µs
	var checked, roots, durations int
	for i := lo + 1; i <= hi; i++ {
		le := recs[lead][i]
		k := otlp.Key{Cluster: cluster, Term: le.Term, Index: i}
		if i%every != 0 {
			if spans := jaegerTrace(t, query, otlp.TraceID(k).String()); spans != nil {
				t.Errorf("index %d is not 1 in %d but jaeger has %d spans of it", i, every, len(spans))
			}
			continue
		}
		spans := traces[i]
		byID := map[string]*jaegerSpan{}
		members := map[string]int{}
		for n := range spans {
			s := &spans[n]
			byID[s.SpanID] = s
			members[s.tag("etcd.member.id")]++
			// Each span's duration in Jaeger is the agent's, to the µs.
			ns, err := strconv.ParseInt(s.tag("etcdscope.duration_ns"), 10, 64)
			if err != nil || s.Duration != ms(ns) {
				t.Errorf("index %d span %q: %d µs in jaeger, the agent's %d ns (%v)", i, s.Operation, s.Duration, ns, err)
			}
		}
		if len(members) != 3 {
			t.Errorf("index %d: %d spans from members %v: want spans from all three", i, len(spans), members)
			continue
		}
		// want checks that span (member, part) is in the trace, under
		// (parent member, parent part), and lasts ns.
		want := func(member commit.MemberID, part string, pm commit.MemberID, pp string, ns int64) {
			t.Helper()
			s := byID[otlp.SpanID(k, member, part).String()]
			switch {
			case s == nil:
				t.Errorf("index %d: no span %s of %s", i, part, hex(member))
			case pp == "" && s.parent() != "":
				t.Errorf("index %d: span %s of %s has parent %s, want none (the root)", i, part, hex(member), s.parent())
			case pp != "" && s.parent() != otlp.SpanID(k, pm, pp).String():
				t.Errorf("index %d: span %s of %s under %s, want under %s of %s", i, part, hex(member), s.parent(), pp, hex(pm))
			case ns >= 0 && s.Duration != ms(ns):
				t.Errorf("index %d: span %s of %s lasts %d µs, the records %d ns", i, part, hex(member), s.Duration, ns)
			case ns >= 0:
				durations++
			}
		}
		if root := byID[otlp.SpanID(k, 0, otlp.PartWrite).String()]; root != nil {
			roots++
			want(0, otlp.PartWrite, 0, "", -1)
			want(lead, otlp.PartReplicate, 0, otlp.PartWrite, -1)
			// The write's parts under it sum to it (each floored to
			// the µs: within one µs a part).
			var sum, parts int64
			for n := range spans {
				if s := &spans[n]; s.parent() == root.SpanID && s.tag("etcdscope.part") != otlp.PartReplicate {
					sum, parts = sum+s.Duration, parts+1
				}
			}
			if parts == 0 || sum > root.Duration || sum < root.Duration-parts {
				t.Errorf("index %d: the write's %d parts sum to %d µs, the write %d µs", i, parts, sum, root.Duration)
			}
		}
		want(lead, otlp.PartWALAppend, lead, otlp.PartReplicate, int64(le.SaveEndNs-le.SaveStartNs))
		acks := map[commit.MemberID]uint64{}
		for _, a := range le.Acks {
			acks[a.Member] = a.AckNs
		}
		for _, f := range followers {
			want(lead, otlp.VotePart(f), lead, otlp.PartReplicate, int64(acks[f]-le.SendNs))
			fe := recs[f][i]
			sp, ok := fe.Split()
			if !ok {
				t.Errorf("index %d: %s's record %+v not split", i, hex(f), fe)
				continue
			}
			want(f, otlp.PartEntry, lead, otlp.VotePart(f), sp.TotalNs)
			want(f, otlp.PartQueue, f, otlp.PartEntry, sp.QueueNs)
			want(f, otlp.PartWALAppend, f, otlp.PartEntry, sp.WALNs)
			want(f, otlp.PartRespond, f, otlp.PartEntry, sp.RespondNs)
			if sp.FdatasyncNs > 0 {
				want(f, otlp.PartFdatasync, f, otlp.PartWALAppend, sp.FdatasyncNs)
			}
		}
		// The join's numbers (etcdscope cluster): the deciding vote and
		// the deciding follower's time are those spans' durations.
		if w, ok := joined[i]; ok && w.Joined() && !w.DeciderLocal && w.Follower != nil {
			want(lead, otlp.VotePart(w.Decider), lead, otlp.PartReplicate, w.VoteNs)
			want(w.Decider, otlp.PartEntry, lead, otlp.VotePart(w.Decider), w.Follower.TotalNs)
			if s := byID[otlp.SpanID(k, lead, otlp.VotePart(w.Decider)).String()]; s != nil && s.tag("etcdscope.deciding_vote") != "true" {
				t.Errorf("index %d: the vote of %s decided (cluster join) but its span is not marked deciding", i, hex(w.Decider))
			}
		}
		checked++
	}
	sampled := int((hi / every) - (lo / every))
	t.Logf("%d sampled writes checked in jaeger (%d with the write's root span), %d span durations equal to the records' to the µs; %d not sampled, absent",
		checked, roots, durations, int(hi-lo)-sampled)
	// The puts ran at the leader, whose agent follows every write: each
	// sampled entry is a put's, with its root (2026-12-06: all).
	if checked != sampled || roots != sampled {
		t.Errorf("%d traces checked, %d roots: want every one of the %d sampled writes", checked, roots, sampled)
	}
	for n, s := range serves {
		fams := s.scrape(t)
		exported := etcdtest.SumCounter(fams, otlp.MetricSpansExported)
		dropped := etcdtest.SumCounter(fams, otlp.MetricSpansDropped)
		t.Logf("%s: %.0f spans exported, %.0f dropped", c.Members[n].Name, exported, dropped)
		if exported < float64(5*checked) || dropped != 0 {
			t.Errorf("%s: %.0f spans exported, %.0f dropped: want at least 5 per sampled write, none dropped", c.Members[n].Name, exported, dropped)
		}
	}
	// The collector goes away; more writes; every agent still exits
	// within 2 s of SIGTERM (its export to the dead collector cut short),
	// and the leader's says how many spans it could not export.
	stopJaeger()
	lcli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 10; n++ {
		if _, err := lcli.Put(ctx, fmt.Sprintf("%sotlp-after-%d", etcdtest.PutKeyPrefix, n), "v"); err != nil {
			t.Fatal(err)
		}
	}
	lcli.Close()
	time.Sleep(2500 * time.Millisecond) // entries settle (1 s), a batch (1 s) tries the dead collector
	for n, s := range serves {
		start := time.Now()
		s.cmd.Process.Signal(syscall.SIGTERM)
		err := s.cmd.Wait()
		d := time.Since(start)
		t.Logf("%s: serve exited %v after SIGTERM with the collector gone (%v)", c.Members[n].Name, d.Round(time.Millisecond), err)
		if d > 2*time.Second || err != nil {
			t.Errorf("%s: serve took %v to exit on SIGTERM (%v); stderr:\n%s", c.Members[n].Name, d, err, s.stderr.String())
		}
		// Its last writes' spans failed to export before the signal
		// (the once-a-minute line) or were cut short at exit.
		if c.Members[n] == leader && !strings.Contains(s.stderr.String(), "spans not exported") {
			t.Errorf("%s (leader): no line on the spans it could not export; stderr:\n%s", c.Members[n].Name, s.stderr.String())
		}
	}
	t.Run("min-duration", func(t *testing.T) { testOTLPMinDuration(t, c, leader, cluster) })
}

// minDuration is the second phase's --otlp-min-duration: a bucket bound
// of the duration histograms (exporter.DurationBuckets: 0.01/2 s), so
// that they count the writes and entries on each side of it. With the
// phase's puts (short and 1 MiB values in turn) each member's part and
// the write's total fell on each side of it 9 times or more of 40 in
// each of 5 runs (docs/testing.md, "OTLP traces against a real Jaeger").
const minDuration = 5 * time.Millisecond

// testOTLPMinDuration is TestClusterOTLPJaeger's second phase: three new
// agents with --otlp-min-duration (every write sampled) export to a new
// Jaeger; the puts alternate a short value and 1 MiB, so that each
// member's own part falls on both sides of the threshold. By its
// records (/commit/entries, what `etcdscope cluster` joins) and its
// metrics, each member's spans of a write are in Jaeger exactly when its
// part met the threshold: the leader's replication (Send to quorum),
// each follower's entry (receive to answer), the write's root (its
// total: as many roots as the leader's etcdscope_commit_duration_seconds
// counts above it, each at least that long); and each member's
// etcdscope_otlp_entries_total counts the others not_sampled.
func testOTLPMinDuration(t *testing.T, c *etcdtest.Cluster, leader *etcdtest.Member, cluster uint64) {
	began := time.Now()
	query, otlpAddr, _ := startJaeger(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var agents []string
	serves := map[commit.MemberID]*server{}
	for _, m := range c.Members {
		s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL,
			"--otlp-endpoint", otlpAddr, "--otlp-insecure", "--otlp-min-duration", minDuration.String())
		agents = append(agents, "http://"+s.addr)
		serves[commit.MemberID(m.ID)] = s
	}
	before := restingCommitIndex(ctx, t, c, leader)
	pre := map[commit.MemberID]map[string]*dto.MetricFamily{}
	for id, s := range serves {
		pre[id] = s.scrape(t)
	}
	const puts = 40
	big := strings.Repeat("x", 1<<20)
	lo, hi := putValuesAndSettle(ctx, t, c, leader, agents, before, puts, "otlp-min", func(i int) string {
		if i%2 == 1 {
			return big
		}
		return "v"
	})
	if hi-lo != puts {
		t.Fatalf("commit index %d -> %d: want the %d puts' entries only", lo, hi, puts)
	}
	lead := commit.MemberID(leader.ID)
	// delta is what a counter or histogram of member id's agent moved by
	// since the puts began (labels: those of the series).
	post := map[commit.MemberID]map[string]*dto.MetricFamily{}
	delta := func(id commit.MemberID, name string, labels map[string]string) float64 {
		return counterWith(post[id][name], labels) - counterWith(pre[id][name], labels)
	}
	above := func(id commit.MemberID, name string, labels map[string]string) float64 {
		return histAbove(t, post[id][name], labels, minDuration.Seconds()) - histAbove(t, pre[id][name], labels, minDuration.Seconds())
	}
	// Every agent's sink has handled each entry of the puts (an outcome
	// each) and the leader's every write (the histogram counts it after
	// the sink took it).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		done := true
		for id, s := range serves {
			post[id] = s.scrape(t)
			done = done && delta(id, otlp.MetricEntries, nil) >= puts
		}
		done = done && delta(lead, "etcdscope_commit_duration_seconds", map[string]string{"role": "leader"}) >= puts
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s, not every agent's sink handled the %d puts' entries and writes", puts)
		}
	}
	_, recs := fetchRecords(ctx, t, agents, lo)
	// Each member's part of each entry by its records: the leader's
	// replication from its Send (or Save) to the later of its Save's end
	// and the first ack (the quorum of 3), a follower's receive to answer.
	part := map[commit.MemberID]map[uint64]int64{}
	for id := range serves {
		part[id] = map[uint64]int64{}
		for i := lo + 1; i <= hi; i++ {
			e, ok := recs[id][i]
			if !ok {
				t.Errorf("index %d: not in %x's window", i, uint64(id))
				continue
			}
			if id == lead {
				part[id][i] = replicationNs(&e)
			} else if sp, ok := e.Split(); ok {
				part[id][i] = sp.TotalNs
			} else {
				part[id][i] = -1
			}
		}
	}
	d := minDuration.Nanoseconds()
	// Jaeger's spans of the puts, once it holds every span of a part that
	// met the threshold (by the records; the roots: as many as the
	// histogram counts) and what each agent counts exported. The spans of
	// every entry were made when the outcome was counted: after the
	// batcher's 1 s they are exported, so that a span that should not be
	// there has come too.
	time.Sleep(1500 * time.Millisecond)
	traces := map[uint64][]jaegerSpan{}
	inJaeger := map[commit.MemberID]int{}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		clear(inJaeger)
		all := true
		var roots float64
		for i := lo + 1; i <= hi; i++ {
			k := otlp.Key{Cluster: cluster, Term: recs[lead][i].Term, Index: i}
			traces[i] = jaegerTrace(t, query, otlp.TraceID(k).String())
			have := map[string]bool{}
			for n := range traces[i] {
				js := &traces[i][n]
				id, _ := strconv.ParseUint(js.tag("etcd.member.id"), 16, 64)
				inJaeger[commit.MemberID(id)]++
				have[js.SpanID] = true
				if js.tag("etcdscope.part") == otlp.PartWrite {
					roots++
				}
			}
			for id := range serves {
				own := otlp.PartEntry
				if id == lead {
					own = otlp.PartReplicate
				}
				all = all && (part[id][i] < d || have[otlp.SpanID(k, id, own).String()])
			}
		}
		all = all && roots >= above(lead, "etcdscope_commit_duration_seconds", map[string]string{"role": "leader"})
		for id, s := range serves {
			post[id] = s.scrape(t)
			all = all && float64(inJaeger[id]) == delta(id, otlp.MetricSpansExported, nil)
		}
		if all || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("puts at indexes %d-%d handled, their spans in jaeger, after %v", lo+1, hi, time.Since(began).Round(time.Millisecond))
	for _, m := range c.Members {
		id := commit.MemberID(m.ID)
		exported, dropped := delta(id, otlp.MetricSpansExported, nil), delta(id, otlp.MetricSpansDropped, nil)
		if float64(inJaeger[id]) != exported || dropped != 0 {
			t.Errorf("%s: %d spans in jaeger, %.0f counted exported, %.0f dropped: want all in jaeger, none dropped", m.Name, inJaeger[id], exported, dropped)
		}
	}
	// Each member's spans of an entry are in Jaeger exactly when its
	// part met the threshold; the agent counts the rest not_sampled.
	for _, m := range c.Members {
		id := commit.MemberID(m.ID)
		own := otlp.PartEntry
		if id == lead {
			own = otlp.PartReplicate
		}
		var met, under, incomplete int
		var metNs, underNs []int64
		for i := lo + 1; i <= hi; i++ {
			k := otlp.Key{Cluster: cluster, Term: recs[lead][i].Term, Index: i}
			var s *jaegerSpan
			var spans int
			for n := range traces[i] {
				js := &traces[i][n]
				if js.tag("etcd.member.id") != strconv.FormatUint(uint64(id), 16) || strings.HasPrefix(js.tag("etcdscope.part"), otlp.PartWrite) {
					continue // another member's, or the write's (below)
				}
				spans++
				if js.SpanID == otlp.SpanID(k, id, own).String() {
					s = js
				}
			}
			ns := part[id][i]
			switch {
			case ns < 0:
				incomplete++
			case ns >= d:
				met++
				metNs = append(metNs, ns)
				if s == nil || s.Duration != ns/1000 || spans < 3 {
					t.Errorf("index %d: %s's %s lasted %d ns (records), at least %v: want its span of that duration and its parts in jaeger; have %d spans of it, %s %+v",
						i, m.Name, own, ns, minDuration, spans, own, s)
				}
			default:
				under++
				underNs = append(underNs, ns)
				if spans != 0 {
					t.Errorf("index %d: %s's %s lasted %d ns (records), under %v: want none of its spans in jaeger, have %d", i, m.Name, own, ns, minDuration, spans)
				}
			}
		}
		t.Logf("%s: %s at least %v in %d entries (%s), under it in %d (%s), %d incomplete", m.Name, own, minDuration, met, spread(metNs), under, spread(underNs), incomplete)
		o := func(outcome string) float64 {
			return delta(id, otlp.MetricEntries, map[string]string{"outcome": outcome})
		}
		if o("exported") != float64(met) || o("not_sampled") != float64(under) || o("incomplete") != float64(incomplete) || o("missed") != 0 {
			t.Errorf("%s: entries exported %.0f, not_sampled %.0f, incomplete %.0f, missed %.0f: want %d, %d, %d (the records), 0",
				m.Name, o("exported"), o("not_sampled"), o("incomplete"), o("missed"), met, under, incomplete)
		}
		if met == 0 || under == 0 {
			t.Errorf("%s: %d entries met the threshold, %d did not: the puts are meant to put each member's part on both sides of %v", m.Name, met, under, minDuration)
		}
		// The follower's own histogram of the same times agrees.
		if id != lead {
			if n := above(id, "etcdscope_commit_follower_entry_duration_seconds", map[string]string{"part": "total"}); n != float64(met) {
				t.Errorf("%s: etcdscope_commit_follower_entry_duration_seconds{part=\"total\"} counts %.0f entries above %v, the records %d", m.Name, n, minDuration, met)
			}
		}
	}
	// The writes' roots: as many as the leader's histogram of their totals
	// counts above the threshold, each at least that long, with its parts.
	writes := delta(lead, "etcdscope_commit_duration_seconds", map[string]string{"role": "leader"})
	slow := above(lead, "etcdscope_commit_duration_seconds", map[string]string{"role": "leader"})
	var roots []int64
	for i := lo + 1; i <= hi; i++ {
		var root *jaegerSpan
		var parts int
		for n := range traces[i] {
			js := &traces[i][n]
			if ns, err := strconv.ParseInt(js.tag("etcdscope.duration_ns"), 10, 64); err != nil || js.Duration != ns/1000 {
				t.Errorf("index %d span %q: %d µs in jaeger, the agent's %d ns (%v)", i, js.Operation, js.Duration, ns, err)
			}
			switch p := js.tag("etcdscope.part"); {
			case p == otlp.PartWrite:
				root = js
			case strings.HasPrefix(p, otlp.PartWrite+"/"):
				parts++
			}
		}
		if root == nil {
			if parts != 0 {
				t.Errorf("index %d: %d parts of the write in jaeger without its root", i, parts)
			}
			continue
		}
		ns, _ := strconv.ParseInt(root.tag("etcdscope.duration_ns"), 10, 64)
		roots = append(roots, ns)
		if ns < d || parts == 0 {
			t.Errorf("index %d: the write's root lasts %d ns with %d parts: want at least %v, with its parts", i, ns, parts, minDuration)
		}
	}
	t.Logf("%.0f writes on the leader (etcdscope_commit_duration_seconds), %.0f above %v, %.0f under; %d roots in jaeger (%s)", writes, slow, minDuration, writes-slow, len(roots), spread(roots))
	if writes != puts || float64(len(roots)) != slow || len(roots) == 0 || len(roots) == puts {
		t.Errorf("%d write roots in jaeger, the leader's histogram %.0f of %.0f writes above %v: want them equal, %d writes, some on each side",
			len(roots), slow, writes, minDuration, puts)
	}
}

// spread is the range of ns, in ms.
func spread(ns []int64) string {
	if len(ns) == 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f-%.2f ms", float64(slices.Min(ns))/1e6, float64(slices.Max(ns))/1e6)
}

// replicationNs is the leader's replication of e by its record: from its
// Send of the entry (or its Save, if earlier) to the later of its Save's
// end and the first follower's ack (the quorum of three members); -1
// without a Save.
func replicationNs(e *commit.Entry) int64 {
	if e.SaveStartNs == 0 || e.SaveEndNs < e.SaveStartNs {
		return -1
	}
	start, first := e.SaveStartNs, uint64(0)
	if e.SendNs != 0 && e.SendNs < start {
		start = e.SendNs
	}
	for _, a := range e.Acks {
		if a.AckNs >= e.SendNs && (first == 0 || a.AckNs < first) {
			first = a.AckNs
		}
	}
	return int64(max(e.SaveEndNs, first) - start)
}

// counterWith sums the counters (or histogram counts) of f's series whose
// labels include every pair in labels.
func counterWith(f *dto.MetricFamily, labels map[string]string) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		if labelsMatch(m, labels) {
			v += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

// histAbove counts the observations of f's series matching labels above
// bucket bound le (which must be one of the histogram's bounds).
func histAbove(t *testing.T, f *dto.MetricFamily, labels map[string]string, le float64) float64 {
	t.Helper()
	var n float64
	for _, m := range f.GetMetric() {
		if !labelsMatch(m, labels) {
			continue
		}
		h := m.GetHistogram()
		found := false
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == le {
				n += float64(h.GetSampleCount() - b.GetCumulativeCount())
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: no bucket bound %g", f.GetName(), le)
		}
	}
	return n
}

// TestClusterOTLPJaegerTLS runs a real Jaeger whose OTLP gRPC receiver
// has TLS with a certificate of a CA the test makes, and one etcd member
// with two agents in turn, each sending an authorization header (Jaeger
// does not check it: exporter/otlp's TestSinkTLSHeaders has a receiver
// that does). The first trusts the system's roots and has its header
// from OTEL_EXPORTER_OTLP_HEADERS, beside OTEL_EXPORTER_OTLP_INSECURE=true
// (which serve must not follow: the header would go in clear): none of
// its writes' traces is in Jaeger, its exports fail and are counted, and
// its one log line names the certificate (a plain connection would fail
// without one). The second has --otlp-ca and its header from
// --otlp-header-file, another beside it by --otlp-header: every write's
// trace is in Jaeger, with the durations of the agent's records. Neither
// agent's output holds the header's value.
func TestClusterOTLPJaegerTLS(t *testing.T) {
	testenv.RequireRoot(t)
	caFile, certFile, keyFile, err := etcdtest.ServerCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	query, otlpAddr, _ := startJaeger(t, certFile, keyFile)
	c := etcdtest.Start(t, etcdtest.Options{Members: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := c.Members[0]
	const secret = "etcdscope-e2e-secret-0123456789"
	cluster := clusterID(ctx, t, m.ClientURL)
	// run starts an agent with extra flags and env, makes 10 puts, waits for
	// their spans' export (entries settle in 1 s, a batch in 1 s, an
	// export and its retries end within --otlp-timeout 1 s), and
	// stops it; it returns each put's trace ID, the agent's counters and
	// its stderr.
	run := func(name string, env []string, extra ...string) (traces map[uint64]string, exported, dropped float64, stderr string) {
		args := append([]string{"--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL,
			"--otlp-endpoint", otlpAddr, "--otlp-timeout", "1s"}, extra...)
		s := startServeIn(t, "", env, args...)
		agent := []string{"http://" + s.addr}
		lo, hi := putAndSettle(ctx, t, c, m, agent, restingCommitIndex(ctx, t, c, m), 10, name)
		windows, err := pipeline.FetchEntryWindows(ctx, agent, lo, 5*time.Second)
		if err != nil || len(windows) != 1 {
			t.Fatalf("%s: /commit/entries: %d windows, %v", name, len(windows), err)
		}
		traces = map[uint64]string{}
		for _, e := range windows[0].Entries {
			if e.Index > lo && e.Index <= hi {
				traces[e.Index] = otlp.TraceID(otlp.Key{Cluster: cluster, Term: e.Term, Index: e.Index}).String()
			}
		}
		time.Sleep(4 * time.Second)
		fams := s.scrape(t)
		exported = etcdtest.SumCounter(fams, otlp.MetricSpansExported)
		dropped = etcdtest.SumCounter(fams, otlp.MetricSpansDropped)
		s.cmd.Process.Signal(syscall.SIGTERM)
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("%s: serve: %v", name, err)
		}
		stderr = s.stderr.String()
		t.Logf("%s: indexes %d-%d, %d in the agent's window; %.0f spans exported, %.0f dropped", name, lo+1, hi, len(traces), exported, dropped)
		if len(traces) < 10 {
			t.Errorf("%s: %d of the 10 puts' entries in the agent's window", name, len(traces))
		}
		if strings.Contains(stderr, secret) {
			t.Errorf("%s: the header's value is in serve's output:\n%s", name, stderr)
		}
		return traces, exported, dropped, stderr
	}

	traces, exported, dropped, stderr := run("otlp-noca",
		[]string{"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20" + secret, "OTEL_EXPORTER_OTLP_INSECURE=true"})
	t.Logf("without --otlp-ca, serve said: %s", strings.TrimSpace(stderr))
	for i, id := range traces {
		if spans := jaegerTrace(t, query, id); spans != nil {
			t.Errorf("without --otlp-ca: index %d has %d spans in jaeger, want none (its certificate is not trusted)", i, len(spans))
		}
	}
	if exported != 0 || dropped < float64(len(traces)) || !strings.Contains(stderr, "spans not exported") || !strings.Contains(stderr, "certificate") {
		t.Errorf("without --otlp-ca: %.0f spans exported, %.0f dropped: want none exported, each write's counted, a line naming the certificate; stderr:\n%s", exported, dropped, stderr)
	}

	headers := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headers, []byte("authorization=Bearer "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	traces, exported, dropped, stderr = run("otlp-ca", nil, "--otlp-ca", caFile, "--otlp-header-file", headers, "--otlp-header", "x-scope-orgid=e2e")
	var spansSeen int
	for i, id := range traces {
		var spans []jaegerSpan
		for deadline := time.Now().Add(10 * time.Second); spans == nil && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			spans = jaegerTrace(t, query, id)
		}
		root := 0
		for n := range spans {
			s := &spans[n]
			ns, err := strconv.ParseInt(s.tag("etcdscope.duration_ns"), 10, 64)
			if err != nil || s.Duration != ns/1000 {
				t.Errorf("index %d span %q: %d µs in jaeger, the agent's %d ns (%v)", i, s.Operation, s.Duration, ns, err)
			}
			if s.parent() == "" {
				root++
			}
		}
		spansSeen += len(spans)
		if root != 1 || len(spans) < 3 {
			t.Errorf("with --otlp-ca: index %d: %d spans in jaeger, %d roots: want the write's root and its parts", i, len(spans), root)
		}
	}
	t.Logf("with --otlp-ca: %d traces, %d spans in jaeger", len(traces), spansSeen)
	if exported < float64(spansSeen) || dropped != 0 || strings.Contains(stderr, "not exported") {
		t.Errorf("with --otlp-ca: %.0f spans exported, %.0f dropped, %d in jaeger: want all exported; stderr:\n%s", exported, dropped, spansSeen, stderr)
	}
}
