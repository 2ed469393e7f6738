package commit

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/etcdscope/etcdscope/event"
)

// MaxEntries is the window an EntryLog keeps by default: the last 4096
// Raft entries this member handled.
const MaxEntries = 4096

// MemberID is a Raft member id; in JSON a hex string, as etcd's peer
// metrics label it (To="28d1...").
type MemberID uint64

// MarshalText writes the id in hex.
func (m MemberID) MarshalText() ([]byte, error) {
	return strconv.AppendUint(nil, uint64(m), 16), nil
}

// UnmarshalText reads a hex id.
func (m *MemberID) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	*m = MemberID(v)
	return err
}

// EntryAck is a follower's MsgAppResp that covered an entry, as the
// leader saw it arrive (its Process), on the leader's clock.
type EntryAck struct {
	Member MemberID `json:"member"`
	AckNs  uint64   `json:"ack_ns"`
}

// Entry is one member's record of one Raft entry, keyed by (Term, Index),
// which every member shares; its times are this member's own
// CLOCK_MONOTONIC ns, so that only differences of one record's times
// mean anything across members. A field this member did not see is 0.
//
// Per entry exactly: which Save held it, the first MsgApp that carried it
// (a follower), each follower's first ack covering it (the leader). Per
// batch: the Save's times (every entry of one Ready's Save shares them)
// and a follower's answer (one Send after the Save acks them all).
type Entry struct {
	Term  uint64 `json:"term"`
	Index uint64 `json:"index"`
	// SaveFirst..SaveLast: the WAL Save that held the entry (its batch);
	// SaveStartNs, SaveEndNs its entry and return, SyncStartNs, SyncEndNs
	// the (*WAL).sync inside it (0: none).
	SaveFirst   uint64 `json:"save_first,omitempty"`
	SaveLast    uint64 `json:"save_last,omitempty"`
	SaveStartNs uint64 `json:"save_start_ns,omitempty"`
	SaveEndNs   uint64 `json:"save_end_ns,omitempty"`
	SyncStartNs uint64 `json:"sync_start_ns,omitempty"`
	SyncEndNs   uint64 `json:"sync_end_ns,omitempty"`
	// The leader: SendNs, its Transport.Send of the Ready that held the
	// entry (the MsgApps to every follower, before its own Save); Acks,
	// each follower's first MsgAppResp covering the entry after that.
	SendNs uint64     `json:"send_ns,omitempty"`
	Acks   []EntryAck `json:"acks,omitempty"`
	// A follower: From, the leader that sent the entry; RecvNs, its
	// Process of the first MsgApp that carried it (MsgFirst..MsgLast);
	// RespondNs, the Send after the Save (its MsgAppResp).
	From      MemberID `json:"from,omitempty"`
	RecvNs    uint64   `json:"recv_ns,omitempty"`
	MsgFirst  uint64   `json:"msg_first,omitempty"`
	MsgLast   uint64   `json:"msg_last,omitempty"`
	RespondNs uint64   `json:"respond_ns,omitempty"`
	// SyncCause: the (*WAL).sync of the entry's Save split by cause, its
	// fdatasync call as this member's fsync tracer split it (JoinSyncs;
	// the batch's entries share it); nil when this member's agent runs no
	// fsync tracer on etcd or has not seen the call (yet). Window v 2.
	SyncCause *SyncCause `json:"sync_cause,omitempty"`

	split bool // its FollowerSplit was handed out by EntryLog.Add
}

// Follower reports whether this member received the entry from a leader.
func (e *Entry) Follower() bool { return e.RecvNs != 0 }

// FollowerSplit is a follower's time from receiving an entry to answering
// for it, ns: Queue (the MsgApp's arrival to the Save's start: the Raft
// loop taking it into a Ready), WAL (the Save: write and fdatasync, of
// which Fdatasync) and Respond (the Save's end to the Send of the
// MsgAppResp: etcd's raft loop signals its apply first). Queue + WAL +
// Respond == Total. Cause, when the member's fsync tracer split the
// call, is Fdatasync by cause (its Ns sum to FdatasyncNs).
type FollowerSplit struct {
	TotalNs     int64      `json:"total_ns"`
	QueueNs     int64      `json:"queue_ns"`
	WALNs       int64      `json:"wal_ns"`
	FdatasyncNs int64      `json:"fdatasync_ns"`
	RespondNs   int64      `json:"respond_ns"`
	Cause       *SyncCause `json:"fdatasync_cause,omitempty"`
}

