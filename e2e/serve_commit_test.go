package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	bin := etcdNamed(t, comm)
	c := etcdtest.Start(t, etcdtest.Options{Binary: bin})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := c.Members[0]
	first := m.PID
	s := startServe(t, "--comm", comm, "--commit-comm", comm)
	// The process running at the start is said by the name given (the
	// new-user walk: no line for it, and "etcd" for any name). 3 runs: said
	// 0 s after the ready file each time (followCommit's first line); 5 s
	// is the margin for a machine shared with other runs.
	s.waitFor(t, fmt.Sprintf("following %s pid %d", comm, first), 5*time.Second)

	var committed float64
	phase := func(name string) {
		t.Helper()
		committed += putsCommitted(ctx, t, c, m, "serve-restart-"+name, 60)
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
	s.waitFor(t, fmt.Sprintf("following %s pid %d", comm, m.PID), 20*time.Second)
	phase("after")

	fams, writes := s.waitSplit(t, committed)
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
	// So do those of the fsync tracer on etcd, each life's in turn (the
	// first's, closed, cannot be read: the series went missing).
	if lost := lostOf(fams, "commit_fsync"); lost != 0 {
		t.Errorf("etcdscope_lost_events_total{tracer=\"commit_fsync\"} = %v after the restart, want 0 (-1: absent)\nstderr:\n%s", lost, s.stderr.String())
	}
	// Each life is said once.
	for _, pid := range []int{first, m.PID} {
		if n := strings.Count(s.stderr.String(), fmt.Sprintf("following %s pid %d\n", comm, pid)); n != 1 {
			t.Errorf("serve said it follows pid %d %d times, want once\nstderr:\n%s", pid, n, s.stderr.String())
		}
	}
}

// putsCommitted makes n puts at m, keys under prefix, and returns how far
// etcd's own etcd_server_proposals_committed_total moved, at rest before
// and after.
func putsCommitted(ctx context.Context, t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member, prefix string, n int) float64 {
	t.Helper()
	before := restingCommitIndex(ctx, t, c, m)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%s-%03d", etcdtest.PutKeyPrefix, prefix, i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	after := restingCommitIndex(ctx, t, c, m)
	return gauge(after, "etcd_server_proposals_committed_total") - gauge(before, "etcd_server_proposals_committed_total")
}

// waitSplit scrapes serve until the split counts committed writes, 20 s
// at most (the joiner resolves a write once the events after it came),
// and returns the last scrape and its count.
func (s *server) waitSplit(t *testing.T, committed float64) (map[string]*dto.MetricFamily, uint64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		fams := s.scrape(t)
		writes := histCount(fams["etcdscope_commit_duration_seconds"], nil)
		if float64(writes) >= committed || time.Now().After(deadline) {
			return fams, writes
		}
	}
}

// etcdNamed returns a copy of the test's etcd binary named comm, for an
// etcd whose comm is the test's own.
func etcdNamed(t *testing.T, comm string) string {
	t.Helper()
	b, err := os.ReadFile(testenv.EtcdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), comm)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// waitFor waits up to within for serve to say line on stderr.
func (s *server) waitFor(t *testing.T, line string, within time.Duration) {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(within); !strings.Contains(s.stderr.String(), line); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not say %q within %v; stderr:\n%s", line, within, s.stderr.String())
		}
	}
	t.Logf("serve said %q %v after the wait began", line, time.Since(start).Round(time.Millisecond))
}

