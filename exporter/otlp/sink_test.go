package otlp

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
)

// receiver is an in-process OTLP gRPC trace receiver that keeps every
// span with its resource's service.instance.id.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []gotSpan
}

type gotSpan struct {
	member string
	span   *tracepb.Span
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		member := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.instance.id" {
				member = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, gotSpan{member, s})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	r := &receiver{}
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r, ln.Addr().String()
}

// threeMembers fills a leader's (1) and two followers' (2, 3) entry logs
// with entries first..last of term 2, each member's clock offset.
func threeMembers(first, last uint64) map[uint64]*commit.EntryLog {
	logs := map[uint64]*commit.EntryLog{1: commit.NewEntryLog(0), 2: commit.NewEntryLog(0), 3: commit.NewEntryLog(0)}
	for i := first; i <= last; i++ {
		t := 1_000_000_000 + i*10_000_000
		logs[1].Add(&event.Commit{Kind: event.CommitSaveDone, Save: event.CommitSave{First: i, Last: i, Term: 2, SendNs: t,
			StartNs: t + 10_000, EndNs: t + 510_000, SyncStartNs: t + 20_000, SyncEndNs: t + 500_000}}, nil)
		for _, f := range []struct {
			id, off, wal uint64
		}{{2, 5_000_000_000, 300_000}, {3, 9_000_000_000, 700_000}} {
			recv := t + 100_000 + f.off
			logs[f.id].Add(&event.Commit{Kind: event.CommitMsgApp, TsNs: recv, Msg: event.CommitMsg{From: 1, Term: 2, First: i, Last: i}}, nil)
			logs[f.id].Add(&event.Commit{Kind: event.CommitSaveDone, Save: event.CommitSave{First: i, Last: i, Term: 2,
				StartNs: recv + 20_000, EndNs: recv + 20_000 + f.wal, SyncStartNs: recv + 30_000, SyncEndNs: recv + f.wal}}, nil)
			resp := recv + 20_000 + f.wal + 10_000
			logs[f.id].Add(&event.Commit{Kind: event.CommitSaveSent, TsNs: resp, Msg: event.CommitMsg{Term: 2, First: i, Last: i}}, nil)
			logs[1].Add(&event.Commit{Kind: event.CommitAppResp, TsNs: resp - f.off + 100_000, A: f.id, B: i}, nil)
		}
	}
	return logs
}

