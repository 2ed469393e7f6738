//go:build ignore

/* commit.bpf.c: one uprobe program for every probe on etcd's write path
 * (enum commit_kind in commit.h, passed as the attach cookie). It reads
 * the few arguments the kind needs from Go's register ABI and the current
 * goroutine's g, and assembles them in maps keyed as
 * analysis/commit.Assembler keys them (the handler goroutine, the request
 * id, the apply and Raft goroutines) into one record per write, per WAL
 * Save with entries and per (*WAL).sync; analysis/commit joins those into
 * writes. A write not sampled (1 in commit_sample_every is) is skipped
 * from its first probe on. Filtering by process is done at attach time
 * (the uprobe's pid). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "commit.h"
#include "ring.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the event type in the object for bpf2go -type. */
const struct commit_event *unused_commit_event __attribute__((unused));
const struct commit_write *unused_commit_write __attribute__((unused));
const struct commit_save *unused_commit_save __attribute__((unused));
const struct commit_msg *unused_commit_msg __attribute__((unused));

/* commit_events: struct commit_event records. Size is set from Go. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} commit_events SEC(".maps");

/* commit_wake_bytes: unread bytes in commit_events past which a record
 * wakes the reader (ring.h); set from Go to an eighth of the ring. */
const volatile __u64 commit_wake_bytes = 1 << 17;

/* commit_lost: per-CPU count of records that did not fit in
 * commit_events, or whose arguments could not be read. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} commit_lost SEC(".maps");

/* in_sync: thread id -> when its (*WAL).sync began (ns), from the
 * COMMIT_SYNC_ENTER probe on it to the COMMIT_SYNC_RET on it; the
 * scheduler programs below report its state changes meanwhile. A
 * goroutine that moved to another thread leaves its entry behind: it is
 * ignored after in_sync_max_ns, and replaced at that thread's next sync. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} in_sync SEC(".maps");

#define in_sync_max_ns 2000000000ULL

/* commit_raw: also send every probe's firing as a struct commit_event
 * (the reference stream the assembly is tested against). */
const volatile __u8 commit_raw = 0;
/* commit_sample_every: follow 1 write in N (per CPU, decided at the
 * write's entry); 0 and 1 follow every write. */
const volatile __u32 commit_sample_every = 1;
/* commit_profile: add each run's time to commit_counts.run_ns by kind. */
const volatile __u8 commit_profile = 0;
/* commit_entry_size: sizeof(raftpb.Entry) in the traced etcd, the stride
 * of a Save's and a MsgApp's entries: COMMIT_ENTRY_SIZE (v3.5, v3.6), 72
 * in v3.4 (its gogoproto structs end in XXX_unrecognized []byte). */
const volatile __u32 commit_entry_size = COMMIT_ENTRY_SIZE;
/* commit_save_ents_stack: (*WAL).Save(st, ents) is passed ents on the
 * stack (v3.4: its HardState is 6 words, so the receiver and st take 7
 * of the 9 integer registers and ents does not fit), not in the 5th and
 * 6th registers. */
const volatile __u8 commit_save_ents_stack = 0;

/* commit_counters: per-CPU struct commit_counts at key 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct commit_counts);
} commit_counters SEC(".maps");

/* commit_wstate: a write in progress on its handler goroutine. */
struct commit_wstate {
	__u64 start_ns, rpc_start_ns, id, index, batch_ns, trigger_ns, end_ns;
	__u32 flags; /* WS_* */
	__u32 pad;
};
#define WS_ID 1       /* Register seen: id is set */
#define WS_APPLIED 2  /* Trigger seen: index, batch_ns, trigger_ns set */
#define WS_RETURNED 4 /* the function returned: waiting for the RPC's return */
#define WS_SKIP 8     /* not sampled: its probes do nothing more */

