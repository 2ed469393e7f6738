package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
	dto "github.com/prometheus/client_model/go"
)

// TestClusterJoin runs `etcdscope serve --commit-pid` beside each member
// of a real 3-member etcd (v3.6, v3.5, and Debian's v3.4: bin/etcd34,
// whose functions and reads tracer.etcdBuilds names) on loopback, makes puts at the leader, and joins
// the three agents' per-entry windows with `etcdscope cluster`. The
// oracle is the leader's own commit index (etcd_server_proposals_committed_total):
// the writes the join reports in the run's index range, joined or counted
// as not joined, are exactly its delta; and for each write a follower
// decided, the follower's receive-to-answer lies within the leader's
// send-to-ack (a non-negative network remainder), while the leader's
// vote of that follower is one of the acks the leader's commit tracer saw.
func TestClusterJoin(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.RepoRoot(t)
	for _, v := range []struct{ name, bin, make string }{
		{"v3.6", filepath.Join(root, "bin", "etcd"), "make etcd"},
		{"v3.5", filepath.Join(root, "bin", "etcd35"), "make etcd35"},
		{"v3.4", debianEtcd(t), "scripts/deps.sh extracts it from Debian's etcd-server"},
	} {
		t.Run(v.name, func(t *testing.T) {
			if _, err := os.Stat(v.bin); err != nil {
				testenv.Missing(t, fmt.Sprintf("no %s (%s)", v.bin, v.make))
			}
			t.Setenv("ETCDSCOPE_ETCD", v.bin)
			checkClusterJoin(t)
		})
	}
}

