package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

// TestClusterInjectedDelay injects a known network delay and checks that
// the join recovers it. Three members on loopback; each follower
// advertises its peer URL through a TCP proxy of this test that holds
// every byte the follower sends back on the connections the others dial
// (rafthttp's streams: the follower's messages to the leader, its
// MsgAppResps among them) for 20 ms. (This host's kernel has no netem
// qdisc; the VM rig's scenarios use etcdscope netem.) Every write then
// waits on a follower's vote, and the join's network part of it (the
// leader's send to the ack minus the follower's own receive-to-answer)
// must hold the injected 20 ms: never less (the proxy's delay is a floor)
// and its median within 10% above it.
//
// It runs on v3.6 and on Debian's v3.4 (bin/etcd34), whose raft loop and
// rafthttp streams the join reads through other function names and
// layouts (tracer.etcdBuilds).
func TestClusterInjectedDelay(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.RepoRoot(t)
	for _, v := range []struct{ name, bin, make string }{
		{"v3.6", filepath.Join(root, "bin", "etcd"), "make etcd"},
		{"v3.4", debianEtcd(t), "scripts/deps.sh extracts it from Debian's etcd-server"},
	} {
		t.Run(v.name, func(t *testing.T) {
			if _, err := os.Stat(v.bin); err != nil {
				testenv.Missing(t, fmt.Sprintf("no %s (%s)", v.bin, v.make))
			}
			t.Setenv("ETCDSCOPE_ETCD", v.bin)
			checkInjectedDelay(t)
		})
	}
}

func checkInjectedDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	// The proxies listen before the members start (each dials its
	// follower per connection): the members elect a leader through them.
	proxies := []string{"", "127.0.0.12:2380", "127.0.0.13:2380"}
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	late := &lateness{}
	for i := 1; i <= 2; i++ {
		delayProxy(t, proxies[i], net.JoinHostPort(ips[i], strconv.Itoa(etcdtest.PeerPort)), delay, late)
	}
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, IPs: ips,
		AdvertisePeer: []string{"", "http://" + proxies[1], "http://" + proxies[2]}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader := moveLeaderTo(ctx, t, c, c.Members[0])
	var agents []string
	for _, m := range c.Members {
		s := startServe(t, "--comm", "etcd", "--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL)
		agents = append(agents, "http://"+s.addr)
	}
	before := restingCommitIndex(ctx, t, c, leader)
	const puts = 60
	lo, hi := putAndSettle(ctx, t, c, leader, agents, before, puts, "cluster-delay")
	cmd := exec.CommandContext(ctx, etcdscope(t), "cluster", "--members", strings.Join(agents, ","), "--since-index", strconv.FormatUint(lo, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope cluster: %v\n%s", err, stderr.String())
	}
	t.Logf("etcdscope cluster, %v injected on the followers' messages to the leader:\n%s", delay, stdout.String())
	windows, err := pipeline.FetchEntryWindows(ctx, agents, lo, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	j := commit.JoinCluster(windows)
	inRun, minNet := 0, int64(-1)
	for _, w := range j.Writes {
		if w.Index <= lo || w.Index > hi {
			continue
		}
		inRun++
		if w.Joined() && !w.DeciderLocal && (minNet < 0 || w.NetworkNs < minNet) {
			minNet = w.NetworkNs
		}
	}
	net := j.NetworkNs.Summary()
	t.Logf("commit index %d -> %d: %d writes, %d joined, %d decided by a follower; network min %d ns, p50 %d ns, p99 %d ns (injected %d ns); verdict %q",
		lo, hi, inRun, j.Joined, net.Count, minNet, net.P50, net.P99, delay.Nanoseconds(), render.ClusterSummaryOf(&j).Verdict)
	if uint64(inRun) != hi-lo || hi-lo < puts {
		t.Errorf("%d writes in (%d, %d]: want the commit index delta %d", inRun, lo, hi, hi-lo)
	}
	if int(net.Count) < inRun*9/10 {
		t.Errorf("%d of %d writes decided by a follower: with %v on the followers' acks and a ms leader WAL, want nearly all", net.Count, inRun, delay)
	}
	// The proxy's hold is the injected delay plus its own wake-up, which
	// on a busy machine is late by a millisecond or more: that is network
	// the join must report, so the bound is on what the proxy held
	// (its median hold), not on the 20 ms it aimed at.
	held := delay.Nanoseconds() + late.p50()
	t.Logf("the proxy held each chunk %d ns at the median (%d ns late, %d chunks)", held, late.p50(), late.n())
	// 2026-12-06, 6 runs on this loaded 2-core VM (v3.6 only, against
	// the aimed 20 ms): min 20.34-20.57 ms, p50 21.10-21.47 ms (the
	// loopback round trip, both rafthttp queues and the proxy's own copy
	// on top of the 20 ms): 7.3% above at worst. With v3.4 beside it and
	// 3 helpers and a hunt running (load 4-6): p50 against the aim 7.9,
	// 11.5, 10.2, 9.5, 9.2% above (v3.4), 7.7% (v3.6): the proxy's late
	// wake-ups, now in held. Against held, `make flake-hunt N=10
	// RUN=TestClusterInjectedDelay` beside the same load: 20/20 (v3.6 and
	// v3.4), worst p50 6.3% above held: a 37% margin to the 10%.
	if minNet < delay.Nanoseconds() || net.P50 > held*11/10 {
		t.Errorf("network part min %d ns, p50 %d ns: want at least the injected %d ns, p50 within 10%% above the proxy's median hold %d ns", minNet, net.P50, delay.Nanoseconds(), held)
	}
	t.Logf("flakehunt: margin network-p50-over-held-pct %.1f of 10", 100*(float64(net.P50)/float64(held)-1))
	if v := j.Verdict(); v.Kind != commit.ClusterVerdictNetwork {
		t.Errorf("verdict %+v: want the network", v)
	}
}

// delayProxy listens on addr and forwards every connection to target,
// holding each chunk target sends back for d (the other direction is
// passed at once); it stops with the test.
func delayProxy(t *testing.T, addr, target string, d time.Duration, late *lateness) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				type chunk struct {
					b  []byte
					at time.Time
				}
				ch := make(chan chunk, 4096)
				go func() {
					defer close(ch)
					for {
						b := make([]byte, 32<<10)
						n, err := u.Read(b)
						if n > 0 {
							ch <- chunk{b[:n], time.Now().Add(d)}
						}
						if err != nil {
							return
						}
					}
				}()
				for k := range ch {
					time.Sleep(time.Until(k.at))
					if _, err := c.Write(k.b); err != nil {
						return
					}
					late.add(time.Since(k.at))
				}
			}()
		}
	}()
}

// moveLeaderTo makes m the leader (etcd's MoveLeader, asked of the current
// leader) and returns it.
func moveLeaderTo(ctx context.Context, t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member) *etcdtest.Member {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		cur, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cur == m {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still leads, not %s", cur.Name, m.Name)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cur.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := cli.MoveLeader(mctx, m.ID); err != nil {
			t.Logf("move-leader to %s: %v", m.Name, err)
		}
		cancel()
		cli.Close()
	}
}

// lateness collects how late the delay proxies released their chunks
// (the write's end minus the aimed time), bounded to the first 1<<16.
type lateness struct {
	mu sync.Mutex
	ns []int64
}

func (l *lateness) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ns) < 1<<16 {
		l.ns = append(l.ns, d.Nanoseconds())
	}
}

func (l *lateness) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ns)
}

// p50 is the median lateness in ns, 0 before any chunk.
func (l *lateness) p50() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ns) == 0 {
		return 0
	}
	s := slices.Clone(l.ns)
	slices.Sort(s)
	return s[len(s)/2]
}
