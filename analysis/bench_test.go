package analysis

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// benchEvents is the event stream of one ext4 fdatasync as fio's etcd job
// makes it on a virtio disk (seen with bench/fsync.bt): the thread's own
// data write, the flush bio the commit queues, jbd2's commit block with
// REQ_PREFLUSH|REQ_FUA, and the commit window; ≈ 120 µs in all.
func benchEvents(s uint64, rq uint64) []any {
	return []any{
		event.FsyncEnter{TID: tid, StartNs: s},
		event.Block{Rq: rq, Dev: diskDev, Op: event.OpWrite, Flags: event.ReqSync, InsertNs: s + 5e3, IssueNs: s + 6e3,
			CompleteNs: s + 50e3, PID: 99, TID: tid, Comm: "fio", Final: true, Bytes: 4096, Sector: rq},
		event.FlushBio{Dev: diskDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqFUA | event.ReqMeta | event.ReqSync,
			PID: 300, TID: 300, QueueNs: s + 52e3},
		event.Block{Rq: rq + 1, Dev: diskDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqFUA | event.ReqMeta | event.ReqSync,
			InsertNs: s + 53e3, IssueNs: s + 54e3, CompleteNs: s + 110e3, PID: 300, TID: 300, Comm: "jbd2/vda1-8", Final: true, Bytes: 8192},
		event.Journal{Source: event.JournalJBD2Commit, Dev: fsDev, Txn: uint32(rq), StartNs: s + 51e3, EndNs: s + 112e3},
	}
}

// BenchmarkAttributorFsync is the userspace cost per traced fsync in
// analysis: Add of its five non-fsync events and Attribute of the fsync.
func BenchmarkAttributorFsync(b *testing.B) {
	a := NewAttributor(lookup)
	const period = 250e3 // 4k fsync/s, fio's etcd job on this VM
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := uint64(1e9 + i*period)
		for _, ev := range benchEvents(s, uint64(2*i)) {
			a.Add(ev)
		}
		f := fsyncEv(s, s+120e3)
		f.Names = []string{"etcd.0.0", "bench"}
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
	for _, ev := range benchEvents(1e9, 1) {
		a.Add(ev)
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
