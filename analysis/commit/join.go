// Package commit splits etcd writes into what each one waited on, from
// the records of the commit tracer (uprobes on etcd's own functions,
// event.Commit) or, where etcd cannot be probed, from a kernel-only model
// (Model). It is pure: no kernel, no I/O.
//
// # How one write is followed
//
// A write is one call of (*EtcdServer).processInternalRaftRequestOnce on
// the member traced (etcd v3.4, v3.5 and v3.6 server code), from its entry to its
// return on the gRPC handler's goroutine (Start, End). On that goroutine
// wait.Register(id) gives the request id. The apply goroutine's
// applyEntryNormal(e) then wait.Trigger(id) give the write's Raft index
// and the instant its result was handed back; the last applyAll on that
// goroutine before it is the start of the apply batch. The WAL Save whose
// entries cover the index (on the Raft goroutine) gives the leader's WAL
// append, and the (*WAL).sync inside it the fdatasync. On the leader the
// Transport.Send just before that Save is when the entries went to the
// followers; each follower's first MsgAppResp with an index at or past
// the write's after that is its ack.
//
// Where grpc.(*Server).processUnaryRPC is probed too, the write begins
// and ends with the unary RPC around it on the same goroutine, and the
// time outside processInternalRaftRequestOnce (request decode, the auth
// and quota interceptors, response encode) is the grpc part.
//
// # The split (Parts), on the critical path, summing to End-Start
//
// Leader: the write waits for the leader's WAL append and for the
// (q-1)-th follower ack, q = Voters/2+1, whichever comes last (etcd
// applies the entry from a Ready after the one whose Save wrote it, so
// even where Raft commits before the leader's own Save returns, the
// apply waits for it). That last one is the quorum's deciding vote: the
// local WAL or a follower.
//
//	grpc           the unary RPC outside the write's function (when probed)
//	propose        the function's entry → Save's start (Raft takes the entry into a Ready)
//	wal_append     Save's start → Save's end
//	quorum_wait    Save's end → the ack that completes the quorum, when it came last
//	commit_to_apply commit → applyAll's start (Raft's next Ready; earlier applies)
//	apply          applyAll's start → Trigger (the backend)
//	return         Trigger → the function's return (the handler goroutine wakes)
//
// A follower forwards the proposal to the leader and learns the commit
// from it, so on a follower the parts are:
//
//	forward        Start → the local Save's start (to the leader and back with the entry)
//	wal_append     the local Save (this member's own WAL append)
//	quorum_wait    Save's end → applyAll's start (the leader's quorum and its commit notice)
//	apply, return  as on the leader
//
// The WAL append is per Raft batch (one Ready): when etcd batches several
// writes into one Save, each of them shows the whole Save (BatchEntries > 1).
package commit

import (
	"cmp"
	"slices"

	"github.com/etcdscope/etcdscope/event"
)

// Role is the traced member's Raft role for a write.
type Role string

// Roles.
const (
	RoleLeader   Role = "leader"
	RoleFollower Role = "follower"
)

// Part names, in critical-path order (the JSON keys of Write.PartsNs).
const (
	PartGRPC          = "grpc"
	PartForward       = "forward"
	PartPropose       = "propose"
	PartWALAppend     = "wal_append"
	PartQuorumWait    = "quorum_wait"
	PartCommitToApply = "commit_to_apply"
	PartApply         = "apply"
	PartReturn        = "return"
)

// PartOrder lists every part in critical-path order.
var PartOrder = []string{PartGRPC, PartForward, PartPropose, PartWALAppend, PartQuorumWait, PartCommitToApply, PartApply, PartReturn}

// LocalVote names the leader's own WAL append as the deciding vote.
const LocalVote uint64 = 0

// Ack is one follower's ack of a write on the leader.
type Ack struct {
	Member uint64 `json:"member"` // Raft member id
	// AfterSendNs is from the leader's Send of the entries to this ack's
	// arrival: the RTT to the follower plus its own WAL append (ns).
	AfterSendNs int64 `json:"after_send_ns"`
}