// Split returns the follower's split of e; false unless this member
// received, saved and answered it in that order.
func (e *Entry) Split() (FollowerSplit, bool) {
	if !e.Follower() || e.SaveStartNs < e.RecvNs || e.SaveEndNs < e.SaveStartNs || e.RespondNs < e.SaveEndNs {
		return FollowerSplit{}, false
	}
	s := FollowerSplit{TotalNs: int64(e.RespondNs - e.RecvNs), QueueNs: int64(e.SaveStartNs - e.RecvNs),
		WALNs: int64(e.SaveEndNs - e.SaveStartNs), RespondNs: int64(e.RespondNs - e.SaveEndNs)}
	if e.SyncEndNs > e.SyncStartNs {
		s.FdatasyncNs, s.Cause = int64(e.SyncEndNs-e.SyncStartNs), e.SyncCause
	}
	return s, true
}

// EntryLog keeps this member's Entry records of the last Max Raft entries
// (by index), built from the commit tracer's records: msg_app and
// save_sent (a follower), save_done (every member) and the followers'
// acks (the leader). It is safe for concurrent use; memory is bounded.
type EntryLog struct {
	mu      sync.Mutex
	member  uint64 // this member's id (0: unknown)
	names   Names  // member id -> name, from etcd's member list
	max     int
	hi      uint64            // the highest index seen
	entries map[uint64]*Entry // index -> record
	acks    map[uint64][]ackRec
	// replaced counts entries overwritten by another term at their index
	// (an uncommitted entry a new leader replaced).
	replaced int
	// The streaming join of each Save's (*WAL).sync with the fsync
	// tracer's split of its fdatasync (AddSyncCall): the Saves not yet
	// joined, and the recent calls and sync threads' states, each
	// bounded (maxPendingSyncs, maxSyncCalls, maxSyncScheds).
	pending []pendingSync
	calls   []SyncCall
	scheds  []event.Sched
}

// pendingSync is a Save whose (*WAL).sync waits for its fdatasync call.
type pendingSync struct {
	win         SyncWindow
	term        uint64
	first, last uint64
}

// Bounds of the streaming join: the Saves waiting for their call (a
// call the fsync tracer lost leaves its Save there until 256 newer ones
// push it out), the calls and the scheduler records kept (a few seconds
// of etcd's syscalls at a thousand writes a second).
const (
	maxPendingSyncs = 256
	maxSyncCalls    = 2048
	maxSyncScheds   = 8192
)

// Replaced returns how many records were overwritten by an entry of
// another term at their index (an uncommitted entry a new leader
// replaced).
func (l *EntryLog) Replaced() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replaced
}

// maxAckFollowers bounds the followers whose acks an EntryLog keeps.
const maxAckFollowers = 16

// NewEntryLog returns an empty log of the last max entries (0:
// MaxEntries).
func NewEntryLog(max int) *EntryLog {
	if max <= 0 {
		max = MaxEntries
	}
	return &EntryLog{max: max, entries: map[uint64]*Entry{}, acks: map[uint64][]ackRec{}}
}

// SetMember names the member whose records these are (its Raft id).
func (l *EntryLog) SetMember(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.member = id
}

// SetNames gives the members' names (etcd's member list) the window
// carries for a reader that joins several members' windows.
func (l *EntryLog) SetNames(names Names) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = maps.Clone(names)
}

// EntryWindowVersion is the version of the EntryWindow JSON: 2 added
// each entry's sync_cause (a v 1 window, without it, still joins).
// EntryWindowOldest is the oldest version a reader accepts.
const (
	EntryWindowVersion = 2
	EntryWindowOldest  = 1
)

// EntryWindow is a slice of one member's EntryLog as serve exposes it
// (GET /commit/entries?since_index=N&limit=M, JSON): Entries with an
// index above SinceIndex, lowest first; More when the limit cut it short.
type EntryWindow struct {
	V      int      `json:"v"`
	Member MemberID `json:"member"` // 0: unknown (serve without --etcd-endpoints)
	// Names: the members' names by id, from etcd's member list (empty
	// without --etcd-endpoints).
	Names      map[MemberID]string `json:"names,omitempty"`
	SinceIndex uint64              `json:"since_index"`
	Entries    []Entry             `json:"entries"`
	More       bool                `json:"more"`
}

