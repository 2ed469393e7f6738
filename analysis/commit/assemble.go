package commit

import "github.com/etcdscope/etcdscope/event"

// Assembler turns the probes' firings (raw event.Commit records, the
// reference stream) into one record per write (event.CommitWriteDone),
// per WAL Save with entries (CommitSaveDone) and per (*WAL).sync
// (CommitSyncDone): what bpf/commit.bpf.c assembles in the kernel, by the
// same rules, which the tests check on the same run. Records that are not
// raw firings (event.CommitKind.Raw) pass through. Not safe for
// concurrent use; memory is bounded (Dropped counts what it forgot).
//
// The rules: a write is processInternalRaftRequestOnce on its handler
// goroutine, from its entry (a second entry within 1 ms of one with no id
// yet is the same call restarted after its stack grew: the first entry
// counts) to its return, or to the return of the unary RPC around it
// (processUnaryRPC on the same goroutine, entered before it). Register on
// that goroutine gives its id; the Trigger of that id on an apply
// goroutine, inside applyEntryNormal, gives its index (that
// applyEntryNormal's), its batch (that goroutine's last applyAll) and its
// apply's end. A write returned without an id is not a write (an error
// before proposing); one returned with an id and no Trigger failed or
// timed out (Dropped). A Save with entries on a Raft goroutine runs from
// its entry to its return, with the last Send before it since that
// goroutine's previous Save returned, and the sync inside it; a
// HardState-only Save is no write's. The first Send after a Save with
// entries on its goroutine makes a CommitSaveSent (a follower's
// MsgAppResp for those entries).
type Assembler struct {
	writes map[uint64]*asmWrite // handler goroutine -> its write in progress
	rpcs   map[uint64]uint64    // goroutine -> its unary RPC's entry
	ids    map[uint64]uint64    // request id -> the goroutine that registered it
	apply  map[uint64]*asmApply // apply goroutine -> its last applyAll and applyEntryNormal
	raft   map[uint64]*asmRaft  // Raft goroutine -> its Send, Save, sync
	// Dropped counts writes forgotten because too many were pending, or
	// that returned with an id and were never applied (a failed or timed
	// out proposal), as the kernel's commit_counts.writes_dropped.
	Dropped int
}

type asmWrite struct {
	w                  event.CommitWrite
	id, applied, ended bool // ended: returned, waiting for its RPC's return
}

type asmApply struct {
	batchNs, index uint64
	hasEntry       bool
}

type asmRaft struct {
	sendNs, syncNs uint64
	save           int  // saveNone, saveState, saveEntries
	sent           bool // s is a returned Save with entries: the next Send makes a CommitSaveSent
	s              event.CommitSave
}

const (
	saveNone = iota
	saveState
	saveEntries
)

// maxAssembling bounds the writes (and RPCs, ids) in progress, as the
// kernel's maps (bpf/commit.bpf.c commit_writes) do.
const maxAssembling = 16384

// NewAssembler returns an empty assembler.
func NewAssembler() *Assembler {
	return &Assembler{writes: map[uint64]*asmWrite{}, rpcs: map[uint64]uint64{}, ids: map[uint64]uint64{},
		apply: map[uint64]*asmApply{}, raft: map[uint64]*asmRaft{}}
}

