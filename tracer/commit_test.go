package tracer_test

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	. "github.com/etcdscope/etcdscope/tracer"
)

// TestCommitTracer (an external test package: etcdtest imports etcdinfo,
// which imports tracer) attaches to a real one-member etcd (make etcd) and
// counts the probes' firings for 20 sequential puts: each put is one
// processInternalRaftRequestOnce (entry, return, Register, Trigger) and,
// on one member, one WAL Save with entries and one (*WAL).sync; every
// probe attaches, and Close is idempotent, from several goroutines at
// once too. It does so with one
// uprobe_multi link (where the kernel has it) and with one perf-event
// uprobe per point, and logs how long each takes to detach. The multi
// variant sends the raw firings too (CommitConfig.Raw): the kernel's
// assembled records must equal what analysis/commit.Assembler makes of
// the raw firings of the same run, record for record, and so must the
// writes joined from each.
func TestCommitTracer(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	for _, perPoint := range []bool{false, true} {
		name := "multi"
		if perPoint {
			name = "per-point"
		}
		t.Run(name, func(t *testing.T) { checkCommitTracer(t, c, perPoint, "v3.5/v3.6") })
	}
}

func checkCommitTracer(t *testing.T, c *etcdtest.Cluster, perPoint bool, build string) {
	// The multi variant also follows the scheduler inside (*WAL).sync
	// (what etcdscope commit runs); the per-point one shows the core
	// object loads without those programs (what serve runs).
	// The per-point variant also leaves the gRPC part unprobed (NoGRPC).
	tr, err := NewCommit(CommitConfig{PID: c.Members[0].PID, PerPointLinks: perPoint, Sched: !perPoint, Raw: !perPoint, Profile: true, NoGRPC: perPoint})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if perPoint && tr.Multi() {
		t.Error("PerPointLinks: attached one uprobe_multi link")
	}
	t.Logf("one uprobe_multi link: %v", tr.Multi())
	if tr.Build() != build {
		t.Errorf("etcd release line %q, want %q", tr.Build(), build)
	}
	for _, p := range tr.Probes() {
		if !p.Attached {
			t.Errorf("probe %s not attached: %+v", p.Name, p)
		}
	}
	const puts = 20
	done := make(chan error, 1)
	go func() {
		err := c.Put(context.Background(), puts, 50, 100)
		time.Sleep(300 * time.Millisecond)
		done <- errors.Join(err, tr.Drain())
	}()
	n := map[event.CommitKind]int{}
	saves := 0
	var kernel, fromRaw []event.Commit // assembled records: the kernel's, the Assembler's
	asm := commit.NewAssembler()
	readCommit(t, tr, func(ev event.Commit) {
		n[ev.Kind]++
		if ev.Kind == event.CommitSaveEnter && ev.B != 0 {
			saves++
		}
		switch {
		case ev.Kind.Assembled():
			kernel = append(kernel, ev)
		case ev.Kind.Raw():
			fromRaw = asm.Add(&ev, fromRaw)
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("records: %v", n)
	counts, err := tr.Counts()
	if err != nil {
		t.Fatal(err)
	}
	for k, f := range counts.Fired {
		if f != 0 {
			t.Logf("%-14s fired %4d, %6.2f per put, %5.0f ns a run", event.CommitKind(k), f, float64(f)/puts, float64(counts.RunNs[k])/float64(f))
		}
	}
	if counts.WritesSeen != puts || counts.WritesSampled != puts || counts.WritesDropped != 0 {
		t.Errorf("writes seen %d, sampled %d, dropped %d for %d puts", counts.WritesSeen, counts.WritesSampled, counts.WritesDropped, puts)
	}
	for _, k := range []event.CommitKind{event.CommitProposeEnter, event.CommitProposeRet, event.CommitRegister, event.CommitTrigger, event.CommitApplyEntry, event.CommitSyncEnter, event.CommitSyncRet, event.CommitRPCEnter, event.CommitRPCRet} {
		want := uint64(puts)
		if perPoint && (k == event.CommitRPCEnter || k == event.CommitRPCRet) {
			want = 0 // NoGRPC
		}
		if counts.Fired[k] != want {
			t.Errorf("%s fired %d times for %d puts, want %d", k, counts.Fired[k], puts, want)
		}
	}
	if _, down := tr.Unavailable()[PartGRPC]; down != perPoint {
		t.Errorf("grpc part unavailable: %v, want %v (NoGRPC)", down, perPoint)
	}
	// One member: every Save with entries is followed by a Send (the
	// next Ready's), so one CommitSaveSent per put too.
	for _, k := range []event.CommitKind{event.CommitWriteDone, event.CommitSaveDone, event.CommitSyncDone, event.CommitSaveSent} {
		if n[k] != puts {
			t.Errorf("%d %s records for %d puts", n[k], k, puts)
		}
	}
	if !perPoint {
		if saves != puts {
			t.Errorf("%d WAL Saves with entries for %d puts", saves, puts)
		}
		checkSameRecords(t, kernel, fromRaw, 1)
	} else if n[event.CommitProposeEnter] != 0 {
		t.Errorf("%d raw firings without CommitConfig.Raw", n[event.CommitProposeEnter])
	}
	// Each fdatasync sleeps on the disk (or its wake-up is seen), so the
	// WAL sync's thread switches at least once per put while marked.
	if why, ok := tr.Unavailable()[PartSched]; ok && !perPoint {
		t.Errorf("scheduler programs unavailable: %+v", why)
	}
	if perPoint && n[event.CommitSched] != 0 || !perPoint && n[event.CommitSched] < puts {
		t.Errorf("%d scheduler records inside (*WAL).sync for %d puts (followed: %v)", n[event.CommitSched], puts, !perPoint)
	}
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("lost %d (%v)", lost, err)
	}
	// Close from several goroutines at once (the Tracer contract): one
	// detaches, the others wait for it and return its result.
	start := time.Now()
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- tr.Close() }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	t.Logf("Close (detach) took %v", time.Since(start))
	if err := tr.Close(); err != nil {
		t.Errorf("another Close: %v", err)
	}
}

// readCommit hands each record of tr to each until the ring is drained
// (CommitTracer.Drain).
func readCommit(t *testing.T, tr *CommitTracer, each func(ev event.Commit)) {
	t.Helper()
	var ev event.Commit
	for {
		if err := tr.Read(&ev); err != nil {
			if !errors.Is(err, ErrDrained) {
				t.Fatal(err)
			}
			return
		}
		each(ev)
	}
}

// checkSameRecords compares the kernel's assembled records with the
// Assembler's of the same firings, and the writes the joiner makes of
// each. The records are compared in one canonical order (time, then
// kind, thread, goroutine): a probe run with the raw firings on reserves
// its raw firing and its assembled record separately, so another CPU's
// record may land between them in the ring (seen in CI: an ack at
// ts ...159 between a write's completing firing and its write_done at
// ...274). The joins read each list in the ring's order, as serve does.
func checkSameRecords(t *testing.T, kernel, fromRaw []event.Commit, voters int) []commit.Write {
	t.Helper()
	if len(kernel) != len(fromRaw) {
		t.Errorf("%d records assembled in the kernel, %d from the raw firings", len(kernel), len(fromRaw))
	}
	byTime := func(recs []event.Commit) []event.Commit {
		s := slices.Clone(recs)
		slices.SortStableFunc(s, func(a, b event.Commit) int {
			return cmp.Or(cmp.Compare(a.TsNs, b.TsNs), cmp.Compare(a.Kind, b.Kind),
				cmp.Compare(a.TID, b.TID), cmp.Compare(a.Goroutine, b.Goroutine))
		})
		return s
	}
	ks, gs := byTime(kernel), byTime(fromRaw)
	moved := 0
	for i := range min(len(kernel), len(fromRaw)) {
		if kernel[i].Kind != fromRaw[i].Kind || kernel[i].TsNs != fromRaw[i].TsNs {
			moved++
		}
	}
	t.Logf("%d of %d records at another place in the ring than their raw firings'", moved, len(kernel))
	for i := range min(len(ks), len(gs)) {
		k, g := ks[i], gs[i]
		if k.Kind != g.Kind || k.TsNs != g.TsNs || k.Write != g.Write || k.Save != g.Save || k.A != g.A || k.B != g.B {
			t.Errorf("record %d: kernel %+v, from the raw firings %+v", i, k, g)
		}
	}
	join := func(recs []event.Commit) []commit.Write {
		j := commit.NewJoiner(commit.Config{Role: commit.RoleLeader, Voters: voters})
		var out []commit.Write
		for i := range recs {
			out = j.Add(&recs[i], out)
		}
		return j.Flush(out)
	}
	kw, gw := join(kernel), join(fromRaw)
	if !reflect.DeepEqual(kw, gw) {
		t.Errorf("writes joined from the kernel's records differ from those from the raw firings:\n%+v\n%+v", kw, gw)
	}
	if len(kw) == 0 {
		t.Error("no write joined")
	}
	return kw
}

// threeMembers starts a real 3-member etcd (root only) and returns it,
// its leader and a context that ends with the test (a minute at most).
func threeMembers(t *testing.T) (*etcdtest.Cluster, *etcdtest.Member, context.Context) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c, leader, ctx
}