// Write is one traced write, split into parts (see the package doc).
type Write struct {
	ID      uint64 // etcd's request id
	Index   uint64 // Raft index of the write's entry (0 if unknown)
	Role    Role
	StartNs uint64 // CLOCK_MONOTONIC ns
	EndNs   uint64
	// PartsNs holds the parts that could be measured (ns); a part the
	// probes could not show is absent, not 0.
	PartsNs map[string]int64
	// WALSyncNs is the WAL sync inside the WAL append, etcd's
	// (*WAL).sync: the encoder's flush (write(2)) then the fdatasync
	// (etcd's etcd_disk_wal_fsync_duration_seconds times only the
	// latter); 0 when the Save needed none; -1 unknown.
	WALSyncNs int64
	// WALSyncWindow is that (*WAL).sync as the uprobes saw it (zero when
	// unknown), for the join with the fsync tracer's call (JoinSyncs).
	WALSyncWindow SyncWindow
	// BatchEntries: entries in the WAL Save that held this write (>1:
	// etcd batched writes; the WAL parts are the batch's).
	BatchEntries int
	// Decider is the quorum's deciding vote on the leader: LocalVote (the
	// leader's own WAL) or a follower's member id. DeciderKnown is false
	// on a follower, a one-member cluster counts LocalVote.
	Decider      uint64
	DeciderKnown bool
	// Acks are the followers' acks (leader only) that arrived before the
	// write was resolved (its return and its Save's), earliest first.
	Acks []Ack
	// Missing names what could not be joined (MissingWAL, MissingApply,
	// MissingQuorum; render.CommitMissing words each), empty when the
	// write is complete.
	Missing []Missing
	// Entry is this member's record of the write's Raft entry when the
	// write was delivered (nil: none kept).
	Entry *Entry
}

// Missing is a part of a write the joiner could not join, named by the
// part it leaves unknown; render.CommitMissing words it (the commit
// record's missing[] carries those words, docs/schema.md).
type Missing string

// What a write can miss.
const (
	// MissingWAL: no finished WAL Save holds the write's index.
	MissingWAL Missing = "wal"
	// MissingApply: no applyAll seen for the write's batch.
	MissingApply Missing = "apply"
	// MissingQuorum: fewer follower acks seen than the quorum needs.
	MissingQuorum Missing = "quorum"
)

// TotalNs is End-Start.
func (w *Write) TotalNs() int64 { return int64(w.EndNs - w.StartNs) }

// Config is what the joiner needs to know of the cluster.
type Config struct {
	// Role of the traced member (from the member list and the leader).
	Role Role
	// Voters is the number of voting members (from the member list); 0
	// means "infer": 1 + the followers whose acks are seen.
	Voters int
	// GraceNs is how long after a write's end the joiner waits for the
	// events that may come after it (the leader's Save can end after the
	// commit), in event time; 0 means 2 s.
	GraceNs uint64
}

// Limits on the joiner's memory: history kept per kind, writes pending.
const (
	maxSaves   = 4096
	maxAcks    = 8192 // per follower
	maxPending = 65536
	maxFollow  = 16
)

type save struct {
	first, last        uint64
	sendNs             uint64 // the Send before it in the same Ready (0: none)
	startNs, endNs     uint64
	syncStart, syncEnd uint64
	syncTIDs           [2]uint32 // threads at the sync's entry and return
}

type ackRec struct{ ts, index uint64 }

type applied struct {
	index, batchNs, triggerNs uint64
}

type pending struct {
	w    Write
	appl applied
	// proposeStart, proposeEnd: the write's own function, when the unary
	// RPC around it is traced (w's Start and End are then the RPC's).
	proposeStart, proposeEnd uint64
}

// Joiner joins assembled commit records (event.CommitWriteDone,
// CommitSaveDone, from the kernel or from an Assembler) and the
// followers' acks (CommitAppResp) into Writes. Feed it every record in
// ring order (Add); finished writes come out of Add and Flush. Not safe
// for concurrent use; memory is bounded.
type Joiner struct {
	cfg    Config
	done   []*pending          // ended, waiting for their Save/acks
	saves  []save              // recent Saves with entries, oldest first
	acks   map[uint64][]ackRec // follower -> recent acks
	lastNs uint64
	// Dropped counts writes forgotten because too many were waiting for
	// their Save (the Assembler's and the kernel's count the others).
	Dropped int
}

