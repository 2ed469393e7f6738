package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestServeCommitMetrics runs `etcdscope serve --commit-pid <leader>` on a
// real 3-member etcd v3.6 cluster, makes 150 puts at the leader, and
// checks the etcdscope_commit_* metrics against etcd's own:
//   - etcdscope_commit_duration_seconds{role="leader"} counts exactly the
//     delta of the leader's etcd_server_proposals_committed_total (every
//     entry between the scrapes is one of the puts);
//   - the parts' sums add up to the writes' sum (each write's parts sum to
//     its total), with no incomplete write;
//   - every write names its deciding vote, under local_wal or a follower's
//     member name (from --etcd-endpoints), and nothing was lost.
func TestServeCommitMetrics(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(leader.PID), "--etcd-endpoints", leader.ClientURL)
	before := restingCommitIndex(ctx, t, c, leader)

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const puts = 150
	for i := 0; i < puts; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("%sserve-commit-%03d", etcdtest.PutKeyPrefix, i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c.Scrape(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	committed := gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total")

	// The joiner resolves a write once the events after it have come
	// (its grace is 2 s of event time): poll until the count rests.
	var writes uint64
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams := s.scrape(t)
		writes = histCount(fams["etcdscope_commit_duration_seconds"], map[string]string{"role": "leader"})
		if float64(writes) >= committed || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	fams := s.scrape(t)
	writes = histCount(fams["etcdscope_commit_duration_seconds"], map[string]string{"role": "leader"})
	if float64(writes) != committed || committed < puts {
		t.Errorf("serve counted %d writes; the leader's commit index moved by %.0f for %d puts (want equal, ≥ %d)\nstderr:\n%s", writes, committed, puts, puts, s.stderr.String())
	}

	var total, parts float64
	for _, m := range fams["etcdscope_commit_duration_seconds"].GetMetric() {
		total += m.GetHistogram().GetSampleSum()
	}
	perPart := map[string]float64{}
	for _, m := range fams["etcdscope_commit_part_duration_seconds"].GetMetric() {
		perPart[labelsOf(m)["part"]] += m.GetHistogram().GetSampleSum()
		parts += m.GetHistogram().GetSampleSum()
	}
	t.Logf("%d writes, %.3f ms each on average; per part (ms per write): %v", writes, total/float64(writes)*1e3, msPerWrite(perPart, writes))
	if math.Abs(parts-total) > 1e-6 || total <= 0 {
		t.Errorf("the parts sum to %.9f s, the writes to %.9f s: want equal", parts, total)
	}
	if n := gauge(fams, "etcdscope_commit_incomplete_writes_total"); n != 0 {
		t.Errorf("%v incomplete writes", n)
	}
	if seen, sampled, every := gauge(fams, "etcdscope_commit_writes_seen_total"), gauge(fams, "etcdscope_commit_writes_sampled_total"), gauge(fams, "etcdscope_commit_sample_every"); seen != committed || sampled != seen || every != 1 {
		t.Errorf("writes seen %v, sampled %v, 1 in %v; the commit index moved by %v: want all seen and sampled, 1 in 1", seen, sampled, every, committed)
	}
	votes := map[string]float64{}
	for _, m := range fams["etcdscope_commit_deciding_vote_total"].GetMetric() {
		votes[labelsOf(m)["vote"]] += m.GetCounter().GetValue()
	}
	var voted float64
	for v, n := range votes {
		voted += n
		if v != "local_wal" && v != c.Members[0].Name && v != c.Members[1].Name && v != c.Members[2].Name || v == leader.Name {
			t.Errorf("deciding vote %q: want local_wal or a follower's member name", v)
		}
	}
	if voted != float64(writes) {
		t.Errorf("deciding votes %v sum to %v, writes %d", votes, voted, writes)
	}
	for _, m := range fams["etcdscope_lost_events_total"].GetMetric() {
		if labelsOf(m)["tracer"] == "commit" && m.GetCounter().GetValue() != 0 {
			t.Errorf("commit tracer lost %v events", m.GetCounter().GetValue())
		}
	}
	if gauge(fams, "etcdscope_bpf_programs_attached") == 0 {
		t.Error("no attached programs reported")
	}
}

// TestServeCommitSampled runs serve --commit-sample 4 on a one-member
// etcd: every write entering etcd is counted (writes_seen_total equals
// the move of etcd's own etcd_server_proposals_committed_total), 1 in 4
// per CPU is followed (writes_sampled_total between seen/4 and seen/4 +
// one per CPU), and the split observes exactly the sampled writes.
func TestServeCommitSampled(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := c.Members[0]
	s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--commit-sample", "4")
	before := restingCommitIndex(ctx, t, c, m)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const puts = 200
	for i := 0; i < puts; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("%sserve-sampled-%03d", etcdtest.PutKeyPrefix, i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	after := restingCommitIndex(ctx, t, c, m)
	committed := gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total")
	var fams map[string]*dto.MetricFamily
	var writes uint64
	var sampled float64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		fams = s.scrape(t)
		writes = histCount(fams["etcdscope_commit_duration_seconds"], map[string]string{"role": "unknown"})
		sampled = gauge(fams, "etcdscope_commit_writes_sampled_total")
		if float64(writes) >= sampled && sampled > 0 || time.Now().After(deadline) {
			break
		}
	}
	seen, every := gauge(fams, "etcdscope_commit_writes_seen_total"), gauge(fams, "etcdscope_commit_sample_every")
	cpus := float64(runtime.NumCPU())
	t.Logf("commit index +%v for %d puts; seen %v, sampled %v (1 in %v), split %d", committed, puts, seen, sampled, every, writes)
	if seen != committed || committed < puts {
		t.Errorf("writes seen %v; etcd's commit index moved by %v for %d puts: want equal", seen, committed, puts)
	}
	if every != 4 || sampled < math.Ceil(seen/4) || sampled > seen/4+cpus {
		t.Errorf("sampled %v of %v writes at 1 in %v: want within [%v, %v]", sampled, seen, every, math.Ceil(seen/4), seen/4+cpus)
	}
	if float64(writes) != sampled {
		t.Errorf("split %d writes, sampled %v: want equal", writes, sampled)
	}
}

func msPerWrite(sums map[string]float64, writes uint64) map[string]string {
	out := map[string]string{}
	for k, v := range sums {
		out[k] = fmt.Sprintf("%.3f", v/float64(writes)*1e3)
	}
	return out
}

// TestServeCommitFollowsRestart: `serve --commit-comm` follows etcd across
// a restart, as a static pod's or a supervisor's (the DaemonSet's case):
// a one-member etcd, run from a copy of the binary under a comm of this
// test's own, takes 60 puts, is stopped and started again on its data
// dir (a new pid), and takes 60 more. etcdscope_commit_writes_seen_total
// and the split's count each equal the move of etcd's own
// etcd_server_proposals_committed_total over the two phases (the restart's
// own entries, between them, are outside both), and
// etcdscope_commit_etcd_exits_total is 1.
func TestServeCommitFollowsRestart(t *testing.T) {
	testenv.RequireRoot(t)
	const comm = "etcdrestarted"
	b, err := os.ReadFile(testenv.EtcdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), comm)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{Binary: bin})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := c.Members[0]
	first := m.PID
	s := startServe(t, "--comm", comm, "--commit-comm", comm)

	var committed float64
	phase := func(name string) {
		t.Helper()
		before := restingCommitIndex(ctx, t, c, m)
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		for i := 0; i < 60; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("%sserve-restart-%s-%03d", etcdtest.PutKeyPrefix, name, i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		after := restingCommitIndex(ctx, t, c, m)
		committed += gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total")
	}
	phase("before")
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if m.PID == first {
		t.Fatalf("restarted etcd has the same pid %d", first)
	}
	// serve looks for the next etcd every second (commitPollEvery): wait
	// for its line saying it follows the new pid before the next puts.
	following := fmt.Sprintf("following etcd pid %d", m.PID)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(s.stderr.String(), following); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q 20 s after the restart; stderr:\n%s", following, s.stderr.String())
		}
	}
	phase("after")

	var fams map[string]*dto.MetricFamily
	var writes uint64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		fams = s.scrape(t)
		writes = histCount(fams["etcdscope_commit_duration_seconds"], nil)
		if float64(writes) >= committed || time.Now().After(deadline) {
			break
		}
	}
	seen, exits := gauge(fams, "etcdscope_commit_writes_seen_total"), gauge(fams, "etcdscope_commit_etcd_exits_total")
	t.Logf("pids %d then %d; commit index +%v over the two phases; seen %v, split %d, exits %v", first, m.PID, committed, seen, writes, exits)
	if committed < 120 || seen != committed || float64(writes) != committed {
		t.Errorf("writes seen %v, split %d; etcd's commit index moved by %v over 120 puts: want all three equal\nstderr:\n%s", seen, writes, committed, s.stderr.String())
	}
	if exits != 1 {
		t.Errorf("etcdscope_commit_etcd_exits_total %v, want 1", exits)
	}
	// The self-metrics read the tracer of the etcd now traced, on top
	// of the first's final counts: present, and nothing lost.
	lost := -1.0
	for _, m := range fams["etcdscope_lost_events_total"].GetMetric() {
		if labelsOf(m)["tracer"] == "commit" {
			lost = m.GetCounter().GetValue()
		}
	}
	if lost != 0 {
		t.Errorf("etcdscope_lost_events_total{tracer=\"commit\"} = %v after the restart, want 0 (-1: absent)", lost)
	}
}
