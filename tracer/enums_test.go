package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/etcdscope/etcdscope/event"
)

// enumOf returns the C enum name as the committed object's BTF has it.
func enumOf(t *testing.T, load func() (*ebpf.CollectionSpec, error), name string) *btf.Enum {
	t.Helper()
	spec, err := load()
	if err != nil {
		t.Fatal(err)
	}
	var e *btf.Enum
	if err := spec.Types.TypeByName(name, &e); err != nil {
		t.Fatalf("enum %s in the object: %v", name, err)
	}
	return e
}

// TestEnumsMatchC pins every Go constant that mirrors a C enum of bpf/*.h
// to the enum as compiled into the committed objects (their BTF): each C
// value must have its Go twin with the same number, and each Go twin a C
// value. Adding, renumbering or renaming a value in C fails here until Go
// follows (after `make generate`).
func TestEnumsMatchC(t *testing.T) {
	for _, c := range []struct {
		load func() (*ebpf.CollectionSpec, error)
		enum string
		goes map[string]uint64 // C name → Go value
	}{
		{loadFsync, "es_syscall", map[string]uint64{
			"ES_SYS_FSYNC": uint64(event.SysFsync), "ES_SYS_FDATASYNC": uint64(event.SysFdatasync), "ES_SYS_KTHREAD": uint64(event.SysKthread),
			"ES_SYS_WRITE": uint64(event.SysWrite), "ES_SYS_PWRITE64": uint64(event.SysPwrite64), "ES_SYS_WRITEV": uint64(event.SysWritev),
			"ES_SYS_PWRITEV": uint64(event.SysPwritev), "ES_SYS_PWRITEV2": uint64(event.SysPwritev2),
		}},
		{loadFsync, "kpart_reason", map[string]uint64{
			"KPART_OK": uint64(event.KPartOK), "KPART_NO_DISK": uint64(event.KPartNoDisk), "KPART_STACKED": uint64(event.KPartStacked),
			"KPART_NO_SLOT": uint64(event.KPartNoSlot), "KPART_OVERFLOW": uint64(event.KPartOverflow),
			"KPART_LOST": uint64(event.KPartLost),
		}},
		{loadFsync, "kp_entry_type", map[string]uint64{
			"KP_E_REQ": uint64(event.KPEntryRequest), "KP_E_FBIO": uint64(event.KPEntryFlushBio), "KP_E_JWIN": uint64(event.KPEntryJournalCommit),
		}},
		{loadFsync, "kp_cat", map[string]uint64{
			"KP_CAT_FLUSH": uint64(event.KPCatFlush), "KP_CAT_QUEUE": uint64(event.KPCatQueue), "KP_CAT_DATA": uint64(event.KPCatData),
			"KP_CAT_JOURNAL": uint64(event.KPCatJournal), "KP_CAT_JWIN": uint64(event.KPCatJournalWindow), "KP_CAT_OTHER": uint64(event.KPCatOther),
		}},
		{loadSched, "es_sched_state", map[string]uint64{
			"ES_SCHED_RUNNING": uint64(event.SchedRunning), "ES_SCHED_RUNNABLE": uint64(event.SchedRunnable), "ES_SCHED_BLOCKED": uint64(event.SchedBlocked),
		}},
		{loadBlock, "es_op", map[string]uint64{
			"ES_OP_OTHER": uint64(event.OpOther), "ES_OP_READ": uint64(event.OpRead), "ES_OP_WRITE": uint64(event.OpWrite),
			"ES_OP_FLUSH": uint64(event.OpFlush), "ES_OP_DISCARD": uint64(event.OpDiscard),
			"ES_OP_SECURE_ERASE": uint64(event.OpSecureErase), "ES_OP_WRITE_ZEROES": uint64(event.OpWriteZeroes),
		}},
		{loadBlock, "es_req_flag", map[string]uint64{
			"ES_REQ_SYNC": uint64(event.ReqSync), "ES_REQ_META": uint64(event.ReqMeta), "ES_REQ_PRIO": uint64(event.ReqPrio),
			"ES_REQ_NOMERGE": uint64(event.ReqNoMerge), "ES_REQ_IDLE": uint64(event.ReqIdle), "ES_REQ_FUA": uint64(event.ReqFUA),
			"ES_REQ_PREFLUSH": uint64(event.ReqPreflush), "ES_REQ_RAHEAD": uint64(event.ReqRahead),
			"ES_REQ_BACKGROUND": uint64(event.ReqBackground), "ES_REQ_NOWAIT": uint64(event.ReqNoWait),
		}},
		{loadJournal, "es_journal_source", map[string]uint64{
			"ES_JOURNAL_JBD2_COMMIT": uint64(event.JournalJBD2Commit), "ES_JOURNAL_XFS_LOG_FORCE": uint64(event.JournalXFSLogForce),
			"ES_JOURNAL_JBD2_WAIT": uint64(event.JournalJBD2Wait),
		}},
		{loadHypervisor, "hv_op", map[string]uint64{
			"HV_OP_PREAD64": uint64(event.HVPread64), "HV_OP_PWRITE64": uint64(event.HVPwrite64),
			"HV_OP_PREADV": uint64(event.HVPreadv), "HV_OP_PWRITEV": uint64(event.HVPwritev),
			"HV_OP_PREADV2": uint64(event.HVPreadv2), "HV_OP_PWRITEV2": uint64(event.HVPwritev2),
			"HV_OP_IO_SUBMIT": uint64(event.HVIOSubmit), "HV_OP_IO_URING_ENTER": uint64(event.HVIOUringEnter),
			"HV_OP_IO_URING_REQ": uint64(event.HVIOUringReq),
		}},
		{loadHypervisor, "hv_file_flag", map[string]uint64{
			"HV_F_DIRECT": uint64(event.HVODirect), "HV_F_DSYNC": uint64(event.HVODsync), "HV_F_SYNC": uint64(event.HVOSync),
		}},
		{loadPeers, "peer_event_kind", map[string]uint64{
			"PEER_EV_OPEN": uint64(event.PeerOpen), "PEER_EV_CLOSE_START": uint64(event.PeerCloseStart),
			"PEER_EV_CLOSE": uint64(event.PeerClose), "PEER_EV_RTT": uint64(event.PeerRTT),
			"PEER_EV_RETRANSMIT": uint64(event.PeerRetransmit),
			"PEER_EV_SETUP":      uint64(event.PeerSetup),
		}},
	} {
		e := enumOf(t, c.load, c.enum)
		seen := map[string]bool{}
		for _, v := range e.Values {
			seen[v.Name] = true
			g, ok := c.goes[v.Name]
			if !ok {
				t.Errorf("enum %s: %s = %d has no Go twin in package event", c.enum, v.Name, v.Value)
			} else if g != v.Value {
				t.Errorf("enum %s: %s is %d in C, %d in Go", c.enum, v.Name, v.Value, g)
			}
		}
		for name := range c.goes {
			if !seen[name] {
				t.Errorf("enum %s: Go mirrors %s, which C no longer has", c.enum, name)
			}
		}
	}
}