// NewJoiner returns a joiner for a member in cfg.
func NewJoiner(cfg Config) *Joiner {
	if cfg.GraceNs == 0 {
		cfg.GraceNs = 2e9
	}
	return &Joiner{cfg: cfg, acks: map[uint64][]ackRec{}}
}

// SetRole changes the traced member's role (after a leader change) for
// writes that end from now on.
func (j *Joiner) SetRole(r Role) { j.cfg.Role = r }

// Add feeds one record and returns the writes it finished (appended to
// out). Raw firings (event.CommitKind.Raw) must go through an Assembler
// first: Add ignores them.
func (j *Joiner) Add(ev *event.Commit, out []Write) []Write {
	if ev.TsNs > j.lastNs {
		j.lastNs = ev.TsNs
	}
	switch ev.Kind {
	case event.CommitWriteDone:
		if len(j.done) >= maxPending {
			j.Dropped++
			return out
		}
		r := &ev.Write
		p := &pending{w: Write{ID: r.ID, Index: r.Index, Role: j.cfg.Role, StartNs: r.StartNs, EndNs: r.EndNs, WALSyncNs: -1},
			appl: applied{index: r.Index, batchNs: r.BatchNs, triggerNs: r.TriggerNs}}
		if r.RPCEndNs != 0 {
			// The write ends with its RPC: the response is encoded and queued.
			p.proposeStart, p.proposeEnd = r.StartNs, r.EndNs
			p.w.StartNs, p.w.EndNs = r.RPCStartNs, r.RPCEndNs
		}
		j.done = append(j.done, p)
	case event.CommitSaveDone:
		r := &ev.Save
		if len(j.saves) >= maxSaves {
			j.saves = slices.Delete(j.saves, 0, maxSaves/4)
		}
		j.saves = append(j.saves, save{first: r.First, last: r.Last, sendNs: r.SendNs, startNs: r.StartNs, endNs: r.EndNs,
			syncStart: r.SyncStartNs, syncEnd: r.SyncEndNs, syncTIDs: r.SyncTIDs})
	case event.CommitAppResp:
		a, ok := j.acks[ev.A]
		if !ok && len(j.acks) >= maxFollow {
			return out
		}
		if len(a) >= maxAcks {
			a = slices.Delete(a, 0, maxAcks/4)
		}
		j.acks[ev.A] = append(a, ackRec{ts: ev.TsNs, index: ev.B})
	}
	return j.resolve(out, false)
}

// Flush finishes every ended write with what is known (at the end of a
// trace) and returns them.
func (j *Joiner) Flush(out []Write) []Write { return j.resolve(out, true) }

// resolve finishes the ended writes whose Save has returned (or whose
// grace has passed, or all with force), in the order they ended.
func (j *Joiner) resolve(out []Write, force bool) []Write {
	n := 0
	for _, p := range j.done {
		s := j.findSave(p.w.Index)
		ready := force || j.lastNs > p.w.EndNs+j.cfg.GraceNs || s != nil
		if !ready {
			j.done[n] = p
			n++
			continue
		}
		out = append(out, j.split(p, s))
	}
	clear(j.done[n:])
	j.done = j.done[:n]
	return out
}

func (j *Joiner) findSave(index uint64) *save {
	for i := len(j.saves) - 1; i >= 0; i-- {
		if s := &j.saves[i]; s.first <= index && index <= s.last {
			return s
		}
	}
	return nil
}