// Window returns the records with an index above after, at most limit.
func (l *EntryLog) Window(after uint64, limit int) EntryWindow {
	es, more := l.Since(after, limit)
	l.mu.Lock()
	defer l.mu.Unlock()
	if es == nil {
		es = []Entry{}
	}
	w := EntryWindow{V: EntryWindowVersion, Member: MemberID(l.member), SinceIndex: after, Entries: es, More: more}
	for id, n := range l.names {
		if w.Names == nil {
			w.Names = map[MemberID]string{}
		}
		w.Names[MemberID(id)] = n
	}
	return w
}

// Add feeds one record of the commit tracer (other kinds are ignored) and
// appends to done the split of every entry this member, a follower, has
// now received, saved and answered (each once).
func (l *EntryLog) Add(ev *event.Commit, done []FollowerSplit) []FollowerSplit {
	l.mu.Lock()
	defer l.mu.Unlock()
	// complete hands out e's split once it has all three of its records,
	// in whatever order they were read.
	complete := func(e *Entry) {
		if !e.split && e.RespondNs != 0 {
			if s, ok := e.Split(); ok {
				e.split, done = true, append(done, s)
			}
		}
	}
	switch ev.Kind {
	case event.CommitMsgApp:
		m := &ev.Msg
		l.span(m.Term, m.First, m.Last, func(e *Entry) {
			if e.RecvNs == 0 {
				e.From, e.RecvNs, e.MsgFirst, e.MsgLast = MemberID(m.From), ev.TsNs, m.First, m.Last
				complete(e)
			}
		})
	case event.CommitSaveDone:
		s := &ev.Save
		l.span(s.Term, s.First, s.Last, func(e *Entry) {
			e.SaveFirst, e.SaveLast, e.SaveStartNs, e.SaveEndNs = s.First, s.Last, s.StartNs, s.EndNs
			e.SyncStartNs, e.SyncEndNs, e.SendNs = s.SyncStartNs, s.SyncEndNs, s.SendNs
			complete(e)
		})
		if s.SyncEndNs > s.SyncStartNs && s.First != 0 && s.Last >= s.First {
			p := pendingSync{win: SyncWindow{StartNs: s.SyncStartNs, EndNs: s.SyncEndNs, TIDs: s.SyncTIDs}, term: s.Term, first: s.First, last: s.Last}
			if !l.joinSync(&p) {
				if len(l.pending) >= maxPendingSyncs {
					l.pending = slices.Delete(l.pending, 0, maxPendingSyncs/4)
				}
				l.pending = append(l.pending, p)
			}
		}
	case event.CommitSaveSent:
		m := &ev.Msg
		l.span(m.Term, m.First, m.Last, func(e *Entry) {
			if e.RespondNs == 0 && e.SaveFirst == m.First && e.SaveLast == m.Last {
				e.RespondNs = ev.TsNs
				complete(e)
			}
		})
	case event.CommitAppResp:
		a, ok := l.acks[ev.A]
		if !ok && len(l.acks) >= maxAckFollowers {
			return done
		}
		if len(a) >= l.max {
			a = slices.Delete(a, 0, l.max/4)
		}
		l.acks[ev.A] = append(a, ackRec{ts: ev.TsNs, index: ev.B})
	}
	return done
}

// AddSyncCall feeds one call of the fsync tracer on this member's etcd
// (an fsync or fdatasync, or a write(2), as SyncCallOf and WriteCallOf
// make them): a Save's (*WAL).sync is joined with the fdatasync inside
// it, by JoinSyncs' rule, once both are here, in whatever order the two
// rings deliver them, and its entries' SyncCause set.
func (l *EntryLog) AddSyncCall(c SyncCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) >= maxSyncCalls {
		l.calls = slices.Delete(l.calls, 0, maxSyncCalls/4)
	}
	l.calls = append(l.calls, c)
	if c.Write {
		return // the fdatasync after it triggers the join
	}
	for k := 0; k < len(l.pending); k++ {
		p := &l.pending[k]
		if c.StartNs >= p.win.StartNs && c.EndNs <= p.win.EndNs && l.joinSync(p) {
			l.pending = slices.Delete(l.pending, k, k+1)
			k--
		}
	}
}