// TestCommitAssemblyThreeMembers traces the leader of a real 3-member
// etcd with the raw firings on (CommitConfig.Raw): with followers, Send
// carries messages and acks arrive, and the kernel's assembled records
// must still equal the Assembler's of the same firings, and join (acks
// included) into the same writes, every one with its deciding vote.
func TestCommitAssemblyThreeMembers(t *testing.T) { checkAssemblyThreeMembers(t) }

func checkAssemblyThreeMembers(t *testing.T) {
	c, leader, ctx := threeMembers(t)
	tr, err := NewCommit(CommitConfig{PID: leader.PID, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const puts = 30
	done := make(chan error, 1)
	go func() {
		err := c.Put(ctx, puts, 50, 100)
		time.Sleep(300 * time.Millisecond)
		done <- errors.Join(err, tr.Drain())
	}()
	var kernel, fromRaw []event.Commit
	asm := commit.NewAssembler()
	readCommit(t, tr, func(ev event.Commit) {
		switch {
		case ev.Kind.Assembled():
			kernel = append(kernel, ev)
		case ev.Kind == event.CommitAppResp:
			kernel, fromRaw = append(kernel, ev), append(fromRaw, ev)
		case ev.Kind.Raw():
			fromRaw = asm.Add(&ev, fromRaw)
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ws := checkSameRecords(t, kernel, fromRaw, 3)
	for _, w := range ws {
		if !w.DeciderKnown || len(w.Acks) == 0 {
			t.Errorf("write %d: decider known %v, %d acks", w.Index, w.DeciderKnown, len(w.Acks))
		}
	}
	t.Logf("%d records, %d writes", len(kernel), len(ws))
}

// TestCommitFollowerEntries traces a follower of a real 3-member etcd
// while the leader takes puts: each entry the follower receives comes in
// a MsgApp from the leader (CommitMsgApp, read off Process's message), is
// saved to its WAL (CommitSaveDone) and answered by the Send after that
// Save (CommitSaveSent, with the Save's range). The oracle is the
// leader's own commit index (etcd_server_proposals_committed_total): the
// distinct indexes received equal its delta over the run, and so do the
// indexes saved and answered; per Save, the MsgApps that brought its
// entries arrived before it started, and its answer left after it ended.
func TestCommitFollowerEntries(t *testing.T) { checkFollowerEntries(t) }

func checkFollowerEntries(t *testing.T) {
	c, leader, ctx := threeMembers(t)
	var follower *etcdtest.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
			break
		}
	}
	tr, err := NewCommit(CommitConfig{PID: follower.PID})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before, err := c.Scrape(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	const puts = 30
	done := make(chan error, 1)
	var after map[string]*dto.MetricFamily
	go func() {
		err := c.Put(ctx, puts, 50, 100)
		time.Sleep(500 * time.Millisecond)
		var serr error
		after, serr = c.Scrape(ctx, leader)
		done <- errors.Join(err, serr, tr.Drain())
	}()
	recv := map[uint64]uint64{} // index -> first MsgApp arrival
	saved, sent := map[uint64]event.CommitSave{}, map[uint64]uint64{}
	readCommit(t, tr, func(ev event.Commit) {
		m := ev.Msg
		switch ev.Kind {
		case event.CommitMsgApp:
			if m.From != leader.ID || m.Term == 0 || m.First == 0 || m.Last < m.First || m.Last-m.First > 1000 {
				t.Fatalf("MsgApp %+v: want from the leader %x, a term and a range", m, leader.ID)
			}
			for i := m.First; i <= m.Last; i++ {
				if _, ok := recv[i]; !ok {
					recv[i] = ev.TsNs
				}
			}
		case event.CommitSaveDone:
			for i := ev.Save.First; i <= ev.Save.Last && ev.Save.Last-ev.Save.First < 1000; i++ {
				saved[i] = ev.Save
			}
		case event.CommitSaveSent:
			for i := m.First; i <= m.Last && m.Last-m.First < 1000; i++ {
				sent[i] = ev.TsNs
			}
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	gauge := func(fams map[string]*dto.MetricFamily) float64 {
		return fams["etcd_server_proposals_committed_total"].GetMetric()[0].GetGauge().GetValue()
	}
	committed := gauge(after) - gauge(before)
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("%d events lost (%v)", lost, err)
	}
	t.Logf("leader's commit index moved by %.0f; the follower received %d entries, saved %d, answered %d", committed, len(recv), len(saved), len(sent))
	if float64(len(recv)) != committed || len(saved) != len(recv) || len(sent) != len(recv) || committed < puts {
		t.Errorf("received %d, saved %d, answered %d entries; the leader committed %.0f (want all equal, at least %d)", len(recv), len(saved), len(sent), committed, puts)
	}
	var worst struct{ queue, respond uint64 }
	for i, at := range recv {
		s, ok1 := saved[i]
		resp, ok2 := sent[i]
		if !ok1 || !ok2 {
			continue
		}
		if at > s.StartNs || s.EndNs > resp || s.SyncStartNs < s.StartNs || s.SyncEndNs > s.EndNs {
			t.Errorf("entry %d: received %d, Save %d..%d (sync %d..%d), answered %d: out of order", i, at, s.StartNs, s.EndNs, s.SyncStartNs, s.SyncEndNs, resp)
		}
		worst.queue, worst.respond = max(worst.queue, s.StartNs-at), max(worst.respond, resp-at)
	}
	t.Logf("worst receive-to-Save %d ns, receive-to-answer %d ns", worst.queue, worst.respond)
}