// split computes the parts of one write (see the package doc).
func (j *Joiner) split(p *pending, s *save) Write {
	w := p.w
	w.PartsNs = map[string]int64{}
	a := p.appl
	// start and end of the write's own function; the RPC around it, if
	// traced, is the grpc part.
	start, end := w.StartNs, w.EndNs
	if p.proposeEnd != 0 {
		start, end = p.proposeStart, p.proposeEnd
		w.PartsNs[PartGRPC] = int64(start-w.StartNs) + int64(w.EndNs-end)
	}
	if s == nil {
		w.Missing = append(w.Missing, MissingWAL)
		// What is still known: apply and return.
		if a.batchNs != 0 && a.batchNs >= w.StartNs {
			w.PartsNs[PartApply] = int64(a.triggerNs - a.batchNs)
		}
		w.PartsNs[PartReturn] = int64(end - a.triggerNs)
		return w
	}
	w.BatchEntries = int(s.last - s.first + 1)
	if s.syncEnd > s.syncStart && s.syncStart != 0 {
		w.WALSyncNs = int64(s.syncEnd - s.syncStart)
		w.WALSyncWindow = SyncWindow{StartNs: s.syncStart, EndNs: s.syncEnd, TIDs: s.syncTIDs}
	} else if s.syncStart == 0 {
		w.WALSyncNs = 0
	}
	batch := a.batchNs
	if batch == 0 || batch < s.startNs || batch > a.triggerNs {
		batch = 0
		w.Missing = append(w.Missing, MissingApply)
	}
	d := func(from, to uint64) int64 {
		if to < from {
			return 0
		}
		return int64(to - from)
	}
	if w.Role == RoleFollower {
		w.PartsNs[PartForward] = d(start, s.startNs)
		w.PartsNs[PartWALAppend] = d(s.startNs, s.endNs)
		applyStart := a.triggerNs
		if batch != 0 {
			applyStart = batch
		}
		w.PartsNs[PartQuorumWait] = d(s.endNs, applyStart)
		w.PartsNs[PartApply] = d(applyStart, a.triggerNs)
		w.PartsNs[PartReturn] = d(a.triggerNs, end)
		return w
	}
	// Leader: the entry is applied from a later Ready than the one whose
	// Save wrote it, and etcd's Raft loop takes the next Ready only after
	// that Save returned; so a write waits for its leader's WAL append
	// and for the (q-1)-th follower ack, whichever comes last (in v3.6
	// the leader's vote counts when its Save returns; in v3.5 at append,
	// before the Save, with the same result for the write).
	from := s.sendNs
	if from == 0 || from < start {
		from = s.startNs
	}
	var acks []uint64
	for m, recs := range j.acks {
		for _, r := range recs {
			if r.ts >= from && r.index >= w.Index {
				acks = append(acks, r.ts)
				w.Acks = append(w.Acks, Ack{Member: m, AfterSendNs: int64(r.ts - from)})
				break
			}
		}
	}
	// In time order, acks of one time by member: j.acks is a map.
	slices.SortFunc(w.Acks, func(x, y Ack) int {
		return cmp.Or(cmp.Compare(x.AfterSendNs, y.AfterSendNs), cmp.Compare(x.Member, y.Member))
	})
	slices.Sort(acks)
	voters := j.cfg.Voters
	if voters == 0 {
		voters = 1 + len(j.acks)
	}
	need := voters / 2 // follower acks a quorum needs besides the leader
	commit := s.endNs
	switch {
	case need == 0:
		w.Decider, w.DeciderKnown = LocalVote, true
	case need <= len(acks):
		w.Decider, w.DeciderKnown = LocalVote, true
		if acks[need-1] > s.endNs {
			commit = acks[need-1]
			w.Decider = w.Acks[need-1].Member
		}
	default:
		w.Missing = append(w.Missing, MissingQuorum)
	}
	applyStart := a.triggerNs
	if batch != 0 {
		applyStart = batch
	}
	if applyStart < commit { // clock order: the apply began, so the commit came first
		commit = applyStart
	}
	w.PartsNs[PartPropose] = d(start, s.startNs)
	w.PartsNs[PartWALAppend] = d(s.startNs, min(s.endNs, commit))
	w.PartsNs[PartQuorumWait] = d(s.endNs, commit)
	w.PartsNs[PartCommitToApply] = d(max(commit, s.startNs), applyStart)
	w.PartsNs[PartApply] = d(applyStart, a.triggerNs)
	w.PartsNs[PartReturn] = d(a.triggerNs, end)
	return w
}

// Silent returns the members of followers that sent no ack while traced
// (down or partitioned, seen from the leader), in the given order.
func (j *Joiner) Silent(followers []uint64) []uint64 {
	var out []uint64
	for _, f := range followers {
		if _, ok := j.acks[f]; !ok {
			out = append(out, f)
		}
	}
	return out
}
