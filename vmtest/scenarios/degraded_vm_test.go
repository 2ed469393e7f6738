//go:build vmtest

package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
)

// TestVMScenarioDegraded is the degraded cluster (issue 14): one member
// stopped, then 50 ms RTT (25 ms each way on :2380) between the two
// survivors. The survivors are the whole quorum, so every write waits one
// RTT: write p50 and p99 rise by about an RTT and the sequential write
// rate collapses, while serializable reads (answered by m1 alone) stay
// flat.
//
//	baseline        3 members, no netem, m1 leads
//	m3 stopped      writes and reads unchanged (m1+m2 are a quorum)
//	+50 ms m1<->m2  writes +1 RTT, linearizable reads +1 RTT, serializable flat
//
// Tolerances as in the stretched scenario (docs/scenarios.md), plus: the
// sequential write rate's ceiling (1/fastest write) in the last phase at
// most half the baseline's; and etcdscope commit on m1 in the last phase
// (rig.commitChecks): all 40 writes traced, m2 the deciding vote of >= 90%
// of them, quorum_wait p50 at least 0.7 RTT, the split's total p50 within
// the client's put p50.
func TestVMScenarioDegraded(t *testing.T) {
	selected(t)
	r := newRig(t)
	r.moveLeader(0)
	r.warmUp()
	pre := r.scrape(0)
	requestedPre := r.requested
	rep := &Report{Scenario: "degraded (m3 stopped, then 25 ms each way m1<->m2 on :2380)", Delay: stretchedOneWay}
	base := r.phase("baseline", nil)
	rep.Phases = append(rep.Phases, base)
	rep.Again = r.phase("baseline again", nil)

	if err := r.m[2].Stop(); err != nil {
		t.Fatal(err)
	}
	rep.Phases = append(rep.Phases, r.phase("m3 stopped", map[Op]Expect{
		Write:      flat("0: m1 + m2 still make the quorum"),
		ReadSerial: flat("0: answered by m1 alone"),
		ReadLinear: flat("0: ReadIndex needs m2's heartbeat ack, local"),
	}))

	r.netem(0, "25ms", 1)
	r.netem(1, "25ms", 0)
	rtt := r.connectFastest(0, 1, etcdtest.PeerPort, 7)
	rep.Checks = append(rep.Checks,
		Within("connect m1->m2:2380 fastest of 7", rtt, stretchedRTT-5*time.Millisecond, stretchedRTT+10*time.Millisecond),
		Within("connect m1->m2:2379 fastest of 7", r.connectFastest(0, 1, etcdtest.ClientPort, 7), 0, 20*time.Millisecond))
	f0 := r.scrape(1)
	pr := r.startPeers()
	slow := r.phase("m3 stopped, +50ms RTT m1<->m2", nil)
	// The same load again with etcdscope commit on m1, a phase of its
	// own: its uprobes cost the guest's one vCPU (TCG) enough to move the
	// judged phase's latencies.
	cr := r.startCommit(0)
	traced := r.phase("the same, etcdscope commit on m1", nil)
	cout := cr.stopForModel(t)
	prep := peersOf(t, pr.stop(t))
	f1 := r.scrape(1)
	fsync, nfsync := histMean(f0, f1, "etcd_disk_wal_fsync_duration_seconds", nil)
	slow.Expect = map[Op]Expect{
		Write:      {Delta: stretchedRTT + fsync, Lo: oneLo + fsync, Hi: oneHi + fsync, Why: fmt.Sprintf("1 RTT + m2's WAL fsync (%.2fms mean of %d): m1 waits for m2's ack", float64(fsync)/1e6, nfsync)},
		ReadSerial: flat("0: answered by m1 alone"),
		ReadLinear: {Delta: stretchedRTT, Lo: oneLo, Hi: oneHi, Why: "1 RTT: ReadIndex needs m2's heartbeat ack"},
	}
	rep.Phases = append(rep.Phases, slow, traced)
	// What each write waited on (issue 15): m1 leads with m2 the only
	// other voter, so m2's ack decides every write, and the wait after
	// m1's own WAL append is at least the delayed round trip.
	rep.Checks = append(rep.Checks, r.commitChecks(cout, traced, 2, oneLo)...)

	// The field's "write IOPS collapses": one sequential client's rate is
	// at most 1/(its fastest write); that ceiling must fall to at most
	// half. Its "serializable reads stay flat" is the table's row. (p99s
	// and mean rates of 40 requests carry the guest's CPU queueing: run 5
	// read a baseline slower than the delayed phase.)
	bf, sf := Fastest(base.Lat[Write]), Fastest(slow.Lat[Write])
	// A timing check (docs/scenarios.md said so; the code did not): its
	// ceiling is the baseline's fastest write, the very number the gate
	// finds unstable (an all-scenarios run: 40.8 ms, then 17.9 ms in the
	// calibration pass, so 0.69 against <= 0.5).
	rep.Checks = append(rep.Checks, Check{Name: "write rate ceiling 1/fastest, last phase / baseline",
		Got:  fmt.Sprintf("%.1f/s of %.1f/s", 1/sf.Seconds(), 1/bf.Seconds()),
		Want: "<= 0.50", Pass: bf > 0 && sf > 0 && bf.Seconds()/sf.Seconds() <= 0.5, Timing: true})

	post := r.scrape(0)
	// etcdscope's metric verdict is judged in the stretched scenario only
	// (docs/scenarios.md); here it is shown: m3, the member etcd's series
	// toward m2 shares its probers' CPU with, is stopped.
	rep.Checks = append(rep.Checks, r.closingChecks(pre, post, requestedPre, prep, 1, false)...)
	rep.Header = []string{
		fmt.Sprintf("RTT m1-m2 %.1fms (fastest TCP connect to :2380); %d sequential puts, serializable gets, linearizable gets per phase from a client on m1", float64(rtt)/1e6, opsPerPhase),
		"tolerances: Δfastest in the window and p50 - baseline fastest >= its low end, against this run's baseline (docs/scenarios.md)",
	}
	finish(t, rep)
}