// TestSinkThreeAgents runs three sinks, one per member, against one
// receiver: each sampled entry is one trace holding every member's
// spans, each span's parent is in it (the write's root on the leader),
// and each duration is the records' to the nanosecond.
func TestSinkThreeAgents(t *testing.T) {
	r, addr := startReceiver(t)
	const cluster = 0xc1
	names := commit.Names{1: "m1", 2: "m2", 3: "m3"}
	logs := threeMembers(10, 17)
	var sinks []*Sink
	for _, id := range []uint64{1, 2, 3} {
		s, err := New(Config{Endpoint: addr, Insecure: true, Sampling: Sampling{Every: 2}, Timeout: 2 * time.Second}, logs[id])
		if err != nil {
			t.Fatal(err)
		}
		s.nowNs = func() uint64 { return 1 << 62 } // every entry settled
		s.SetCluster(cluster, id, names)
		s.Start()
		sinks = append(sinks, s)
	}
	// The write of entry 12 ran on the leader; 13 is not sampled.
	for _, i := range []uint64{12, 13} {
		e, _ := logs[1].Get(i)
		sinks[0].Write(&commit.Write{Index: i, Role: commit.RoleLeader, StartNs: e.SendNs - 200_000, EndNs: e.SendNs + 3_000_000,
			PartsNs: map[string]int64{commit.PartGRPC: 200_000, commit.PartWALAppend: 3_000_000}, Entry: &e})
	}
	// The write of entry 14 ran on m2 (forwarded to the leader): the
	// root is m2's, and the leader's replication still hangs under it.
	e14, _ := logs[2].Get(14)
	sinks[1].Write(&commit.Write{Index: 14, Role: commit.RoleFollower, StartNs: e14.RecvNs - 400_000, EndNs: e14.RespondNs + 100_000,
		PartsNs: map[string]int64{commit.PartForward: 400_000, commit.PartWALAppend: int64(e14.RespondNs-e14.RecvNs) + 100_000}})
	for _, s := range sinks {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if n, err := s.Shutdown(ctx); n != 0 || err != nil {
			t.Errorf("shutdown: %d spans not exported, %v", n, err)
		}
		cancel()
	}
	byTrace := map[[16]byte][]gotSpan{}
	for _, g := range r.spans {
		byTrace[[16]byte(g.span.TraceId)] = append(byTrace[[16]byte(g.span.TraceId)], g)
	}
	if len(byTrace) != 4 {
		t.Fatalf("%d traces, want 4 (entries 10, 12, 14, 16)", len(byTrace))
	}
	for i := uint64(10); i <= 17; i++ {
		tid := TraceID(Key{cluster, 2, i})
		spans := byTrace[[16]byte(tid)]
		if i%2 == 1 {
			if len(spans) != 0 {
				t.Errorf("entry %d not sampled but has %d spans", i, len(spans))
			}
			continue
		}
		ids := map[[8]byte]*tracepb.Span{}
		members := map[string]int{}
		for _, g := range spans {
			ids[[8]byte(g.span.SpanId)] = g.span
			members[g.member]++
		}
		// Leader: replicate, wal, fdatasync, 2 votes; each follower:
		// entry, queue, wal, fdatasync, respond; the write: root + 2.
		want := 5 + 5 + 5
		if i == 12 || i == 14 {
			want += 3
		}
		if len(spans) != want || len(members) != 3 {
			t.Errorf("entry %d: %d spans from %v, want %d from 3 members", i, len(spans), members, want)
		}
		root := 0
		for _, g := range spans {
			s := g.span
			var durNs int64
			for _, a := range s.Attributes {
				if a.Key == "etcdscope.duration_ns" {
					durNs = a.GetValue().GetIntValue()
				}
			}
			if got := int64(s.EndTimeUnixNano - s.StartTimeUnixNano); got != durNs || durNs < 0 {
				t.Errorf("entry %d span %q: %d ns, records say %d", i, s.Name, got, durNs)
			}
			if len(s.ParentSpanId) == 0 {
				root++
				if wantBy := map[uint64]string{12: "1", 14: "2"}[i]; g.member != wantBy || [8]byte(s.SpanId) != [8]byte(SpanID(Key{cluster, 2, i}, 0, PartWrite)) {
					t.Errorf("entry %d: root %q from member %s, want the write's from %s", i, s.Name, g.member, wantBy)
				}
				continue
			}
			if _, ok := ids[[8]byte(s.ParentSpanId)]; !ok && !(i != 12 && i != 14 && s.Name == spanNames[PartReplicate]) {
				t.Errorf("entry %d span %q (member %s): parent not in the trace", i, s.Name, g.member)
			}
		}
		if (i == 12 || i == 14) != (root == 1) {
			t.Errorf("entry %d: %d roots", i, root)
		}
		// The follower's entry under the leader's vote for it, its
		// duration the records'.
		e2, _ := logs[2].Get(i)
		ent := ids[[8]byte(SpanID(Key{cluster, 2, i}, 2, PartEntry))]
		if ent == nil || [8]byte(ent.ParentSpanId) != [8]byte(SpanID(Key{cluster, 2, i}, 1, VotePart(2))) ||
			ent.EndTimeUnixNano-ent.StartTimeUnixNano != e2.RespondNs-e2.RecvNs {
			t.Errorf("entry %d: m2's entry span %v, want under m1's vote of m2, %d ns", i, ent, e2.RespondNs-e2.RecvNs)
		}
	}
	if got := sinks[1].exp.exported.Load(); got != 4*5+3 {
		t.Errorf("m2 exported %d spans, want 23 (4 entries, 1 write)", got)
	}
}

