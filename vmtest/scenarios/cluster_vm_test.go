//go:build vmtest

package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// The faults of the cluster split scenario: netem on everything m2 sends,
// and dm-delay holding every flush under m3's data dir (WAL included).
// The network part is judged within 10% of the injected delay, and past
// the delay it holds the bare round trip and both transports' queues,
// on the rig's one vCPU mostly the wait for it: behind 100 ms its p50 was
// 108.1-111.9 ms (runs 2-5, 2026-12-06; one of four over 10%), so the
// delay is 200 ms.
const (
	clusterNetDelay = 200 * time.Millisecond
	clusterFlush    = 20 * time.Millisecond
	clusterPuts     = 30
)

// TestVMScenarioClusterSplit is issue 28's check on real components: three
// members in network namespaces, `etcdscope serve --commit-pid` beside
// each, `etcdscope cluster --members` joining their windows by entry.
//
//	m1 leads     m2's sends delayed 200 ms (netem), m3's flushes held
//	             20 ms (dm-delay): m3's ack comes first and decides; its
//	             fdatasync is the held flushes, its agent names the dm
//	             layer, and the network part is the bare path's
//	m2 leads     (etcdctl move-leader) the new leader's MsgApps wait in
//	             netem: m1 decides, its network part the injected 200 ms
//
// The injected delay is tc's own reading of the qdisc; the per-write
// identity vote = network + follower is checked with the network
// replaced by the injected delay (independent of the join's remainder).
func TestVMScenarioClusterSplit(t *testing.T) {
	selected(t)
	testenv.RequireRoot(t)
	base := t.TempDir()
	slowDir(t, filepath.Join(base, "m3"), "esclust", clusterFlush)
	r := newRigWith(t, base)
	r.moveLeader(0)
	r.netem(1, fmt.Sprintf("%dms", clusterNetDelay.Milliseconds()), 0, 2) // toward m1 and m3
	injected := tcDelay(t, r.ns[1])
	t.Logf("tc reads back a delay of %v on %s's eth0", injected, r.ns[1])
	var agents []string
	for i, m := range r.m {
		addr := fmt.Sprintf("127.0.0.1:%d", 10391+i)
		startTool(t, r.bin, "serve", "--listen", addr, "--pid", strconv.Itoa(m.PID), "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL)
		agents = append(agents, "http://"+addr)
	}
	r.warmUp()

	// m1 leads: m3's slow disk decides.
	j1, w1 := r.clusterPhase(agents, 0, "m1 leads")
	m3 := commit.MemberID(r.m[2].ID)
	checkDecider(t, "m1 leads", j1, commit.MemberID(r.m[0].ID), m3)
	checkSlowDisk(t, agents[2], w1, clusterFlush)
	checkVoteIdentity(t, "m1 leads", j1, m3, 0)
	// m3's network part is the rig's one vCPU's waits as much as the
	// bare path's, and on a loaded host it holds about as much of the
	// votes' time as the held flushes (run 24: 46% against 52%; 51%
	// against 49%): then the verdict names no single cause, but both
	// parts, the WAL append with the dm layer.
	switch ev := j1.Evidence; {
	case ev != nil && ev.Kind == "follower_wal" && ev.CauseLead != nil && ev.CauseLead.Lead == "disk" && ev.CauseLead.LeadLayer == commit.CauseDM &&
		strings.HasPrefix(j1.Verdict, "writes wait on m3's disk ("):
	case ev != nil && ev.Kind == "no_single_cause" && strings.HasPrefix(j1.Verdict, "no single cause: m3's votes wait on ") &&
		strings.Contains(j1.Verdict, "WAL append") && strings.Contains(j1.Verdict, "(dm "):
		t.Logf("m1 leads: no single cause: %+v", ev.Parts)
	default:
		t.Errorf("m1 leads: verdict %q: want m3's disk, the dm layer named (or no single cause, m3's WAL append by dm one of the two)", j1.Verdict)
	}

	// Move the leader to m2: its MsgApps wait in netem, m1 decides.
	r.moveLeader(1)
	r.warmUp()
	j2, _ := r.clusterPhase(agents, 1, "m2 leads")
	m1 := commit.MemberID(r.m[0].ID)
	checkDecider(t, "m2 leads", j2, commit.MemberID(r.m[1].ID), m1)
	checkNetwork(t, "m2 leads", j2, m1, injected)
	checkVoteIdentity(t, "m2 leads", j2, m1, injected)
	if !strings.HasPrefix(j2.Verdict, "writes wait on the network and etcd's peer queues to m1: ") {
		t.Errorf("m2 leads: verdict %q: want the network to m1", j2.Verdict)
	}
}

// clusterJoin is `etcdscope cluster --output json` read back.
type clusterJoin struct {
	render.ClusterSummary
	Writes []commit.ClusterWrite // in the phase's index range
}

// clusterPhase makes clusterPuts sequential puts through the client (on
// m1), waits until every agent holds them, and joins the agents' windows
// with `etcdscope cluster` over the phase's index range (leader: the
// member that leads, 0-based). It also returns the slow member's (m3's)
// records of the range from its own agent.
func (r *rig) clusterPhase(agents []string, leader int, name string) (clusterJoin, []commit.Entry) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	index := func() uint64 {
		st, err := r.cli.Status(ctx, r.m[leader].ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		return st.RaftIndex
	}
	lo := index()
	start := time.Now()
	for i := 0; i < clusterPuts; i++ {
		if _, err := r.cli.Put(ctx, fmt.Sprintf("cluster-%s-%03d", strings.ReplaceAll(name, " ", "-"), i), strings.Repeat("v", valueBytes)); err != nil {
			t.Fatal(err)
		}
	}
	hi := index()
	t.Logf("%s: %d puts in %v, leader's index %d -> %d", name, clusterPuts, time.Since(start).Round(time.Millisecond), lo, hi)
	var slow commit.EntryWindow
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		all := true
		for k, a := range agents {
			w := entryWindow(t, a, lo)
			if k == 2 {
				slow = w
			}
			if !slices.ContainsFunc(w.Entries, func(e commit.Entry) bool { return e.Index == hi && (e.RespondNs != 0 || len(e.Acks) > 0) }) {
				all = false
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 60 s not every agent's window holds index %d", name, hi)
		}
	}
	time.Sleep(time.Second) // the leader's last acks, the fsync ring's last calls
	slow = entryWindow(t, agents[2], lo)
	var j clusterJoin
	out, err := exec.CommandContext(ctx, r.bin, "cluster", "--members", strings.Join(agents, ","), "--since-index", strconv.FormatUint(lo, 10), "--output", "json").Output()
	if err != nil {
		t.Fatalf("%s: etcdscope cluster: %v", name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var rec struct {
			Type string `json:"type"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		switch rec.Type {
		case "cluster_write":
			var w render.ClusterWriteRecord
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				t.Fatal(err)
			}
			if w.Index > lo && w.Index <= hi {
				j.Writes = append(j.Writes, w.ClusterWrite)
			}
		case "cluster_summary":
			if err := json.Unmarshal(sc.Bytes(), &j.ClusterSummary); err != nil {
				t.Fatal(err)
			}
		}
	}
	table, _ := exec.CommandContext(ctx, r.bin, "cluster", "--members", strings.Join(agents, ","), "--since-index", strconv.FormatUint(lo, 10)).CombinedOutput()
	t.Logf("%s: etcdscope cluster:\n%s", name, table)
	if uint64(len(j.Writes)) != hi-lo {
		t.Errorf("%s: %d writes in (%d, %d]: want the leader's index delta %d", name, len(j.Writes), lo, hi, hi-lo)
	}
	var es []commit.Entry
	for _, e := range slow.Entries {
		if e.Index > lo && e.Index <= hi {
			es = append(es, e)
		}
	}
	return j, es
}

// entryWindow GETs one agent's window above index since.
func entryWindow(t *testing.T, agent string, since uint64) commit.EntryWindow {
	t.Helper()
	resp, err := http.Get(agent + "/commit/entries?since_index=" + strconv.FormatUint(since, 10) + "&limit=4096")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var w commit.EntryWindow
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		t.Fatal(err)
	}
	return w
}

// checkDecider: the summary names the leader, and the follower decider
// decided at least 80% of the joined writes (2026-12-06, runs 2-6: 26-30
// of 30; the rest decided by the leader's own WAL or the other follower,
// when the one vCPU ran the decider late).
func checkDecider(t *testing.T, name string, j clusterJoin, leader, decider commit.MemberID) {
	t.Helper()
	n := 0
	for _, w := range j.Writes {
		if w.Joined() && !w.DeciderLocal && w.Decider == decider {
			n++
		}
	}
	t.Logf("%s: leader %v, deciders %v, %d of %d writes decided by %v, not joined %v", name, j.Leader, j.Deciders, n, len(j.Writes), decider, j.NotJoined)
	if j.Leader != leader || n < len(j.Writes)*8/10 || len(j.Writes) < clusterPuts {
		t.Errorf("%s: leader %v, %d of %d writes decided by %v: want leader %v, at least 80%% of at least %d", name, j.Leader, n, len(j.Writes), decider, leader, clusterPuts)
	}
}

// checkSlowDisk: the slow member's own records (its agent's window): each
// Save's fdatasync split by cause, the dm layer its largest, and the
// fastest dm time (a call that waited for one held flush) the flush delay
// within 10% above and one jiffy below: dm-delay holds a flush until its
// timer's tick after jiffies + the delay (Debian's cloud kernel: HZ 250,
// 4 ms a jiffy), so a hold lasts F - 4 ms .. F, then its kworker lets it
// go. Each fdatasync on ext4 waits for one or two flushes (the journal's
// commit, the device's cache flush), and may join a journal commit
// already under way: the p50 is logged, not judged (runs 2-4, 2026-12-06:
// fastest 17.0-19.5 ms, p50 23.4-24.5 ms, max 39.2-46.5 ms of a 20 ms delay).
func checkSlowDisk(t *testing.T, agent string, es []commit.Entry, flush time.Duration) {
	t.Helper()
	var tot commit.CauseTotals
	var dms, syncs []time.Duration
	for _, e := range es {
		if e.SyncEndNs <= e.SyncStartNs {
			continue
		}
		tot.Add(e.SyncCause)
		if e.SyncCause != nil {
			dms = append(dms, time.Duration(e.SyncCause.Ns[commit.CauseDM]))
			syncs = append(syncs, time.Duration(e.SyncEndNs-e.SyncStartNs))
		}
	}
	slices.Sort(dms)
	slices.Sort(syncs)
	top, _ := tot.Top()
	t.Logf("m3 (%s): %d fdatasyncs split, %d not; dm per fdatasync %v; fdatasync %v; shares dm %.0f%%, device_flush %.0f%%, journal %.0f%%, cpu_wait %.0f%%",
		agent, tot.Joined, tot.Unjoined, durs(dms), durs(syncs), 100*tot.Share(commit.CauseDM), 100*tot.Share(commit.CauseDeviceFlush),
		100*tot.Share(commit.CauseJournal), 100*tot.Share(commit.CauseCPUWait))
	const jiffy = 4 * time.Millisecond
	if tot.Joined < len(es)*9/10 || top != commit.CauseDM || len(dms) == 0 || dms[0] < flush-jiffy || dms[0] > flush*11/10 {
		t.Errorf("m3: %d of %d entries' fdatasyncs split, top cause %q, dm per fdatasync %v: want 90%% split, dm the top, the fastest %v - %v .. + 10%%",
			tot.Joined, len(es), top, durs(dms), flush, jiffy)
	}
}

// checkNetwork: the deciding follower's network part, the leader's Send
// to its ack less its own receive-to-answer, is the injected delay within
// 10% (p50; the fastest at least the delay).
func checkNetwork(t *testing.T, name string, j clusterJoin, decider commit.MemberID, injected time.Duration) {
	t.Helper()
	var nets []time.Duration
	for _, w := range j.Writes {
		if w.Joined() && !w.DeciderLocal && w.Decider == decider {
			nets = append(nets, time.Duration(w.NetworkNs))
		}
	}
	slices.Sort(nets)
	t.Logf("%s: network part %v against tc's %v", name, durs(nets), injected)
	if len(nets) == 0 || nets[0] < injected || nets[len(nets)/2] > injected*11/10 {
		t.Errorf("%s: network part %v: want the fastest at least tc's %v and the p50 within 10%% of it", name, durs(nets), injected)
	}
}

// checkVoteIdentity: per write the deciding follower decided, the
// leader's vote time less the injected delay and the follower's own
// receive-to-answer (each on its own clock): what is left is the bare
// path's round trip and both transports' queues, never negative. On the
// rig it is mostly the wait for the one vCPU, and on the slow follower
// for its one P (GOMAXPROCS 1): its stream reader, which calls Process,
// waits while bbolt's or the WAL's fdatasync, held 20 ms by dm-delay,
// keeps the P until Go's sysmon hands it off. Measured (2026-12-06, runs
// 2-6, 26-30 writes a phase; p50 / p90 / max): m3 deciding with no delay
// on its path 19.6-30.7 / 35.5-51.9 / 53.3-100.5 ms; m1 deciding behind
// 100 ms of netem 8.1-13.1 / 14.3-55.3 / 30.6-91.2 ms. The bound: none
// negative, p50 <= 40 ms, p90 <= 75 ms (the max is logged).
func checkVoteIdentity(t *testing.T, name string, j clusterJoin, decider commit.MemberID, injected time.Duration) {
	t.Helper()
	var rest []time.Duration
	for _, w := range j.Writes {
		if w.Joined() && !w.DeciderLocal && w.Decider == decider {
			rest = append(rest, time.Duration(w.VoteNs-w.Follower.TotalNs)-injected)
		}
	}
	slices.Sort(rest)
	t.Logf("%s: vote - (injected %v + follower's receive-to-answer) per write: %v", name, injected, durs(rest))
	if len(rest) == 0 || rest[0] < 0 || rest[len(rest)/2] > 40*time.Millisecond || rest[len(rest)*9/10] > 75*time.Millisecond {
		t.Errorf("%s: vote - (injected + follower) %v: want none negative, p50 <= 40 ms, p90 <= 75 ms", name, durs(rest))
	}
}

// durs is a sorted distribution as min / p50 / p90 / max.
func durs(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("min %s p50 %s p90 %s max %s (%d)", ms(d[0]), ms(d[len(d)/2]), ms(d[len(d)*9/10]), ms(d[len(d)-1]), len(d))
}

// tcDelay reads the netem delay back from tc in namespace ns.
func tcDelay(t *testing.T, ns string) time.Duration {
	t.Helper()
	out := sh(t, "ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", "eth0")
	m := regexp.MustCompile(`netem .*delay ([0-9.]+)(ms|s|us)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no netem delay in tc's qdiscs of %s:\n%s", ns, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	unit := map[string]time.Duration{"s": time.Second, "ms": time.Millisecond, "us": time.Microsecond}[m[2]]
	return time.Duration(v * float64(unit))
}

// slowDir mounts ext4 on a dm-delay device (flushes held flush) over a
// loop device at dir, for a member's data dir; its cleanups run after
// the members stop (registered before etcdtest.Start). setFlush changes
// the delay with the filesystem mounted (dmsetup suspend/reload/resume).
func slowDir(t *testing.T, dir, name string, flush time.Duration) (setFlush func(time.Duration)) {
	t.Helper()
	testenv.LookPath(t, "dmsetup", "dmsetup")
	testenv.LookPath(t, "mke2fs", "e2fsprogs")
	testenv.LookPath(t, "losetup", "util-linux")
	const size = 256 << 20
	img := filepath.Join(t.TempDir(), name+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	// busybox's losetup has no --show: ask for the next free device, then
	// attach it (nothing else in the guest takes loop devices).
	loop := strings.TrimSpace(sh(t, "losetup", "-f"))
	sh(t, "losetup", loop, img)
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	table := func(flush time.Duration) string {
		return fmt.Sprintf("0 %d delay %s 0 0 %s 0 0 %s 0 %d", size/512, loop, loop, loop, flush.Milliseconds())
	}
	sh(t, "dmsetup", "create", name, "--noudevsync", "--table", table(flush))
	t.Cleanup(func() { exec.Command("dmsetup", "remove", "--noudevsync", name).Run() })
	sh(t, "dmsetup", "mknodes", name)
	dev := "/dev/mapper/" + name
	sh(t, "mke2fs", "-q", "-F", "-t", "ext4", dev)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dev, dir, "ext4", 0, ""); err != nil {
		t.Fatalf("mounting %s: %v", dev, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	os.Chmod(dir, 0o700)
	t.Logf("%s: ext4 on dm-delay %s (%s)", dir, name, strings.TrimSpace(sh(t, "dmsetup", "table", name)))
	return func(d time.Duration) {
		sh(t, "dmsetup", "suspend", "--noudevsync", name)
		sh(t, "dmsetup", "reload", "--noudevsync", name, "--table", table(d))
		sh(t, "dmsetup", "resume", "--noudevsync", name)
		t.Logf("dmsetup table %s: %s", name, strings.TrimSpace(sh(t, "dmsetup", "table", name)))
	}
}
