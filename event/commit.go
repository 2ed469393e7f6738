package event

import "strconv"

// CommitKind says which of etcd's functions a Commit event was recorded
// at (enum commit_kind in bpf/commit.h). The names are those of etcd
// v3.6's server code.
type CommitKind uint8

// The probes on etcd's write path. ...Ret kinds fire at a RET instruction
// of the function (Go code cannot take return probes).
const (
	// CommitProposeEnter, CommitProposeRet: (*EtcdServer).processInternalRaftRequestOnce,
	// one write's server-side life, on the gRPC handler's goroutine.
	CommitProposeEnter CommitKind = 1
	CommitProposeRet   CommitKind = 2
	// CommitRegister: wait.(*list).Register(id), A = the request id, on
	// the write's goroutine.
	CommitRegister CommitKind = 3
	// CommitTrigger: wait.(*list).Trigger(id, result), A = the request
	// id: the write's result is handed back (its apply is done).
	CommitTrigger CommitKind = 4
	// CommitApplyEntry: (*EtcdServer).applyEntryNormal(e), A = e.Index.
	CommitApplyEntry CommitKind = 5
	// CommitApplyAll: (*EtcdServer).applyAll, a batch of committed
	// entries (one Raft Ready) starts applying.
	CommitApplyAll CommitKind = 6
	// CommitSaveEnter, CommitSaveRet: (*WAL).Save(st, ents), A, B = the
	// first and last entry's index (0, 0: no entries), C = the first
	// entry's term.
	CommitSaveEnter CommitKind = 7
	CommitSaveRet   CommitKind = 8
	// CommitSyncEnter, CommitSyncRet: (*WAL).sync, the WAL's fdatasync.
	CommitSyncEnter CommitKind = 9
	CommitSyncRet   CommitKind = 10
	// CommitSend: rafthttp.(*Transport).Send(msgs), A = len(msgs): the
	// leader sends a Ready's messages (before it saves the entries).
	CommitSend CommitKind = 11
	// CommitAppResp: (*EtcdServer).Process(ctx, m) with m.Type ==
	// MsgAppResp, A = m.From (the follower's member id), B = m.Index (its
	// last appended index): a follower's ack arrives.
	CommitAppResp CommitKind = 12
	// CommitRPCEnter, CommitRPCRet: grpc.(*Server).processUnaryRPC, one
	// unary RPC from its request to its response queued for sending, on
	// the goroutine that runs the handler.
	CommitRPCEnter CommitKind = 13
	CommitRPCRet   CommitKind = 14
	// CommitSched: not a uprobe: a scheduler state change of thread TID
	// inside (*WAL).sync (tracer's CommitConfig.Sched), A = its
	// SchedState (running, runnable, blocked); Goroutine is 0.
	CommitSched CommitKind = 15
	// CommitWriteDone: one write assembled from its probes (Write holds
	// it; TsNs is its end), by the kernel or by analysis/commit.Assembler.
	CommitWriteDone CommitKind = 16
	// CommitSaveDone: one WAL Save with entries assembled from Send,
	// Save and sync (Save holds it; TsNs is its end).
	CommitSaveDone CommitKind = 17
	// CommitSyncDone: one (*WAL).sync (Save.SyncStartNs, SyncEndNs; TsNs
	// is its end), whether or not a Save with entries held it.
	CommitSyncDone CommitKind = 18
	// CommitMsgApp: (*EtcdServer).Process(ctx, m) with m.Type == MsgApp
	// and entries: this member (a follower) receives entries from the
	// leader (Msg: From, the first entry's Term, First and Last). Not
	// assembled: a record of its own.
	CommitMsgApp CommitKind = 19
	// CommitSaveSent: assembled: the first Transport.Send on a Raft
	// goroutine after its WAL Save with entries returned (Msg: the Save's
	// Term, First, Last; TsNs the Send). On a follower that Send carries
	// the Ready's MsgAppResp (etcd's raft loop sends a follower's
	// messages after its Save); on the leader it is the next Ready's.
	CommitSaveSent CommitKind = 20
)

// Raw reports whether k is one probe's firing that an assembler turns
// into CommitWriteDone, CommitSaveDone and CommitSyncDone records (every
// uprobe kind but CommitAppResp, which stays a record of its own).
func (k CommitKind) Raw() bool {
	return k >= CommitProposeEnter && k <= CommitRPCRet && k != CommitAppResp
}