func checkClusterJoin(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var agents []string
	serves := map[*etcdtest.Member]*server{}
	for _, m := range c.Members {
		s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL)
		agents = append(agents, "http://"+s.addr)
		serves[m] = s
	}
	before := restingCommitIndex(ctx, t, c, leader)
	// Each follower's entries by part, before the puts.
	entryTotals := func(m *etcdtest.Member) (count uint64, total, parts, fdatasync float64) {
		f := serves[m].scrape(t)["etcdscope_commit_follower_entry_duration_seconds"]
		for _, x := range f.GetMetric() {
			switch labelsOf(x)["part"] {
			case "total":
				count, total = x.GetHistogram().GetSampleCount(), x.GetHistogram().GetSampleSum()
			case "queue", "wal_append", "respond":
				parts += x.GetHistogram().GetSampleSum()
			case "wal_sync":
				fdatasync = x.GetHistogram().GetSampleSum()
			}
		}
		return count, total, parts, fdatasync
	}
	// The oracle for a follower's own part: its etcd's WAL fsync
	// histogram (etcd times the fdatasync alone).
	const walFsync = "etcd_disk_wal_fsync_duration_seconds"
	startCount, startSync := map[*etcdtest.Member]uint64{}, map[*etcdtest.Member]float64{}
	etcdStart := map[*etcdtest.Member]map[string]*dto.MetricFamily{}
	for _, m := range c.Members {
		if m != leader {
			startCount[m], _, _, startSync[m] = entryTotals(m)
			if etcdStart[m], err = c.Scrape(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	const puts = 100
	lo, hi := putAndSettle(ctx, t, c, leader, agents, before, puts, "cluster")
	cmd := exec.CommandContext(ctx, etcdscope(t), "cluster", "--members", agents[0]+","+agents[1]+","+agents[2],
		"--since-index", strconv.FormatUint(lo, 10), "--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope cluster: %v\n%s", err, stderr.String())
	}
	var sum render.ClusterSummary
	var writes []commit.ClusterWrite
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var rec struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case "cluster_write":
			var w render.ClusterWriteRecord
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				t.Fatal(err)
			}
			writes = append(writes, w.ClusterWrite)
		case "cluster_summary":
			if err := json.Unmarshal(sc.Bytes(), &sum); err != nil {
				t.Fatal(err)
			}
		}
	}
	table := exec.CommandContext(ctx, etcdscope(t), "cluster", "--members", agents[0]+","+agents[1]+","+agents[2], "--since-index", strconv.FormatUint(lo, 10))
	out, err := table.CombinedOutput()
	t.Logf("etcdscope cluster:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}

	var inRun, joined, byFollower int
	var withCause []commit.ClusterWrite // decided by a follower whose fdatasync its agent split
	for _, w := range writes {
		if w.Index <= lo || w.Index > hi {
			continue
		}
		inRun++
		if !w.Joined() {
			continue
		}
		joined++
		if w.DeciderLocal {
			continue
		}
		byFollower++
		if w.Follower == nil || w.NetworkNs < 0 || w.Follower.TotalNs > w.VoteNs || uint64(w.Decider) == leader.ID {
			t.Errorf("write %d: decider %v, vote %d ns, follower %+v, network %d ns: want a follower whose receive-to-answer lies within the vote", w.Index, w.Decider, w.VoteNs, w.Follower, w.NetworkNs)
			continue
		}
		if w.Follower.Cause != nil {
			withCause = append(withCause, w)
		}
	}
	followerHoles := 0.0
	for _, m := range c.Members {
		if m != leader {
			followerHoles += commitHoles(t, serves[m])
		}
	}
	checkFollowerCauses(t, withCause, byFollower, followerHoles, sum)
	// The leader's own fdatasync, split by its agent, its causes summing
	// to it (2026-12-06: 100 of 100 writes in 2 runs each of v3.6 and
	// v3.5). A write is left unsplit only when its agent's tracers missed
	// or lost the records its join needs: each lost event or missed probe
	// run of the leader's commit and commit_fsync tracers (its own
	// /metrics) hides at most one write's split.
	leaderSplit := 0
	for _, w := range writes {
		if w.Index <= lo || w.Index > hi || w.LeaderCause == nil {
			continue
		}
		leaderSplit++
		var ns int64
		for _, v := range w.LeaderCause.Ns {
			ns += v
		}
		if math.Abs(float64(ns-w.LeaderFdatasyncNs)) > causeSumSlackNs {
			t.Errorf("write %d: the leader's causes sum to %d ns, its fdatasync %d ns", w.Index, ns, w.LeaderFdatasyncNs)
		}
	}
	holes := commitHoles(t, serves[leader])
	t.Logf("the leader's fdatasync split by cause for %d of %d writes; its agent's commit tracers lost or missed %.0f records", leaderSplit, inRun, holes)
	if float64(inRun-leaderSplit) > holes {
		t.Errorf("the leader's fdatasync split for %d of %d writes, with %.0f records lost or missed: want every write split but one per hole", leaderSplit, inRun, holes)
	}
	t.Logf("leader's commit index %d -> %d; %d writes in the range, %d joined (%d decided by a follower); summary: %+v", lo, hi, inRun, joined, byFollower, sum)
	if uint64(inRun) != hi-lo || hi-lo < puts {
		t.Errorf("%d writes joined or not joined in (%d, %d]: want the leader's commit index delta %d (at least %d puts)", inRun, lo, hi, hi-lo, puts)
	}
	// On loopback every agent sees every entry: all but a few at the
	// windows' edges are joined (2026-12-06, 11 runs of v3.6 and v3.5
	// and 9 of v3.4 on this loaded 2-core VM: 100 of 100 joined in each;
	// the bound allows 10).
	if joined < inRun*9/10 {
		t.Errorf("only %d of %d writes joined (not joined: %v)", joined, inRun, sum.NotJoined)
	}
	// The verdict names the vote that decided most joined writes (one
	// of them on a tie), or, when the runner-up decided about as often,
	// both (docs/commit.md, "How the cluster verdict decides"): on
	// loopback the leader's WAL and the two followers decide about a
	// third each (38, 33, 29 of 100 on 2026-12-06).
	most := 0
	for _, n := range sum.Deciders {
		most = max(most, n)
	}
	ev := sum.Evidence
	if ev == nil || sum.Deciders[ev.Decider] != most || !strings.Contains(string(out), "verdict: "+sum.Verdict) {
		t.Fatalf("verdict %q, evidence %+v (table:\n%s): want the evidence's decider one of the most deciding in %v", sum.Verdict, ev, out, sum.Deciders)
	}
	named := func(d string) string {
		for _, m := range c.Members {
			if strconv.FormatUint(m.ID, 16) == d {
				return m.Name
			}
		}
		return "the leader"
	}
	if !strings.Contains(sum.Verdict, named(ev.Decider)) || (ev.Runner != "" && strings.HasPrefix(sum.Verdict, "no single deciding vote") && !strings.Contains(sum.Verdict, named(ev.Runner))) {
		t.Errorf("verdict %q: want it to name %s (and %s when no single vote decides)", sum.Verdict, named(ev.Decider), named(ev.Runner))
	}
	// serve's metrics: each follower observed every entry of the run once
	// (the leader's commit index delta), its parts summing to its
	// totals; the leader observed each follower's acks of its writes.
	for _, m := range c.Members {
		if m == leader {
			continue
		}
		// serve observes an entry once its three records are read:
		// wait until the count holds the run (5 s at most).
		waited := time.Now()
		n, total, parts, sync := entryTotals(m)
		for n-startCount[m] < hi-lo && time.Since(waited) < 5*time.Second {
			time.Sleep(200 * time.Millisecond)
			n, total, parts, sync = entryTotals(m)
		}
		t.Logf("%s: count after %v", m.Name, time.Since(waited).Round(time.Millisecond))
		t.Logf("%s: %d entries received, saved and answered during the run, %.3f ms each on average", m.Name, n-startCount[m], total/float64(max(n, 1))*1e3)
		if n-startCount[m] != hi-lo || math.Abs(parts-total) > 1e-6 {
			t.Errorf("%s: etcdscope_commit_follower_entry_duration_seconds{part=\"total\"} moved by %d, the leader's commit index by %d; parts sum %.9f s, totals %.9f s (want equal)", m.Name, n-startCount[m], hi-lo, parts, total)
		}
		// Its fdatasyncs as etcdscope split them against etcd's own:
		// the (*WAL).sync also flushes the encoder's buffered write, so
		// at least etcd's mean, at most 25% + 100 µs more (the bound
		// of TestCommitSplit for the leader's).
		etcdEnd, err := c.Scrape(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		syncs := etcdtest.SumCounter(etcdEnd, walFsync) - etcdtest.SumCounter(etcdStart[m], walFsync)
		etcdMean := (histSumSeconds(etcdEnd, walFsync) - histSumSeconds(etcdStart[m], walFsync)) / syncs
		ours := (sync - startSync[m]) / float64(n-startCount[m])
		t.Logf("%s: fdatasync mean %.0f µs per entry (etcdscope), %.0f µs over %.0f fsyncs (etcd)", m.Name, ours*1e6, etcdMean*1e6, syncs)
		// Per entry against per fsync: entries that shared an fsync (100
		// entries in 96 fsyncs, a hunt at load 9) each count it, so the
		// entries' mean can fall below the fsyncs' by the batched share;
		// every fsync served an entry, so ours*n >= etcd's sum: the lower
		// bound is etcd's mean times fsyncs per entry (1 without batching).
		entries := float64(n - startCount[m])
		lower := etcdMean * math.Min(syncs, entries) / entries
		if ours < lower || ours > etcdMean*1.25+100e-6 {
			t.Errorf("%s: fdatasync mean %.0f µs per entry, etcd's %.0f µs per fsync (%.0f fsyncs for %.0f entries): want within [%.0f µs, 1.25 x + 100 µs]", m.Name, ours*1e6, etcdMean*1e6, syncs, entries, lower*1e6)
		}
		acks := histCount(serves[leader].scrape(t)["etcdscope_commit_follower_ack_duration_seconds"], map[string]string{"follower": m.Name})
		t.Logf("leader: %d acks of %s observed with its writes", acks, m.Name)
		if acks == 0 || acks > hi-lo {
			t.Errorf("leader: %d acks of %s for %d writes", acks, m.Name, hi-lo)
		}
	}
	if sum.Leader != commit.MemberID(leader.ID) || sum.Voters != 3 {
		t.Errorf("summary leader %v of %d, want %x of 3", sum.Leader, sum.Voters, leader.ID)
	}
}

// checkFollowerCauses: the deciding follower's fdatasync of (nearly)
// every write a follower decided is split by cause on that follower
// (its agent's fsync tracer on its etcd, joined with its (*WAL).sync),
// and the causes sum to the follower's fdatasync time (the sync window).
func checkFollowerCauses(t *testing.T, ws []commit.ClusterWrite, byFollower int, holes float64, sum render.ClusterSummary) {
	t.Helper()
	var diffs []float64 // |causes - fdatasync| per write, µs
	var worst commit.ClusterWrite
	for _, w := range ws {
		var ns int64
		for _, v := range w.Follower.Cause.Ns {
			ns += v
		}
		d := math.Abs(float64(ns-w.Follower.FdatasyncNs)) / 1e3
		if len(diffs) == 0 || d > slices.Max(diffs) {
			worst = w
		}
		diffs = append(diffs, d)
	}
	slices.Sort(diffs)
	withWrites := 0
	for _, w := range ws {
		if w.Follower.Cause.WritesNs > 0 {
			withWrites++
		}
	}
	t.Logf("%d of %d split fdatasyncs joined the WAL encoder's write(2) before them", withWrites, len(ws))
	t.Logf("follower fdatasync by cause: %d of %d follower-decided writes split; summary %+v", len(ws), byFollower, sum.FollowerCause)
	if len(diffs) > 0 {
		t.Logf("|causes - fdatasync| per write: min %.3f, p50 %.3f, max %.3f µs (the worst: write %d, follower %+v, cause %+v)",
			diffs[0], diffs[len(diffs)/2], diffs[len(diffs)-1], worst.Index, *worst.Follower, *worst.Follower.Cause)
	}
	// Measured 2026-12-06: every follower-decided write split (53-80 a
	// run, 5 runs of v3.6 and v3.5; 64-86 a run, 9 runs of v3.4). One may go unsplit only per record the followers'
	// agents lost or missed (commitHoles).
	if float64(byFollower-len(ws)) > holes || sum.FollowerCause.Joined != len(ws) {
		t.Errorf("%d of %d follower-decided writes carry their follower's fdatasync cause (summary: %d joined), with %.0f records lost or missed: want every one but one per hole",
			len(ws), byFollower, sum.FollowerCause.Joined, holes)
	}
	for _, w := range ws {
		var ns int64
		for _, v := range w.Follower.Cause.Ns {
			ns += v
		}
		if math.Abs(float64(ns-w.Follower.FdatasyncNs)) > causeSumSlackNs {
			t.Errorf("write %d: the follower's causes sum to %d ns, its fdatasync %d ns: want within %d ns (%+v)", w.Index, ns, w.Follower.FdatasyncNs, causeSumSlackNs, *w.Follower.Cause)
		}
	}
}

// causeSumSlackNs bounds |sum of a follower's causes - its fdatasync|
// per write: JoinSyncs splits the sync window exactly when the fsync
// tracer's layers sum to its call (2026-12-06, this 2-core 6.18 VM: 0 ns
// for every write in 5 runs each of v3.6 and v3.5, 53-80 follower-decided
// writes and 100 leader's a run); 1 µs allows a rounding of the layers'
// parts.
const causeSumSlackNs = 1_000

// allHold reports whether every agent's window holds index i.
func allHold(t *testing.T, agents []string, i uint64) bool {
	for _, a := range agents {
		resp, err := http.Get(a + "/commit/entries?since_index=" + strconv.FormatUint(i-1, 10) + "&limit=1")
		if err != nil {
			t.Fatal(err)
		}
		var w commit.EntryWindow
		err = json.NewDecoder(resp.Body).Decode(&w)
		resp.Body.Close()
		if err != nil || len(w.Entries) == 0 {
			return false
		}
	}
	return true
}

// TestCommitFollowerEntry runs `etcdscope commit --output json` on a
// follower of a real 3-member etcd with its own load (each put forwarded
// to the leader): every write carries the follower's record of its
// entry, received from the leader (From), saved in the very Save the
// write's own wal_append part is (two joins of the same records, by
// index, in different code), and answered after it, in that order.
func TestCommitFollowerEntry(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Members[0]
	if f == leader {
		f = c.Members[1]
	}
	cmd := exec.CommandContext(ctx, etcdscope(t), "commit", "--pid", strconv.Itoa(f.PID), "--etcd-endpoints", f.ClientURL,
		"--duration", "6s", "--load", "20/s", "--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope commit: %v\n%s", err, stderr.String())
	}
	recs, sum, err := commit.ReadRecords(bytes.NewReader(stdout.Bytes()))
	if err != nil || sum == nil {
		t.Fatalf("reading the output: %v\n%s", err, stderr.String())
	}
	var split, early int
	for _, r := range recs {
		e := r.Entry
		if r.Role != commit.RoleFollower || e == nil || e.Index != r.Index || uint64(e.From) != leader.ID || e.RecvNs < r.StartNs ||
			int64(e.SaveEndNs-e.SaveStartNs) != r.PartsNs[commit.PartWALAppend] {
			t.Fatalf("write %d (index %d, role %s, [%d, %d], wal_append %d ns): entry %+v, want the follower's, from %x, received inside the write, its Save the write's",
				r.ID, r.Index, r.Role, r.StartNs, r.EndNs, r.PartsNs[commit.PartWALAppend], e, leader.ID)
		}
		if e.SaveEndNs > r.EndNs {
			// Committed by the leader and the other follower, the entry
			// was applied here, and the write returned, before this
			// member's own Save ended (etcd applies a Ready's committed
			// entries beside its Save): its answer came later.
			early++
			continue
		}
		if _, ok := e.Split(); !ok || e.RespondNs > r.EndNs {
			t.Errorf("write %d [%d, %d]: entry %+v: want received, saved and answered in order inside the write", r.ID, r.StartNs, r.EndNs, e)
			continue
		}
		split++
	}
	t.Logf("%d writes on the follower: %d with their entry's receive, Save and answer in order, %d returned before their own Save ended", len(recs), split, early)
	// 2026-12-06, 5 runs: 120-121 writes, 0-1 early; the bound allows
	// half early.
	if len(recs) < 80 || split+early != len(recs) || split < len(recs)/2 {
		t.Errorf("%d writes, %d split, %d early: want at least 80 (20/s for 6 s), all split or early, most split", len(recs), split, early)
	}
}