// lostOf returns etcdscope_lost_events_total of tracer (-1: absent).
func lostOf(fams map[string]*dto.MetricFamily, tracer string) float64 {
	for _, m := range fams["etcdscope_lost_events_total"].GetMetric() {
		if labelsOf(m)["tracer"] == tracer {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// TestServeCommitWaitsForFirst starts `etcdscope serve --commit-comm`
// before any process of that comm runs (a node's boot: the agent before
// etcd's static pod): serve starts, says once that it waits, serves
// /commit/entries and the commit metrics as between lives (nothing yet),
// then follows the one-member etcd started after it: the writes seen over
// 40 puts equal the move of etcd's etcd_server_proposals_committed_total,
// every write seen is split, and the fsync tracer on it reports its
// losses.
func TestServeCommitWaitsForFirst(t *testing.T) {
	testenv.RequireRoot(t)
	const comm = "etcdlater"
	bin := etcdNamed(t, comm)
	s := startServe(t, "--comm", comm, "--commit-comm", comm)
	waiting := "waiting for a process named " + comm
	s.waitFor(t, waiting, 5*time.Second)
	fams := s.scrape(t)
	if seen, exits := gauge(fams, "etcdscope_commit_writes_seen_total"), gauge(fams, "etcdscope_commit_etcd_exits_total"); seen != 0 || exits != 0 {
		t.Errorf("before etcd: writes seen %v, exits %v; want 0, 0", seen, exits)
	}
	resp, err := http.Get("http://" + s.addr + "/commit/entries")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /commit/entries before etcd: %s, want 200", resp.Status)
	}

	c := etcdtest.Start(t, etcdtest.Options{Binary: bin})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := c.Members[0]
	s.waitFor(t, fmt.Sprintf("following %s pid %d", comm, m.PID), 20*time.Second)
	// etcd's own first entries (its member attributes, the cluster
	// version) may come after serve attached: counted from a rest.
	restingCommitIndex(ctx, t, c, m)
	seen0 := gauge(s.scrape(t), "etcdscope_commit_writes_seen_total")
	committed := putsCommitted(ctx, t, c, m, "serve-first", 40)
	seen := gauge(s.scrape(t), "etcdscope_commit_writes_seen_total")
	fams, writes := s.waitSplit(t, seen)
	t.Logf("etcd pid %d started after serve; commit index +%v over the puts, writes seen +%v; seen %v, split %d in all", m.PID, committed, seen-seen0, seen, writes)
	if committed < 40 || seen-seen0 != committed || float64(writes) != seen {
		t.Errorf("writes seen +%v over the puts (%v in all), split %d in all; etcd's commit index moved by %v over 40 puts: want the moves equal, and every write seen split\nstderr:\n%s", seen-seen0, seen, writes, committed, s.stderr.String())
	}
	if n := strings.Count(s.stderr.String(), waiting); n != 1 {
		t.Errorf("%q said %d times, want once", waiting, n)
	}
	if lost := lostOf(fams, "commit_fsync"); lost != 0 {
		t.Errorf("etcdscope_lost_events_total{tracer=\"commit_fsync\"} = %v, want 0 (-1: absent)", lost)
	}
}

// TestServeCommitStopsWithin2s stops `etcdscope serve --commit-pid`
// (with --etcd-endpoints, the commit run's fsync tracer on etcd and its
// --writes tracepoints) 8 times with SIGINT or SIGTERM, at a random
// moment up to 1.5 s after ready, while etcd takes puts and serve is
// scraped: each must exit 0 within stopBound of the signal (the project's
// promise; e2e/signal_test.go). The times are logged, worst first.
//
// Measured on Linux 6.18, 2 cores, etcd taking puts and serve scraped in
// a loop, old (37d63f7) and new (this change) stopped in turn, N = 10
// each: load 2.5-6, old median 0.77 s, worst 0.93 s; new median 0.69 s,
// worst 0.97 s. Load 8-12: old median 0.93 s, worst 1.39 s; new median
// 0.73 s, worst 0.80 s. This test, 8 stops: old 0.27-1.23 s; new
// 0.53-0.86 s (two runs). Nearly all of what is left is the kernel's
// detach of the tracepoint perf events of the fsync tracer on etcd (17,
// with its --writes tracepoints): the last user of each waits for RCU
// grace periods under one mutex, ~45 ms one after the other; while
// another process holds the same tracepoints it is ~50 ms in all (new:
// 0.06-0.08 s, N = 5). The bound keeps 1 s above the worst seen.
func TestServeCommitStopsWithin2s(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			cli.Put(ctx, fmt.Sprintf("%sserve-stop-%d", etcdtest.PutKeyPrefix, i%100), "v")
		}
	}()
	var times []time.Duration
	for i := range 8 {
		s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL)
		sctx, scancel := context.WithCancel(ctx)
		go func() {
			for sctx.Err() == nil {
				if resp, err := http.Get("http://" + s.addr + "/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[i%2]
		sent := time.Now()
		s.cmd.Process.Signal(sig)
		err := s.cmd.Wait()
		took := time.Since(sent)
		scancel()
		times = append(times, took)
		if took > stopBound || err != nil {
			t.Errorf("%v: exit after %v (%v), want within %v and 0; stderr:\n%s", sig, took.Round(time.Millisecond), err, stopBound, s.stderr.String())
		}
	}
	slices.Sort(times)
	slices.Reverse(times)
	t.Logf("serve --commit-pid: exit after the signal in %d runs, worst first: %v (bound %v)", len(times), times, stopBound)
}

// TestServeCommitWaitsForClientURL starts `etcdscope serve --commit-pid`
// on an etcd whose client port does not answer yet (SIGSTOPped: its
// ports bound, as a member still starting; the new-user walk's serve
// --commit-comm found etcd before its client port answered and exited 1,
// its fsync and peers metrics with it): serve stays up and says once that
// it asks again; once etcd runs, the writes seen over 40 puts equal the
// move of etcd's etcd_server_proposals_committed_total, each split.
func TestServeCommitWaitsForClientURL(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	if err := syscall.Kill(m.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(m.PID, syscall.SIGCONT) }) // before the cluster's stop
	s := startServe(t, "--pid", strconv.Itoa(m.PID), "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL)
	// etcdinfo.MembersTimeout (5 s) for the first look to give up, then
	// the line: 5.028-5.029 s after ready in 3 runs (load 0.1-0.4; set by
	// the timeout, not the load); 15 s leaves 10 for a loaded machine.
	const waiting = "asked again every 5s while etcd runs"
	t0 := time.Now()
	s.waitFor(t, waiting, 15*time.Second)
	t.Logf("the wait line %v after ready", time.Since(t0).Round(time.Millisecond))
	s.scrape(t) // still up: /metrics answers
	if err := syscall.Kill(m.PID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The next look (every 5 s, pipeline.clusterRetryEvery) finds the
	// member list and the run's readers start; the writes seen count from
	// the probes' attach (the kernel's counter), split once read: waitSplit
	// waits 20 s for them.
	restingCommitIndex(ctx, t, c, m)
	seen0 := gauge(s.scrape(t), "etcdscope_commit_writes_seen_total")
	committed := putsCommitted(ctx, t, c, m, "serve-clienturl", 40)
	seen := gauge(s.scrape(t), "etcdscope_commit_writes_seen_total")
	_, writes := s.waitSplit(t, seen)
	t.Logf("commit index +%v over the puts, writes seen +%v; seen %v, split %d in all", committed, seen-seen0, seen, writes)
	if committed < 40 || seen-seen0 != committed || float64(writes) != seen {
		t.Errorf("writes seen +%v over the puts (%v in all), split %d in all; etcd's commit index moved by %v over 40 puts: want the moves equal, and every write seen split\nstderr:\n%s", seen-seen0, seen, writes, committed, s.stderr.String())
	}
	if n := strings.Count(s.stderr.String(), waiting); n != 1 {
		t.Errorf("%q said %d times, want once\nstderr:\n%s", waiting, n, s.stderr.String())
	}
}