// Assembled reports whether records of kind k are assembled from raw
// firings (in the kernel, or by analysis/commit.Assembler from the raw
// stream).
func (k CommitKind) Assembled() bool {
	return k == CommitWriteDone || k == CommitSaveDone || k == CommitSyncDone || k == CommitSaveSent
}

// String returns a short name of the probe ("propose_enter", "save_ret", ...).
func (k CommitKind) String() string {
	switch k {
	case CommitProposeEnter:
		return "propose_enter"
	case CommitProposeRet:
		return "propose_ret"
	case CommitRegister:
		return "register"
	case CommitTrigger:
		return "trigger"
	case CommitApplyEntry:
		return "apply_entry"
	case CommitApplyAll:
		return "apply_all"
	case CommitSaveEnter:
		return "save_enter"
	case CommitSaveRet:
		return "save_ret"
	case CommitSyncEnter:
		return "sync_enter"
	case CommitSyncRet:
		return "sync_ret"
	case CommitSend:
		return "send"
	case CommitAppResp:
		return "app_resp"
	case CommitRPCEnter:
		return "rpc_enter"
	case CommitRPCRet:
		return "rpc_ret"
	case CommitSched:
		return "sched"
	case CommitWriteDone:
		return "write_done"
	case CommitSaveDone:
		return "save_done"
	case CommitSyncDone:
		return "sync_done"
	case CommitMsgApp:
		return "msg_app"
	case CommitSaveSent:
		return "save_sent"
	}
	return "kind" + strconv.Itoa(int(k))
}

// Commit is one firing of a probe on etcd's write path (bpf/commit.h
// struct commit_event; the meaning of A, B and C depends on Kind), or one
// record assembled from them: a write (Kind CommitWriteDone, in Write;
// bpf/commit.h struct commit_write), a WAL Save or sync (CommitSaveDone,
// CommitSyncDone, in Save; struct commit_save).
type Commit struct {
	Kind      CommitKind
	TsNs      uint64 // CLOCK_MONOTONIC ns at the probe (an assembled record's end)
	Goroutine uint64 // the g pointer: a stable key for one goroutine
	TID       uint32 // the OS thread it ran on
	A, B, C   uint64
	Write     CommitWrite
	Save      CommitSave
	Msg       CommitMsg
}

// CommitWrite is one write assembled from its probes (CommitWriteDone),
// ns on CLOCK_MONOTONIC.
type CommitWrite struct {
	ID         uint64 // etcd's request id (Register)
	Index      uint64 // its Raft index (the applyEntryNormal before its Trigger)
	RPCStartNs uint64 // the unary RPC's entry; 0: no RPC around the write
	StartNs    uint64 // processInternalRaftRequestOnce's entry
	EndNs      uint64 // its return
	RPCEndNs   uint64 // the unary RPC's return; 0: no RPC around the write
	BatchNs    uint64 // the last applyAll on the apply goroutine before the Trigger (0: none)
	TriggerNs  uint64 // wait.Trigger: its result handed back
}

// CommitSave is one WAL Save with entries (CommitSaveDone) or one
// (*WAL).sync (CommitSyncDone: SyncStartNs and SyncEndNs only), ns on
// CLOCK_MONOTONIC.
type CommitSave struct {
	First, Last            uint64    // the entries' first and last Raft index
	Term                   uint64    // the first entry's Raft term
	SendNs                 uint64    // the Transport.Send before it on the Raft goroutine (0: none)
	StartNs, EndNs         uint64    // Save's entry and return
	SyncStartNs, SyncEndNs uint64    // the (*WAL).sync inside it (0, 0: none)
	SyncTIDs               [2]uint32 // threads at the sync's entry and return
}

// CommitMsg is a MsgApp a follower received (CommitMsgApp) or the Send
// after a WAL Save with entries (CommitSaveSent): a range of Raft entries.
type CommitMsg struct {
	From        uint64 // CommitMsgApp: the sender (the leader's member id); 0 for CommitSaveSent
	Term        uint64 // the first entry's term
	First, Last uint64 // the entries' first and last index
}