// putAndSettle makes n sequential puts at the leader (keys under name)
// and waits until every agent's window holds the last entry (20 s at
// most, then 0.5 s for the last acks); it returns the leader's commit
// index before (from the before scrape) and after the puts.
func putAndSettle(ctx context.Context, t *testing.T, c *etcdtest.Cluster, leader *etcdtest.Member, agents []string,
	before map[string]*dto.MetricFamily, n int, name string) (lo, hi uint64) {
	t.Helper()
	return putValuesAndSettle(ctx, t, c, leader, agents, before, n, name, func(int) string { return "v" })
}

// putValuesAndSettle is putAndSettle with put i's value value(i).
func putValuesAndSettle(ctx context.Context, t *testing.T, c *etcdtest.Cluster, leader *etcdtest.Member, agents []string,
	before map[string]*dto.MetricFamily, n int, name string, value func(i int) string) (lo, hi uint64) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%s-%03d", etcdtest.PutKeyPrefix, name, i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	// etcd sets its commit index gauge in the raft loop, a moment after
	// the last put returned: wait until it holds the puts (10 s at most).
	lo = uint64(gauge(before, "etcd_server_proposals_committed_total"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after, err := c.Scrape(ctx, leader)
		if err != nil {
			t.Fatal(err)
		}
		if hi = uint64(gauge(after, "etcd_server_proposals_committed_total")); hi >= lo+uint64(n) || time.Now().After(deadline) {
			break
		}
	}
	// Each agent reads its ring as it fills.
	for deadline := time.Now().Add(20 * time.Second); !allHold(t, agents, hi); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s, not every agent's window holds index %d: %v", hi, agents)
		}
	}
	time.Sleep(500 * time.Millisecond)
	return lo, hi
}

// commitHoles is what agent s's commit and commit_fsync tracers lost or
// missed (its /metrics): each such record hides at most one write's
// fdatasync split.
func commitHoles(t *testing.T, s *server) float64 {
	t.Helper()
	fams := s.scrape(t)
	var holes float64
	for _, name := range []string{"etcdscope_lost_events_total", "etcdscope_missed_events_total"} {
		for _, x := range fams[name].GetMetric() {
			if tr := labelsOf(x)["tracer"]; tr == "commit" || tr == "commit_fsync" {
				v := x.GetCounter().GetValue() + x.GetGauge().GetValue()
				if v > 0 {
					t.Logf("agent %s: %s%v %.0f", s.addr, name, labelsOf(x), v)
				}
				holes += v
			}
		}
	}
	return holes
}
