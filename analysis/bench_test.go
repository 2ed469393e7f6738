package analysis

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// benchEvents appends to dst the event stream of one ext4 fdatasync as
// fio's etcd job makes it on a virtio disk (seen with bench/fsync.bt): the
// thread's own data write, the flush bio the commit queues, jbd2's commit
// block with REQ_PREFLUSH|REQ_FUA, and the commit window; ≈ 120 µs in
// all. They are event.Any values, as tracer.FsyncTracer.Read fills
// them (Value gives what Read returns).
func benchEvents(s uint64, rq uint64, dst []event.Any) []event.Any {
	return append(dst,
		event.Any{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: tid, StartNs: s}},
		event.Any{Kind: event.KindBlock, Block: event.Block{Rq: rq, Dev: diskDev, Op: event.OpWrite, Flags: event.ReqSync, InsertNs: s + 5e3, IssueNs: s + 6e3,
			CompleteNs: s + 50e3, PID: 99, TID: tid, Comm: "fio", Final: true, Bytes: 4096, Sector: rq}},
		event.Any{Kind: event.KindFlushBio, FlushBio: event.FlushBio{Dev: diskDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqFUA | event.ReqMeta | event.ReqSync,
			PID: 300, TID: 300, QueueNs: s + 52e3}},
		event.Any{Kind: event.KindBlock, Block: event.Block{Rq: rq + 1, Dev: diskDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqFUA | event.ReqMeta | event.ReqSync,
			InsertNs: s + 53e3, IssueNs: s + 54e3, CompleteNs: s + 110e3, PID: 300, TID: 300, Comm: "jbd2/vda1-8", Final: true, Bytes: 8192}},
		event.Any{Kind: event.KindJournal, Journal: event.Journal{Source: event.JournalJBD2Commit, Dev: fsDev, Txn: uint32(rq), StartNs: s + 51e3, EndNs: s + 112e3}},
	)
}

// BenchmarkAttributorFsync is the userspace cost per traced fsync in
// analysis: its five non-fsync events and the fsync itself, at 4k
// fsync/s. AddEvent is the event loop's path (events in a reused
// event.Any, as tracer.FsyncTracer.Read fills them); Add takes each boxed in an
// interface, as Read returns them (one allocation per event more).
func BenchmarkAttributorFsync(b *testing.B) {
	b.Run("AddEvent", func(b *testing.B) { benchAttributor(b, false) })
	b.Run("Add", func(b *testing.B) { benchAttributor(b, true) })
}

// boxedSink makes the boxed events escape as Read's do.
var boxedSink any

func benchAttributor(b *testing.B, boxed bool) {
	a := NewAttributor(lookup)
	const period = 250e3 // 4k fsync/s, fio's etcd job on this VM
	var evs []event.Any
	names := []string{"etcd.0.0", "bench"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := uint64(1e9 + i*period)
		evs = benchEvents(s, uint64(2*i), evs[:0])
		for j := range evs {
			if boxed {
				boxedSink = evs[j].Value() // on the heap, as Read's result is
				a.Add(boxedSink)
			} else {
				a.AddEvent(&evs[j])
			}
		}
		f := fsyncEv(s, s+120e3)
		f.Names = names
		if rec := a.Attribute(f); rec.TotalNs != 120e3 {
			b.Fatalf("total %d ns, want 120000", rec.TotalNs)
		}
	}
	if n := a.Retained(); n > 100000 {
		b.Fatalf("Attributor retains %d events: pruning does not bound it", n)
	}
}

// benchRecord is the record of benchEvents' fdatasync on an etcd WAL file,
// as the event loop writes it.
func benchRecord() FsyncRecord {
	a := NewAttributor(lookup)
	evs := benchEvents(1e9, 1, nil)
	for i := range evs {
		a.AddEvent(&evs[i])
	}
	rec := a.Attribute(fsyncEv(1e9, 1e9+120e3))
	rec.Path = "/var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal"
	rec.FileKind = FileKind(rec.Path)
	return rec
}

// BenchmarkFsyncRecordJSON is the cost of one --output json line.
func BenchmarkFsyncRecordJSON(b *testing.B) {
	rec := benchRecord()
	enc := json.NewEncoder(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Encode(&rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncRecordAppendJSON is the cost of one --output json line as
// cmd/etcdscope writes it: AppendJSON into a reused buffer (the same bytes
// as BenchmarkFsyncRecordJSON's encoding/json, without reflection).
func BenchmarkFsyncRecordAppendJSON(b *testing.B) {
	rec := benchRecord()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = append(rec.AppendJSON(buf[:0]), '\n')
		io.Discard.Write(buf)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkFsyncEncoderAppend is what etcdscope fsync --output json does
// per call (render.JSONLines): FsyncEncoder, its identity fields cached
// from the call before (the same file, as for etcd's WAL).
func BenchmarkFsyncEncoderAppend(b *testing.B) {
	rec := benchRecord()
	var buf []byte
	var e FsyncEncoder
	b.ReportAllocs()
	for b.Loop() {
		buf = append(e.Append(buf[:0], &rec), '\n')
		io.Discard.Write(buf)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAttributorStacked is the cost per guest fsync on a stacked
// device (ext4 over a loop device): each has one flush, served by the
// loop worker's fsync of the backing file, while another thread's call
// stays in flight, so every host record is retained (up to
// inflightMaxNs). nest once scanned every retained host per flush: ~300
// µs per fsync after 10 s of 1k fsync/s; it must not grow with the run.
func BenchmarkAttributorStacked(b *testing.B) {
	hostFS := event.MkDev(254, 0)
	a := NewAttributor(lookup)
	a.SetBackingLookup(func(d event.Dev) (Backing, bool) {
		return Backing{Dev: hostFS, Ino: 77, Path: "/var/tmp/img"}, d == diskDev
	})
	a.AddEvent(&event.Any{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: tid + 1, StartNs: 1e9}})
	const period = 1e6 // 1k fsync/s
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := uint64(1e9 + i*period)
		evs := []event.Any{
			{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: tid, StartNs: s}},
			{Kind: event.KindKernelFsync, Fsync: event.Fsync{Syscall: event.SysKthread, TID: 9, Comm: "kworker/u8:1", Dev: hostFS,
				FSType: "ext4", Ino: 77, StartNs: s + 20e3, EndNs: s + 80e3}},
			{Kind: event.KindBlock, Block: event.Block{Rq: uint64(i), Dev: diskDev, Op: event.OpFlush, Flags: event.ReqPreflush,
				IssueNs: s + 10e3, CompleteNs: s + 90e3, Final: true}},
		}
		for j := range evs {
			a.AddEvent(&evs[j])
		}
		if rec := a.Attribute(fsyncEv(s, s+100e3)); len(rec.Requests) != 1 || len(rec.Requests[0].Host) != 1 {
			b.Fatalf("requests %+v", rec.Requests)
		}
	}
}