// AddSched feeds one scheduler state change of a thread inside
// (*WAL).sync (the commit tracer's event.CommitSched), for the stretches
// of a sync outside its syscalls.
func (l *EntryLog) AddSched(e event.Sched) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.scheds) >= maxSyncScheds {
		l.scheds = slices.Delete(l.scheds, 0, maxSyncScheds/4)
	}
	l.scheds = append(l.scheds, e)
}

// joinSync joins p's window with the calls and states kept and sets its
// entries' SyncCause; false when no fdatasync inside it is here yet.
// Caller holds l.mu.
func (l *EntryLog) joinSync(p *pendingSync) bool {
	var calls []SyncCall
	for i := range l.calls {
		if c := &l.calls[i]; c.StartNs >= p.win.StartNs && c.EndNs <= p.win.EndNs {
			calls = append(calls, *c)
		}
	}
	if len(calls) == 0 {
		return false
	}
	var scheds []event.Sched
	for _, e := range l.scheds {
		if e.Ns >= p.win.StartNs && e.Ns <= p.win.EndNs {
			scheds = append(scheds, e)
		}
	}
	sc := JoinSyncs([]SyncWindow{p.win}, calls, scheds)[0]
	if sc == nil {
		return false
	}
	for i := p.first; i <= p.last; i++ {
		if e, ok := l.entries[i]; ok && (e.Term == p.term || p.term == 0) && e.SyncStartNs == p.win.StartNs {
			e.SyncCause = sc
		}
	}
	return true
}

// span calls f on the record of every index first..last (term: the first
// entry's), created if new, within the window.
func (l *EntryLog) span(term, first, last uint64, f func(*Entry)) {
	if first == 0 || last < first {
		return
	}
	if last > l.hi {
		l.hi = last
	}
	lo := uint64(0)
	if l.hi > uint64(l.max) {
		lo = l.hi - uint64(l.max)
	}
	for i := max(first, lo+1); i <= last; i++ {
		e, ok := l.entries[i]
		if ok && term != 0 && e.Term != 0 && e.Term != term {
			ok = false
			l.replaced++
		}
		if !ok {
			e = &Entry{Term: term, Index: i}
			l.entries[i] = e
		}
		if e.Term == 0 {
			e.Term = term
		}
		f(e)
	}
	if len(l.entries) > l.max+l.max/4 {
		for i := range l.entries {
			if i <= lo {
				delete(l.entries, i)
			}
		}
	}
}

// Get returns the record of index i, with the leader's acks resolved
// (only a leader's record has SendNs and Acks, only a follower's
// RespondNs).
func (l *EntryLog) Get(i uint64) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[i]
	if !ok {
		return Entry{}, false
	}
	return l.resolved(e), true
}

// Since returns up to limit records with an index above after, lowest
// first; more reports whether more were left out.
func (l *EntryLog) Since(after uint64, limit int) (out []Entry, more bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var idx []uint64
	for i := range l.entries {
		if i > after {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	if len(idx) > limit {
		idx, more = idx[:limit], true
	}
	for _, i := range idx {
		out = append(out, l.resolved(l.entries[i]))
	}
	return out, more
}

// resolved is a copy of e as Get returns it. Caller holds l.mu.
func (l *EntryLog) resolved(e *Entry) Entry {
	r := *e
	if r.Follower() {
		r.SendNs = 0
		return r
	}
	r.RespondNs = 0
	if r.SendNs == 0 {
		return r
	}
	for id, as := range l.acks {
		k := sort.Search(len(as), func(k int) bool { return as[k].ts >= r.SendNs })
		for ; k < len(as); k++ {
			if as[k].index >= r.Index {
				r.Acks = append(r.Acks, EntryAck{Member: MemberID(id), AckNs: as[k].ts})
				break
			}
		}
	}
	slices.SortFunc(r.Acks, func(a, b EntryAck) int { return cmp.Compare(a.AckNs, b.AckNs) })
	return r
}