/* commit_writes: handler goroutine (g) -> its write in progress, from the
 * function's entry to its return (or the RPC's around it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct commit_wstate);
} commit_writes SEC(".maps");

/* commit_rpcs: goroutine -> entry time of its unary RPC in progress (every
 * RPC: whether it is a write is known at the function's entry). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} commit_rpcs SEC(".maps");

/* commit_ids: request id -> the handler goroutine of the write that
 * registered it, from Register to the function's return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} commit_ids SEC(".maps");

/* commit_astate: an apply goroutine's last applyAll and applyEntryNormal. */
struct commit_astate {
	__u64 batch_ns, index, has_entry;
};

/* commit_applies: apply goroutine (g) -> its struct commit_astate. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct commit_astate);
} commit_applies SEC(".maps");

/* commit_rstate: a Raft goroutine's Send, Save and sync in progress. */
struct commit_rstate {
	__u64 send_ns;  /* last Send since its last Save's return */
	__u64 sync_ns;  /* (*WAL).sync in progress (0: none) */
	__u64 save;     /* SAVE_NONE, SAVE_STATE (no entries) or SAVE_ENTRIES */
	__u64 sent;     /* 1: s is a returned Save with entries whose next Send is COMMIT_SAVE_SENT */
	struct commit_save s;
};
#define SAVE_NONE 0
#define SAVE_STATE 1
#define SAVE_ENTRIES 2

/* commit_rafts: Raft goroutine (g) -> its struct commit_rstate. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct commit_rstate);
} commit_rafts SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&commit_lost, &zero);
	if (n)
		*n += 1;
}

/* Go's register ABI: integer arguments in order, the g pointer, and the
 * stack pointer (stack-assigned arguments start one word above it at a
 * function's entry, past the return address). */
#if defined(__TARGET_ARCH_x86)
#define GO_ARG1(r) ((r)->ax) /* the receiver */
#define GO_ARG2(r) ((r)->bx)
#define GO_ARG3(r) ((r)->cx)
#define GO_ARG4(r) ((r)->di)
#define GO_ARG5(r) ((r)->si)
#define GO_ARG6(r) ((r)->r8)
#define GO_G(r) ((r)->r14)
#define GO_SP(r) ((r)->sp)
#define GO_STACK_ARGS 8
#elif defined(__TARGET_ARCH_arm64)
/* arm64's pt_regs begins with user_pt_regs (not in the x86 vmlinux.h). */
struct go_arm64_regs {
	__u64 regs[31];
	__u64 sp;
};
#define GO_R(r, n) (((struct go_arm64_regs *)(r))->regs[n])
#define GO_ARG1(r) GO_R(r, 0)
#define GO_ARG2(r) GO_R(r, 1)
#define GO_ARG3(r) GO_R(r, 2)
#define GO_ARG4(r) GO_R(r, 3)
#define GO_ARG5(r) GO_R(r, 4)
#define GO_ARG6(r) GO_R(r, 5)
#define GO_G(r) GO_R(r, 28)
#define GO_SP(r) (((struct go_arm64_regs *)(r))->sp)
#define GO_STACK_ARGS 8
#endif