// Add feeds one record and appends what it completes to out: nothing, a
// CommitWriteDone, CommitSaveDone or CommitSyncDone; a record that is not
// a raw firing is appended as it is.
func (a *Assembler) Add(ev *event.Commit, out []event.Commit) []event.Commit {
	if !ev.Kind.Raw() {
		return append(out, *ev)
	}
	g, ts := ev.Goroutine, ev.TsNs
	switch ev.Kind {
	case event.CommitRPCEnter:
		if _, ok := a.rpcs[g]; ok || len(a.rpcs) < maxAssembling {
			a.rpcs[g] = ts
		}
	case event.CommitRPCRet:
		delete(a.rpcs, g)
		if w, ok := a.writes[g]; ok && w.ended {
			delete(a.writes, g)
			w.w.RPCEndNs = ts
			out = append(out, writeDone(w, g, ev.TID, ts))
		}
	case event.CommitProposeEnter:
		w := &asmWrite{w: event.CommitWrite{StartNs: ts, RPCStartNs: a.rpcs[g]}}
		if old, ok := a.writes[g]; ok && !old.id && !old.ended && old.w.StartNs+1e6 > ts {
			w.w.StartNs = old.w.StartNs // morestack restart: the first entry counts
		} else if !ok && len(a.writes) >= maxAssembling {
			a.Dropped++
			return out
		}
		a.writes[g] = w
	case event.CommitRegister:
		if w, ok := a.writes[g]; ok && !w.id && !w.ended {
			w.id, w.w.ID = true, ev.A
			if _, ok := a.ids[ev.A]; ok || len(a.ids) < maxAssembling {
				a.ids[ev.A] = g
			} else {
				a.Dropped++
			}
		}
	case event.CommitProposeRet:
		w, ok := a.writes[g]
		if !ok || w.ended {
			return out
		}
		if !w.id { // returned before proposing (an error): not a write
			delete(a.writes, g)
			return out
		}
		delete(a.ids, w.w.ID)
		if !w.applied { // failed or timed out: never applied here
			delete(a.writes, g)
			a.Dropped++
			return out
		}
		w.w.EndNs = ts
		if w.w.RPCStartNs != 0 && w.w.RPCStartNs <= w.w.StartNs {
			w.ended = true // the write ends with its RPC
			return out
		}
		w.w.RPCStartNs = 0
		delete(a.writes, g)
		out = append(out, writeDone(w, g, ev.TID, ts))
	case event.CommitApplyAll:
		a.applyOf(g).batchNs = ts
	case event.CommitApplyEntry:
		ap := a.applyOf(g)
		ap.index, ap.hasEntry = ev.A, true
	case event.CommitTrigger:
		wg, ok := a.ids[ev.A]
		if !ok {
			return out
		}
		w, ok := a.writes[wg]
		if !ok || !w.id || w.w.ID != ev.A || w.applied {
			return out
		}
		ap, ok := a.apply[g]
		if !ok || !ap.hasEntry { // a Trigger outside applyEntryNormal (a failed proposal's GC)
			return out
		}
		w.applied = true
		w.w.Index, w.w.BatchNs, w.w.TriggerNs = ap.index, ap.batchNs, ts
	case event.CommitSend:
		r := a.raftOf(g)
		r.sendNs = ts
		if r.sent {
			out = append(out, event.Commit{Kind: event.CommitSaveSent, TsNs: ts, TID: ev.TID,
				Msg: event.CommitMsg{Term: r.s.Term, First: r.s.First, Last: r.s.Last}})
			r.sent = false
		}
	case event.CommitSaveEnter:
		r := a.raftOf(g)
		r.sent = false
		if ev.B == 0 { // a HardState-only Save: not a write's
			r.save = saveState
			return out
		}
		r.save = saveEntries
		r.s = event.CommitSave{First: ev.A, Last: ev.B, Term: ev.C, SendNs: r.sendNs, StartNs: ts}
	case event.CommitSyncEnter:
		r := a.raftOf(g)
		r.syncNs = ts
		if r.save == saveEntries {
			r.s.SyncStartNs, r.s.SyncTIDs[0] = ts, ev.TID
		}
	case event.CommitSyncRet:
		r, ok := a.raft[g]
		if !ok {
			return out
		}
		if r.syncNs != 0 {
			out = append(out, event.Commit{Kind: event.CommitSyncDone, TsNs: ts, TID: ev.TID,
				Save: event.CommitSave{SyncStartNs: r.syncNs, SyncEndNs: ts}})
			r.syncNs = 0
		}
		if r.save == saveEntries {
			r.s.SyncEndNs, r.s.SyncTIDs[1] = ts, ev.TID
		}
	case event.CommitSaveRet:
		r, ok := a.raft[g]
		if !ok || r.save == saveNone {
			return out
		}
		if r.save == saveEntries {
			r.s.EndNs = ts
			out = append(out, event.Commit{Kind: event.CommitSaveDone, TsNs: ts, TID: ev.TID, Save: r.s})
			r.sent = true
		}
		r.save, r.sendNs = saveNone, 0
	}
	return out
}

// writeDone is the record of write w of goroutine g, ended at ts.
func writeDone(w *asmWrite, g uint64, tid uint32, ts uint64) event.Commit {
	return event.Commit{Kind: event.CommitWriteDone, TsNs: ts, Goroutine: g, TID: tid, Write: w.w}
}

func (a *Assembler) applyOf(g uint64) *asmApply { return stateOf(a.apply, g) }

func (a *Assembler) raftOf(g uint64) *asmRaft { return stateOf(a.raft, g) }

// stateOf returns goroutine g's state in m, created empty.
func stateOf[T any](m map[uint64]*T, g uint64) *T {
	v, ok := m[g]
	if !ok {
		v = new(T)
		m[g] = v
	}
	return v
}
