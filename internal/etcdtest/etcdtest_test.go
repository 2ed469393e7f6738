package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// walFsyncs is etcd's own count of WAL fdatasync calls: a histogram whose
// sample count grows by one per wal.sync.
const walFsyncs = "etcd_disk_wal_fsync_duration_seconds"

// TestSingleMemberPutsFsyncWAL checks the harness against etcd's own
// metrics: 200 puts at 100/s on one member must raise the WAL fsync count
// by at least 200.
//
// Why exactly one fsync per put, and why at least 200: Put is sequential,
// so put k+1 is proposed only after put k was applied, which happens after
// its entry left raft in a Ready of its own. Every Ready that carries new
// entries makes etcd's wal.Save call fdatasync (raft.MustSync is true when
// entries are appended). Batching, which merges several proposals into one
// Ready and one fsync, needs concurrent proposals; Put never makes them.
// Measured here (5 runs, ext4 on 2 vCPUs): delta exactly 200 every time,
// 1.000 fsyncs per put. The upper slack of 10 allows for startup proposals
// (member attribute publish, cluster version) that land after /health
// turned true and before the first scrape: 6 or 7 fsyncs precede it.
func TestSingleMemberPutsFsyncWAL(t *testing.T) {
	c := Start(t, Options{})
	m := c.Members[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	before, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	start := time.Now()
	if err := c.Put(ctx, n, 100, 2300); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	after, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after[walFsyncs]; !ok {
		t.Fatalf("%s missing from %s", walFsyncs, m.MetricsURL)
	}
	delta := SumCounter(after, walFsyncs) - SumCounter(before, walFsyncs)
	t.Logf("%d puts in %v (%.1f/s): WAL fsync count %v -> %v, delta %v, %.3f fsyncs per put",
		n, elapsed.Round(time.Millisecond), n/elapsed.Seconds(),
		SumCounter(before, walFsyncs), SumCounter(after, walFsyncs), delta, delta/n)
	if delta < n || delta > n+10 {
		t.Errorf("WAL fsync delta %v for %d sequential puts, want %d..%d (one per put plus a few startup proposals)", delta, n, n, n+10)
	}
	// The rate limit holds: 200 puts at 100/s take at least 199 intervals.
	if elapsed < 1990*time.Millisecond {
		t.Errorf("%d puts at 100/s took %v, want >= 1.99 s", n, elapsed)
	}
}

// peerRTT is etcd's prober RTT histogram, one series per remote peer
// labelled To (the peer's Raft ID in hex).
const peerRTT = "etcd_network_peer_round_trip_time_seconds"

// TestThreeMemberTLS starts the cluster issue 3 traces (TLS peers and
// clients on 127.0.0.1-3:2380) and checks what those tests rely on: a
// leader, members identifiable by PID, a working TLS client, and per-peer
// RTT series in every member's metrics.
//
// How long the RTT series take: each peer has two probers (snapshot and
// message round trippers), and monitorProbingStatus (rafthttp
// probing_status.go) observes the prober's smoothed RTT first after 5 s
// (statusErrorInterval), then every 30 s while the peer is healthy. So the
// series appear about 5 s after the peer is added, counting 2 (one per
// prober), and grow by 2 per 30 s.
func TestThreeMemberTLS(t *testing.T) {
	c := Start(t, Options{Members: 3, PeerTLS: true, ClientTLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s (pid %d, id %x)", leader.Name, leader.PID, leader.ID)

	ids := map[string]*Member{}
	for _, m := range c.Members {
		if !strings.HasPrefix(m.PeerURL, "https://") || !strings.HasPrefix(m.ClientURL, "https://") {
			t.Errorf("%s: peer %s, client %s: want https for both", m.Name, m.PeerURL, m.ClientURL)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.PID))
		if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), "--name="+m.Name) {
			t.Errorf("pid %d is not %s: cmdline %q, %v", m.PID, m.Name, cmdline, err)
		}
		ids[fmt.Sprintf("%x", m.ID)] = m
	}
	if len(ids) != 3 {
		t.Fatalf("member IDs %v: want 3 distinct", ids)
	}

	// The client side goes over TLS with the harness's client certificate
	// (the members run with --client-cert-auth).
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/etcdtest/tls", "ok"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("member list has %d members, want 3", len(resp.Members))
	}

	// Poll until every member has an RTT series for each of its two peers.
	start := time.Now()
	for {
		var missing, summary []string
		for _, m := range c.Members {
			fams, err := c.Scrape(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			var to []string
			for _, s := range fams[peerRTT].GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() != "To" {
						continue
					}
					to = append(to, l.GetValue())
					if p := ids[l.GetValue()]; p == nil || p == m {
						t.Errorf("%s: %s series To=%q is not another member", m.Name, peerRTT, l.GetValue())
					}
				}
			}
			if len(to) < 2 {
				missing = append(missing, fmt.Sprintf("%s has To=%v", m.Name, to))
			}
			summary = append(summary, fmt.Sprintf("%s: count %v over To=%v", m.Name, SumCounter(fams, peerRTT), to))
		}
		if len(missing) == 0 {
			t.Logf("RTT series for both peers on every member %v after healthy: %s",
				time.Since(start).Round(100*time.Millisecond), strings.Join(summary, "; "))
			return
		}
		if time.Since(start) > 40*time.Second {
			t.Fatalf("no %s series per peer after %v: %s", peerRTT, time.Since(start).Round(time.Second), strings.Join(missing, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fatalTB records the first Fatalf instead of failing the real test, so a
// test can check how Start fails, and when the first member started (Start
// may first wait for other tests' clusters). Cleanups still go to the real
// test.
type fatalTB struct {
	testing.TB
	msg     string
	started time.Time
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Logf(format string, args ...any) {
	if f.started.IsZero() && strings.HasPrefix(format, "etcdtest: started") {
		f.started = time.Now()
	}
	f.TB.Logf(format, args...)
}

func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// TestStartFailsFast checks that a member etcd refuses to run fails Start
// at once, quoting etcd's own complaint, instead of after the health
// timeout; and that its cleanup releases the port lock for the next test.
func TestStartFailsFast(t *testing.T) {
	testenv.EtcdBinary(t) // skip here, not inside the goroutine
	var msg string
	var elapsed time.Duration
	// A subtest, so Start's cleanups (stop, unlock) have run when it ends.
	t.Run("bad flag", func(t *testing.T) {
		ftb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Start(ftb, Options{ExtraArgs: []string{"--snapshot-count=not-a-number"}})
		}()
		<-done
		if ftb.started.IsZero() {
			t.Fatalf("Start failed before starting etcd: %s", ftb.msg)
		}
		msg, elapsed = ftb.msg, time.Since(ftb.started)
	})
	t.Logf("Start failed %v after starting etcd, with: %s", elapsed.Round(time.Millisecond), msg)
	if !strings.Contains(msg, "etcd exited") || !strings.Contains(msg, `invalid value "not-a-number" for flag -snapshot-count`) {
		t.Errorf("Start's failure does not say etcd exited and why: %q", msg)
	}
	if elapsed > 10*time.Second {
		t.Errorf("Start took %v to notice a dead member, want well under the %v health timeout", elapsed, healthTimeout)
	}
	unlock, err := lockPorts(time.Second, t.Logf)
	if err != nil {
		t.Fatalf("port lock still held after the failed Start's cleanup: %v", err)
	}
	unlock()
}

// TestPortLockAcrossTmpdirs: two test runs whose lock files differ (one
// under scripts/fresh-root.sh's own /tmp, one under the host's) share the
// loopback ports, so the port lock must exclude them too: while one holds
// it, the other waits and times out; once released, the other takes it.
// With the lock file alone, both held it at once (2026-12-07: a
// cmd/etcdscope peers test's members found 127.0.0.2:2380 and
// 127.0.0.3:2380 taken by the fresh root's e2e cluster).
func TestPortLockAcrossTmpdirs(t *testing.T) {
	name := fmt.Sprintf("@etcdscope-etcdtest-ports-test-%d", os.Getpid())
	a, b := filepath.Join(t.TempDir(), "lock"), filepath.Join(t.TempDir(), "lock")
	unlock, err := lockPortsAt(a, name, time.Second, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if u, err := lockPortsAt(b, name, 500*time.Millisecond, t.Logf); err == nil {
		u()
		t.Fatal("a second run under another lock file took the port lock while the first held it")
	} else {
		t.Logf("the second run waited %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	// The same lock file: the flock excludes as before.
	if u, err := lockPortsAt(a, name, 300*time.Millisecond, t.Logf); err == nil {
		u()
		t.Fatal("a second holder of the same lock file took the port lock")
	}
	unlock()
	u, err := lockPortsAt(b, name, time.Second, t.Logf)
	if err != nil {
		t.Fatalf("port lock not released: %v", err)
	}
	u()
}

// TestWaitPortsFree: Start waits for ports a process outside the port lock
// listens on (an older tree's cluster under another /tmp) and names the
// one taken; a free set passes at once. 127.0.0.4: no cluster's address.
func TestWaitPortsFree(t *testing.T) {
	ip := "127.0.0.4"
	l, err := net.Listen("tcp", hostPort(ip, PeerPort))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", hostPort(ip, PeerPort), err)
	}
	err = waitPortsFree([]string{ip}, 300*time.Millisecond, t.Logf)
	if err == nil || !strings.Contains(err.Error(), hostPort(ip, PeerPort)) {
		t.Errorf("waitPortsFree with %s taken: %v, want an error naming it", hostPort(ip, PeerPort), err)
	}
	l.Close()
	if err := waitPortsFree([]string{ip}, time.Second, t.Logf); err != nil {
		t.Errorf("waitPortsFree after the listener closed: %v", err)
	}
	// An address this namespace does not have (a VM scenario's member
	// lives in a network namespace of its own, 10.77.x.x): nothing here
	// to wait for. Before, the EADDRNOTAVAIL read as taken, and Start
	// waited its 10 min (TestVMScenarioStretched in make vmtest).
	start := time.Now()
	if err := waitPortsFree([]string{"192.0.2.1"}, time.Second, t.Logf); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Errorf("waitPortsFree of an address not on this host: %v after %v, want nil at once", err, time.Since(start))
	}
}