/* emit_raw sends one probe's firing as a struct commit_event. */
static __always_inline void emit_raw(__u64 ts, __u64 g, __u64 a, __u64 b, __u64 c, __u32 tid, __u8 kind)
{
	struct commit_event *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	e->ts_ns = ts;
	e->goroutine = g;
	e->a = a;
	e->b = b;
	e->c = c;
	e->tid = tid;
	e->kind = kind;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* emit_write sends write w of goroutine g, ended at end_ns (the RPC's
 * return when rpc_end). */
static __always_inline void emit_write(struct commit_wstate *w, __u64 g, __u64 end_ns, bool rpc_end, __u32 tid)
{
	struct commit_write *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	e->id = w->id;
	e->index = w->index;
	e->rpc_start_ns = rpc_end ? w->rpc_start_ns : 0;
	e->start_ns = w->start_ns;
	e->end_ns = rpc_end ? w->end_ns : end_ns;
	e->rpc_end_ns = rpc_end ? end_ns : 0;
	e->batch_ns = w->batch_ns;
	e->trigger_ns = w->trigger_ns;
	e->goroutine = g;
	e->tid = tid;
	e->kind = COMMIT_WRITE_DONE;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* emit_save sends s (a Save, or a sync: kind). */
static __always_inline void emit_save(struct commit_save *s, __u32 tid, __u8 kind)
{
	struct commit_save *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	__builtin_memcpy(e, s, sizeof(*e));
	e->tid = tid;
	e->kind = kind;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* emit_msg sends a struct commit_msg. */
static __always_inline void emit_msg(__u64 from, __u64 term, __u64 first, __u64 last, __u64 ts, __u32 tid, __u8 kind)
{
	struct commit_msg *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	e->from = from;
	e->term = term;
	e->first = first;
	e->last = last;
	e->ts_ns = ts;
	e->tid = tid;
	e->kind = kind;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* state_of returns goroutine g's value in map (a per-goroutine state),
 * created from zero (a zeroed value of the map's type) if absent. */
static __always_inline void *state_of(void *map, __u64 g, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, &g);

	if (v)
		return v;
	bpf_map_update_elem(map, &g, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &g);
}

/* raft_of and apply_of: goroutine g's Raft and apply states. */
static const struct commit_rstate rstate_zero;
static const struct commit_astate astate_zero;
#define raft_of(g) ((struct commit_rstate *)state_of(&commit_rafts, (g), &rstate_zero))
#define apply_of(g) ((struct commit_astate *)state_of(&commit_applies, (g), &astate_zero))

/* propose_enter starts goroutine g's write (analysis/commit.Assembler's
 * rules: a second entry within 1 ms of one with no id yet is the same
 * call restarted after its stack grew, and keeps its start and its
 * sampling). */
static __always_inline void propose_enter(struct commit_counts *cnt, __u64 ts, __u64 g)
{
	struct commit_wstate *old = bpf_map_lookup_elem(&commit_writes, &g);
	struct commit_wstate w = {};
	__u64 *rpc = bpf_map_lookup_elem(&commit_rpcs, &g);

	w.start_ns = ts;
	if (old && !(old->flags & (WS_ID | WS_RETURNED)) && old->start_ns + 1000000 > ts) {
		w.start_ns = old->start_ns;
		w.flags = old->flags & WS_SKIP;
	} else if (cnt) {
		__u64 n = cnt->writes_seen++;
		if (commit_sample_every > 1 && n % commit_sample_every != 0)
			w.flags = WS_SKIP;
		else
			cnt->writes_sampled++;
	}
	if (rpc)
		w.rpc_start_ns = *rpc;
	if (bpf_map_update_elem(&commit_writes, &g, &w, BPF_ANY) && cnt)
		cnt->writes_dropped++;
}

/* propose_ret ends goroutine g's write at ts: sent now, or at the return
 * of the RPC around it; not sent when it was not sampled, never
 * registered an id (an error before proposing: not a write) or was never
 * applied (failed or timed out: dropped). */
static __always_inline void propose_ret(struct commit_counts *cnt, __u64 ts, __u64 g, __u32 tid)
{
	struct commit_wstate *w = bpf_map_lookup_elem(&commit_writes, &g);

	if (!w)
		return;
	if ((w->flags & (WS_SKIP | WS_RETURNED)) || !(w->flags & WS_ID)) {
		if (!(w->flags & WS_RETURNED))
			bpf_map_delete_elem(&commit_writes, &g);
		return;
	}
	bpf_map_delete_elem(&commit_ids, &w->id);
	if (!(w->flags & WS_APPLIED)) {
		if (cnt)
			cnt->writes_dropped++;
		bpf_map_delete_elem(&commit_writes, &g);
		return;
	}
	if (w->rpc_start_ns != 0 && w->rpc_start_ns <= w->start_ns) {
		w->end_ns = ts;
		w->flags |= WS_RETURNED;
		return;
	}
	emit_write(w, g, ts, false, tid);
	bpf_map_delete_elem(&commit_writes, &g);
}

/* trigger applies the write of request id at ts, on apply goroutine g. */
static __always_inline void trigger(__u64 ts, __u64 g, __u64 id)
{
	__u64 *wg = bpf_map_lookup_elem(&commit_ids, &id);
	struct commit_wstate *w;
	struct commit_astate *ap;

	if (!wg)
		return;
	w = bpf_map_lookup_elem(&commit_writes, wg);
	if (!w || w->id != id || (w->flags & (WS_APPLIED | WS_SKIP)) || !(w->flags & WS_ID))
		return;
	ap = bpf_map_lookup_elem(&commit_applies, &g);
	if (!ap || !ap->has_entry) /* a Trigger outside applyEntryNormal */
		return;
	w->index = ap->index;
	w->batch_ns = ap->batch_ns;
	w->trigger_ns = ts;
	w->flags |= WS_APPLIED;
}

/* assemble adds one probe's firing to the maps, sending what it ends. */
static __always_inline void assemble(struct commit_counts *cnt, __u8 kind, __u64 ts, __u64 g, __u32 tid, __u64 a, __u64 b, __u64 c)
{
	switch (kind) {
	case COMMIT_RPC_ENTER:
		bpf_map_update_elem(&commit_rpcs, &g, &ts, BPF_ANY);
		break;
	case COMMIT_RPC_RET: {
		struct commit_wstate *w = bpf_map_lookup_elem(&commit_writes, &g);
		bpf_map_delete_elem(&commit_rpcs, &g);
		if (w && (w->flags & WS_RETURNED)) {
			emit_write(w, g, ts, true, tid);
			bpf_map_delete_elem(&commit_writes, &g);
		}
		break;
	}
	case COMMIT_PROPOSE_ENTER:
		propose_enter(cnt, ts, g);
		break;
	case COMMIT_REGISTER: {
		struct commit_wstate *w = bpf_map_lookup_elem(&commit_writes, &g);
		if (!w || (w->flags & (WS_ID | WS_RETURNED | WS_SKIP)))
			break;
		w->id = a;
		w->flags |= WS_ID;
		if (bpf_map_update_elem(&commit_ids, &a, &g, BPF_ANY) && cnt)
			cnt->writes_dropped++;
		break;
	}
	case COMMIT_PROPOSE_RET:
		propose_ret(cnt, ts, g, tid);
		break;
	case COMMIT_APPLY_ALL: {
		struct commit_astate *ap = apply_of(g);
		if (ap)
			ap->batch_ns = ts;
		break;
	}
	case COMMIT_APPLY_ENTRY: {
		struct commit_astate *ap = apply_of(g);
		if (ap) {
			ap->index = a;
			ap->has_entry = 1;
		}
		break;
	}
	case COMMIT_TRIGGER:
		trigger(ts, g, a);
		break;
	case COMMIT_SEND: {
		struct commit_rstate *r = raft_of(g);
		if (!r)
			break;
		r->send_ns = ts;
		if (r->sent) {
			emit_msg(0, r->s.term, r->s.first, r->s.last, ts, tid, COMMIT_SAVE_SENT);
			r->sent = 0;
		}
		break;
	}
	case COMMIT_SAVE_ENTER: {
		struct commit_rstate *r = raft_of(g);
		if (!r)
			break;
		r->sent = 0;
		if (b == 0) { /* a HardState-only Save: not a write's */
			r->save = SAVE_STATE;
			break;
		}
		r->save = SAVE_ENTRIES;
		__builtin_memset(&r->s, 0, sizeof(r->s));
		r->s.first = a;
		r->s.last = b;
		r->s.term = c;
		r->s.send_ns = r->send_ns;
		r->s.start_ns = ts;
		break;
	}
	case COMMIT_SYNC_ENTER: {
		struct commit_rstate *r = raft_of(g);
		if (!r)
			break;
		r->sync_ns = ts;
		if (r->save == SAVE_ENTRIES) {
			r->s.sync_start_ns = ts;
			r->s.sync_tids[0] = tid;
		}
		break;
	}
	case COMMIT_SYNC_RET: {
		struct commit_rstate *r = bpf_map_lookup_elem(&commit_rafts, &g);
		if (!r)
			break;
		if (r->sync_ns) {
			struct commit_save s = {};
			s.sync_start_ns = r->sync_ns;
			s.sync_end_ns = ts;
			emit_save(&s, tid, COMMIT_SYNC_DONE);
			r->sync_ns = 0;
		}
		if (r->save == SAVE_ENTRIES) {
			r->s.sync_end_ns = ts;
			r->s.sync_tids[1] = tid;
		}
		break;
	}
	case COMMIT_SAVE_RET: {
		struct commit_rstate *r = bpf_map_lookup_elem(&commit_rafts, &g);
		if (!r || r->save == SAVE_NONE)
			break;
		if (r->save == SAVE_ENTRIES) {
			r->s.end_ns = ts;
			emit_save(&r->s, tid, COMMIT_SAVE_DONE);
			r->sent = 1;
		}
		r->save = SAVE_NONE;
		r->send_ns = 0;
		break;
	}
	}
}

/* msg_app sends the MsgApp at m (a follower receiving entries) as a
 * COMMIT_MSG_APP record; one without entries (a probe or an empty
 * append) is not sent. */
static __always_inline void msg_app(__u64 m, __u64 ts, __u32 tid)
{
	__u64 from = 0, ents = 0, n = 0, term = 0, first = 0, last = 0;

	if (bpf_probe_read_user(&from, sizeof(from), (void *)(m + COMMIT_MSG_FROM)) ||
	    bpf_probe_read_user(&ents, sizeof(ents), (void *)(m + COMMIT_MSG_ENTRIES)) ||
	    bpf_probe_read_user(&n, sizeof(n), (void *)(m + COMMIT_MSG_ENTRIES + 8))) {
		count_lost();
		return;
	}
	if (n == 0 || n >= (1 << 24))
		return;
	if (bpf_probe_read_user(&term, sizeof(term), (void *)(ents + COMMIT_ENTRY_TERM)) ||
	    bpf_probe_read_user(&first, sizeof(first), (void *)(ents + COMMIT_ENTRY_INDEX)) ||
	    bpf_probe_read_user(&last, sizeof(last), (void *)(ents + (n - 1) * commit_entry_size + COMMIT_ENTRY_INDEX))) {
		count_lost();
		return;
	}
	emit_msg(from, term, first, last, ts, tid, COMMIT_MSG_APP);
}

SEC("uprobe")
int commit_probe(struct pt_regs *ctx)
{
	__u64 ts = bpf_ktime_get_ns();
	__u8 kind = (__u8)bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u64 g = GO_G(ctx);
	__u64 a = 0, b = 0, c = 0;
	__u32 zero = 0, tid = (__u32)id;
	struct commit_counts *cnt = bpf_map_lookup_elem(&commit_counters, &zero);

	if (cnt)
		cnt->fired[kind & (COMMIT_KINDS - 1)]++;
	switch (kind) {
	case COMMIT_REGISTER:
	case COMMIT_TRIGGER:
		a = GO_ARG2(ctx); /* id: the argument after the receiver */
		break;
	case COMMIT_APPLY_ENTRY: {
		__u64 ent = GO_ARG2(ctx); /* e *raftpb.Entry */
		if (bpf_probe_read_user(&a, sizeof(a), (void *)(ent + COMMIT_ENTRY_INDEX)))
			count_lost();
		break;
	}
	case COMMIT_SAVE_ENTER: {
		/* Save(st HardState{Term, Vote, Commit}, ents []Entry): st in
		 * the 2nd..4th registers, ents' pointer and length in the
		 * 5th and 6th; in v3.4 (commit_save_ents_stack) ents is the
		 * first stack argument. */
		__u64 ents = GO_ARG5(ctx), n = GO_ARG6(ctx);
		if (commit_save_ents_stack) {
			__u64 sp = GO_SP(ctx) + GO_STACK_ARGS;
			if (bpf_probe_read_user(&ents, sizeof(ents), (void *)sp) ||
			    bpf_probe_read_user(&n, sizeof(n), (void *)(sp + 8))) {
				count_lost();
				n = 0;
			}
		}
		if (n > 0 && n < (1 << 24)) {
			if (bpf_probe_read_user(&a, sizeof(a), (void *)(ents + COMMIT_ENTRY_INDEX)) ||
			    bpf_probe_read_user(&c, sizeof(c), (void *)(ents + COMMIT_ENTRY_TERM)) ||
			    bpf_probe_read_user(&b, sizeof(b), (void *)(ents + (n - 1) * commit_entry_size + COMMIT_ENTRY_INDEX)))
				count_lost();
		}
		break;
	}
	case COMMIT_SEND:
		a = GO_ARG3(ctx); /* Send(msgs []Message): msgs' length */
		break;
	case COMMIT_APP_RESP: {
		/* Process(ctx context.Context, m raftpb.Message): m does not
		 * fit in registers, so the whole of it is on the stack. */
		__u64 m = GO_SP(ctx) + GO_STACK_ARGS;
		__s32 type = -1;
		if (bpf_probe_read_user(&type, sizeof(type), (void *)(m + COMMIT_MSG_TYPE)))
			count_lost();
		if (type == COMMIT_MSGTYPE_APP) {
			msg_app(m, ts, tid);
			goto out;
		}
		if (type != COMMIT_MSG_APP_RESP)
			goto out;
		if (bpf_probe_read_user(&a, sizeof(a), (void *)(m + COMMIT_MSG_FROM)) ||
		    bpf_probe_read_user(&b, sizeof(b), (void *)(m + COMMIT_MSG_INDEX)))
			count_lost();
		/* A follower's ack is sent as it is, assembled or not. */
		emit_raw(ts, g, a, b, c, tid, kind);
		goto out;
	}
	}
	if (kind == COMMIT_SYNC_ENTER) {
		bpf_map_update_elem(&in_sync, &tid, &ts, BPF_ANY);
	} else if (kind == COMMIT_SYNC_RET) {
		bpf_map_delete_elem(&in_sync, &tid);
	}
	if (commit_raw)
		emit_raw(ts, g, a, b, c, tid, kind);
	assemble(cnt, kind, ts, g, tid, a, b, c);
out:
	if (commit_profile && cnt)
		cnt->run_ns[kind & (COMMIT_KINDS - 1)] += bpf_ktime_get_ns() - ts;
	return 0;
}

/* syncing says whether thread tid is inside (*WAL).sync (in_sync, not
 * stale at now); for every other thread on the machine the hash lookup
 * is all the scheduler programs do. */
static __always_inline bool syncing(__u32 tid, __u64 now)
{
	__u64 *since = bpf_map_lookup_elem(&in_sync, &tid);

	return since && now - *since < in_sync_max_ns;
}

static __always_inline void note_sched(__u32 tid, __u64 now, __u8 state)
{
	struct commit_event *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = now;
	e->a = state;
	e->tid = tid;
	e->kind = COMMIT_SCHED;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* commit_sched_switch: a thread inside (*WAL).sync switched out (preempted
 * or still TASK_RUNNING: runnable, which is also how a cgroup's CPU
 * throttling shows; else blocked) or in. prev_state is the tracepoint's
 * fourth argument (Linux 5.18+, as bpf/sched.bpf.c). */
SEC("tp_btf/sched_switch")
int commit_sched_switch(unsigned long long *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	__u32 ptid = BPF_CORE_READ(prev, pid), ntid = BPF_CORE_READ(next, pid);
	unsigned int prev_state = (unsigned int)ctx[3];
	__u64 now = bpf_ktime_get_ns();

	if (syncing(ptid, now))
		note_sched(ptid, now, preempt || prev_state == 0 ? COMMIT_SCHED_RUNNABLE : COMMIT_SCHED_BLOCKED);
	if (syncing(ntid, now))
		note_sched(ntid, now, COMMIT_SCHED_RUNNING);
	return 0;
}

/* commit_sched_wakeup: a thread inside (*WAL).sync was woken from a
 * sleep. A wake-up of a thread still on its CPU (woken before it slept)
 * changes nothing and is not reported, so that every COMMIT_SCHED
 * RUNNABLE is a wait for a CPU: Go reads no context into them. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(commit_sched_wakeup, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 now = bpf_ktime_get_ns();

	if (BPF_CORE_READ(p, on_cpu))
		return 0;
	if (syncing(tid, now))
		note_sched(tid, now, COMMIT_SCHED_RUNNABLE);
	return 0;
}