// TestSinkCollectorDown: a collector that is not there costs the trace
// path nothing: with a tiny span queue the sink's goroutine soon waits on
// the exporter, the writes past the sink's queue are dropped and
// counted, the failed exports are counted, and Shutdown keeps to its
// bound.
func TestSinkCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s, err := New(Config{Endpoint: addr, Insecure: true, QueueSpans: 8, Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetCluster(1, 2, commit.Names{1: "m1", 2: "m2", 3: "m3"})
	s.Start()
	start := time.Now()
	const writes = 4 * maxWrites
	for i := 0; i < writes; i++ {
		s.Write(&commit.Write{Index: 10, StartNs: 1, EndNs: 2, Entry: &commit.Entry{Term: 2, Index: 10}})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("%d writes handed over in %v: the trace path waited", writes, d)
	}
	time.Sleep(1500 * time.Millisecond) // a batch is exported and fails
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	s.Shutdown(ctx)
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("Shutdown took %v, bound 500 ms", d)
	}
	if s.exp.failed.Load() == 0 || s.exp.exported.Load() != 0 {
		t.Errorf("exported %d, failed %d: want the failures counted", s.exp.exported.Load(), s.exp.failed.Load())
	}
	// The span queue (8) and one export batch (the SDK's 512) take about
	// 520 writes before the goroutine waits on the export (300 ms, longer
	// than the hand-over above); the sink's queue holds maxWrites more:
	// ~2550 dropped (12 runs: 2554-3072); the bound allows 2048.
	if d := s.droppedQueue.Load(); d < writes/2 || s.writesNoTerm.Load() != 0 {
		t.Errorf("%d of %d writes dropped at the queue (%d without a term): want at least %d", d, writes, s.writesNoTerm.Load(), writes/2)
	}
	t.Logf("%d writes: %d dropped at the full queue, %d spans made, %d failed to export", writes, s.droppedQueue.Load(), s.spansEnded.Load(), s.exp.failed.Load())
}

// TestSinkMinDuration: under --otlp-min-duration each member judges its
// own part: here the leader's replication (530 µs) and m3's entry
// (730 µs) pass 500 µs, m2's entry (330 µs) does not.
func TestSinkMinDuration(t *testing.T) {
	r, addr := startReceiver(t)
	names := commit.Names{1: "m1", 2: "m2", 3: "m3"}
	logs := threeMembers(10, 11)
	for _, id := range []uint64{1, 2, 3} {
		s, err := New(Config{Endpoint: addr, Insecure: true, Sampling: Sampling{MinNs: 500_000}}, logs[id])
		if err != nil {
			t.Fatal(err)
		}
		s.nowNs = func() uint64 { return 1 << 62 }
		s.SetCluster(1, id, names)
		s.Start()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.Shutdown(ctx)
		cancel()
		want := map[uint64]uint64{1: 2, 2: 0, 3: 2}[id]
		if got := s.entriesExported.Load(); got != want || s.entriesSkipped.Load() != 2-want {
			t.Errorf("m%d: %d entries exported, %d skipped: want %d exported", id, got, s.entriesSkipped.Load(), want)
		}
	}
	members := map[string]int{}
	for _, g := range r.spans {
		members[g.member]++
	}
	if len(members) != 2 || members["1"] != 2*5 || members["3"] != 2*5 {
		t.Errorf("spans by member %v: want 10 of m1, 10 of m3", members)
	}
}

// TestSinkCollectorSilent: a collector that accepts and never answers
// (a listener that never calls accept: the kernel completes the
// handshake, nothing reads) holds each export for the whole timeout
// (DefaultTimeout, serve's), and Shutdown still keeps to the bound serve
// gives it (SpansShutdown, 1 s, so that serve exits within 2 s of
// SIGINT), with the spans not exported counted, not reported as 0.
func TestSinkCollectorSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := New(Config{Endpoint: ln.Addr().String(), Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetCluster(1, 2, commit.Names{1: "m1", 2: "m2", 3: "m3"})
	s.Start()
	for i := uint64(10); i < 110; i++ {
		s.Write(&commit.Write{Index: i, StartNs: 1, EndNs: 2, Entry: &commit.Entry{Term: 2, Index: i}})
	}
	time.Sleep(1500 * time.Millisecond) // a batch is being exported
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	n, err := s.Shutdown(ctx)
	d := time.Since(start)
	t.Logf("Shutdown in %v: %d spans not exported (%v)", d.Round(time.Millisecond), n, err)
	if d > 1200*time.Millisecond {
		t.Errorf("Shutdown took %v, bound 1 s", d)
	}
	if n == 0 || s.exp.exported.Load() != 0 {
		t.Errorf("%d spans not exported, %d exported: want the unexported counted", n, s.exp.exported.Load())
	}
}