// TestRecordKindsDecode: every value of enum es_kind, the first byte of a
// record on the fsync tracer's ring, is one the decoder knows (a kind
// added in C without a Go case fails here), and decodes into the event
// kind it names.
func TestRecordKindsDecode(t *testing.T) {
	want := map[string]event.Kind{
		"ES_KIND_FSYNC": event.KindFsync, "ES_KIND_FSYNC_ENTER": event.KindFsyncEnter,
		"ES_KIND_BLK": event.KindBlock, "ES_KIND_JOURNAL": event.KindJournal, "ES_KIND_FLUSH_BIO": event.KindFlushBio,
		"ES_KIND_WRITE": event.KindWrite, "ES_KIND_SCHED": event.KindSched,
		"ES_KIND_DM_BIO": event.KindDMBio, "ES_KIND_BIO_REMAP": event.KindBioRemap,
		"ES_KIND_KPART":       event.KindKPart,
		"ES_KIND_FSYNC_KPART": event.KindFsyncKPart,
	}
	e := enumOf(t, loadFsync, "es_kind")
	if len(e.Values) != len(want) {
		t.Errorf("enum es_kind has %d values, the test knows %d", len(e.Values), len(want))
	}
	raw := make([]byte, 4096) // larger than any record (the write record outgrew the fsync one)
	var d decoder
	for _, v := range e.Values {
		clear(raw)
		raw[0] = byte(v.Value)
		var ev event.Any
		if err := d.record(&ev, raw); err != nil {
			t.Errorf("%s (%d): %v", v.Name, v.Value, err)
			continue
		}
		if ev.Kind != want[v.Name] {
			t.Errorf("%s decoded as kind %d, want %d", v.Name, ev.Kind, want[v.Name])
		}
	}
	if err := d.record(&event.Any{}, []byte{0xff}); err == nil {
		t.Error("a record of unknown kind decoded")
	}
	if err := d.record(&event.Any{}, []byte{byte(fsyncEsKindES_KIND_FSYNC), 0}); err == nil {
		t.Error("a 2-byte fsync record decoded")
	}
}
