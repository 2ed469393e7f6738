package analysis

import (
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// AppendJSON appends r to dst as exactly the bytes encoding/json's
// Marshal (and Encoder.Encode, HTML escaping on, without its newline)
// writes for it: the same field order, omitempty rules and string
// escapes, so ReadJSONL and docs/schema.md hold unchanged. It is the
// per-fsync encoder of `etcdscope fsync --output json`: reflection cost
// ~2.5 µs a record, this ~0.3 µs and no allocation once dst has room
// (BenchmarkFsyncRecordAppendJSON; TestAppendJSONMatchesEncodingJSON keeps
// the two identical).
func (r *FsyncRecord) AppendJSON(dst []byte) []byte {
	dst = r.appendJSONHead(dst)
	dst = r.appendJSONIdentity(dst)
	return r.appendJSONTail(dst, nil)
}

// FsyncEncoder is AppendJSON for a stream of records: the same bytes, but
// the part from "comm" to "file_kind" (process, file, device: 12 fields,
// the same for call after call of one WAL file) is copied from an earlier
// record's when those fields are equal, not encoded again. It keeps two
// such encodings, the last two different ones used, so that two files
// synced in turn (a WAL and its directory, two writers) both stay cached;
// pid and tid are encoded every time, since a Go program's syncing
// goroutine moves between threads. The zero value is ready; not for
// concurrent use.
//
// It also keeps the encodings of the last hostSlots host-level records
// (Request.Host: the loop driver's fsyncs of a backing file) and copies
// one again when a later record nests the same host record: with several
// writers on a loop device, one flush (and so its host fsync, ~1.7 KiB of
// JSON) serves the calls of all of them, and each call's line repeats it
// (findings 29: each host record 4 times, ~85% of a line's bytes).
type FsyncEncoder struct {
	slots [2]fileIdent
	next  int // the slot a miss replaces: the one used least recently

	hosts    [hostSlots]hostIdent
	hostNext int // the host slot a miss replaces (round robin)
}

// hostSlots bounds the host records whose encodings FsyncEncoder keeps:
// a host record recurs in the lines of the calls its flush served, which
// follow each other closely.
const hostSlots = 16

// hostIdent is one cached encoding of a host-level record.
type hostIdent struct {
	// rec is the record encoded, a shallow copy: a later record is the
	// same one when every field is equal and its slices and pointers
	// share rec's (sameShallow). The Attributor nests shallow copies of
	// the one record it keeps per host fsync, and nothing writes to what
	// they share, so equal fields and shared arrays mean equal bytes.
	// Holding rec keeps its arrays alive, so no other record can reuse
	// their addresses while it is cached.
	rec FsyncRecord
	enc []byte
	ok  bool
}

// sameShallow reports whether a and b have equal fields, comparing
// slices and pointers by identity (the same array and length, the same
// pointee).
func sameShallow(a, b *FsyncRecord) bool {
	return a.Type == b.Type && a.Version == b.Version && a.StartNs == b.StartNs && a.EndNs == b.EndNs &&
		a.TotalNs == b.TotalNs && a.PID == b.PID && a.TID == b.TID && a.Comm == b.Comm &&
		a.Syscall == b.Syscall && a.Datasync == b.Datasync && a.Ret == b.Ret && a.FD == b.FD &&
		a.Dev == b.Dev && a.DevName == b.DevName && sameArray(a.Disks, b.Disks) && a.FS == b.FS &&
		a.Ino == b.Ino && a.Path == b.Path && a.FileKind == b.FileKind && a.Layers == b.Layers &&
		a.Flushes == b.Flushes && a.FUAWrites == b.FUAWrites && sameArray(a.Requests, b.Requests) &&
		sameArray(a.Journal, b.Journal) && a.Sched == b.Sched && a.DM == b.DM
}

// sameArray reports whether a and b are the same slice of the same array
// (both nil, or both empty: equal, whatever their arrays).
func sameArray[T any](a, b []T) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	return len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b)
}

// appendHost appends host record h as AppendJSON does, from the cache
// when it holds h (e nil: no cache). Only records with requests are
// cached: a record's own requests array is what tells it from another
// (empty slices share one address).
func (e *FsyncEncoder) appendHost(dst []byte, h *FsyncRecord) []byte {
	if e == nil || len(h.Requests) == 0 {
		return h.AppendJSON(dst)
	}
	for i := range e.hosts {
		c := &e.hosts[i]
		if c.ok && sameShallow(&c.rec, h) {
			return append(dst, c.enc...)
		}
	}
	c := &e.hosts[e.hostNext]
	e.hostNext = (e.hostNext + 1) % hostSlots
	c.rec, c.ok = *h, true
	c.enc = h.AppendJSON(c.enc[:0])
	return append(dst, c.enc...)
}

// fileIdent is one cached encoding of appendJSONFile's fields.
type fileIdent struct {
	last  FsyncRecord // only the fields sameFile compares are set
	ident []byte      // their encoding
	ok    bool
}

// Append appends r as AppendJSON does.
func (e *FsyncEncoder) Append(dst []byte, r *FsyncRecord) []byte {
	dst = r.appendJSONHead(dst)
	dst = r.appendJSONTask(dst)
	i := 0
	if !e.slots[0].ok || !sameFile(&e.slots[0].last, r) {
		i = 1
		if !e.slots[1].ok || !sameFile(&e.slots[1].last, r) {
			i = e.next
			s := &e.slots[i]
			s.ident = r.appendJSONFile(s.ident[:0])
			s.last = FsyncRecord{Comm: r.Comm, Syscall: r.Syscall, Datasync: r.Datasync, Ret: r.Ret, FD: r.FD,
				Dev: r.Dev, DevName: r.DevName, Disks: append(s.last.Disks[:0], r.Disks...), FS: r.FS, Ino: r.Ino, Path: r.Path, FileKind: r.FileKind}
			s.ok = true
		}
	}
	e.next = 1 - i
	dst = append(dst, e.slots[i].ident...)
	return r.appendJSONTail(dst, e)
}

// sameFile reports whether a and b agree on every field appendJSONFile
// writes.
func sameFile(a, b *FsyncRecord) bool {
	return a.Comm == b.Comm && a.Syscall == b.Syscall && a.Datasync == b.Datasync &&
		a.Ret == b.Ret && a.FD == b.FD && a.Dev == b.Dev && a.DevName == b.DevName && slices.Equal(a.Disks, b.Disks) &&
		a.FS == b.FS && a.Ino == b.Ino && a.Path == b.Path && a.FileKind == b.FileKind
}

// appendJSONHead writes from the record's opening brace to total_ns.
func (r *FsyncRecord) appendJSONHead(dst []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, r.Type)
	dst = append(dst, `,"v":`...)
	dst = appendInt(dst, int64(r.Version))
	dst = append(dst, `,"start_ns":`...)
	dst = appendUint(dst, r.StartNs)
	dst = append(dst, `,"end_ns":`...)
	dst = appendUint(dst, r.EndNs)
	dst = append(dst, `,"total_ns":`...)
	return appendInt(dst, r.TotalNs)
}

// appendJSONIdentity writes the fields from pid to file_kind, each with
// the comma before it.
func (r *FsyncRecord) appendJSONIdentity(dst []byte) []byte {
	return r.appendJSONFile(r.appendJSONTask(dst))
}

// appendJSONTask writes pid and tid, each with the comma before it.
func (r *FsyncRecord) appendJSONTask(dst []byte) []byte {
	dst = append(dst, `,"pid":`...)
	dst = appendUint(dst, uint64(r.PID))
	dst = append(dst, `,"tid":`...)
	return appendUint(dst, uint64(r.TID))
}

// appendJSONFile writes the fields from comm to file_kind, each with the
// comma before it: the ones FsyncEncoder caches (sameFile).
func (r *FsyncRecord) appendJSONFile(dst []byte) []byte {
	dst = append(dst, `,"comm":`...)
	dst = appendJSONString(dst, r.Comm)
	dst = append(dst, `,"syscall":`...)
	dst = appendJSONString(dst, r.Syscall)
	dst = append(dst, `,"datasync":`...)
	dst = strconv.AppendBool(dst, r.Datasync)
	dst = append(dst, `,"ret":`...)
	dst = appendInt(dst, r.Ret)
	dst = append(dst, `,"fd":`...)
	dst = appendInt(dst, int64(r.FD))
	dst = append(dst, `,"dev":`...)
	dst = appendJSONString(dst, r.Dev)
	dst = append(dst, `,"dev_name":`...)
	dst = appendJSONString(dst, r.DevName)
	if len(r.Disks) > 0 {
		dst = append(dst, `,"disks":`...)
		dst = appendJSONStrings(dst, r.Disks)
	}
	dst = append(dst, `,"fs":`...)
	dst = appendJSONString(dst, r.FS)
	dst = append(dst, `,"ino":`...)
	dst = appendUint(dst, r.Ino)
	dst = append(dst, `,"path":`...)
	dst = appendJSONString(dst, r.Path)
	dst = append(dst, `,"file_kind":`...)
	return appendJSONString(dst, r.FileKind)
}

// appendJSONTail writes from layers to the closing brace; host records
// nested in its requests through e's cache (nil: none).
func (r *FsyncRecord) appendJSONTail(dst []byte, e *FsyncEncoder) []byte {
	dst = append(dst, `,"layers":`...)
	dst = r.Layers.appendJSON(dst)
	dst = append(dst, `,"flushes":`...)
	dst = appendInt(dst, int64(r.Flushes))
	if r.FUAWrites != 0 {
		dst = append(dst, `,"fua_writes":`...)
		dst = appendInt(dst, int64(r.FUAWrites))
	}
	dst = append(dst, `,"requests":`...)
	if r.Requests == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range r.Requests {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = r.Requests[i].appendJSON(dst, e)
		}
		dst = append(dst, ']')
	}
	if len(r.Journal) > 0 {
		dst = append(dst, `,"journal":[`...)
		for i := range r.Journal {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = r.Journal[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	if r.Sched != nil {
		dst = append(dst, `,"sched":{"call":`...)
		dst = r.Sched.Call.appendJSON(dst)
		dst = append(dst, `,"other":`...)
		dst = r.Sched.Other.appendJSON(dst)
		dst = append(dst, '}')
	}
	if r.DM != nil {
		dst = append(dst, `,"dm":`...)
		dst = r.DM.appendJSON(dst)
	}
	return append(dst, '}')
}

func (s *SchedSplit) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"runnable_ns":`...)
	dst = appendInt(dst, s.RunnableNs)
	dst = append(dst, `,"running_ns":`...)
	dst = appendInt(dst, s.RunningNs)
	dst = append(dst, `,"blocked_ns":`...)
	dst = appendInt(dst, s.BlockedNs)
	return append(dst, '}')
}

func (l *Layers) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"data_writeback_ns":`...)
	dst = appendInt(dst, l.DataWritebackNs)
	dst = append(dst, `,"journal_ns":`...)
	dst = appendInt(dst, l.JournalNs)
	dst = append(dst, `,"device_flush_ns":`...)
	dst = appendInt(dst, l.DeviceFlushNs)
	dst = append(dst, `,"block_queue_ns":`...)
	dst = appendInt(dst, l.BlockQueueNs)
	if l.DMNs != 0 {
		dst = append(dst, `,"dm_ns":`...)
		dst = appendInt(dst, l.DMNs)
	}
	dst = append(dst, `,"other_ns":`...)
	dst = appendInt(dst, l.OtherNs)
	return append(dst, '}')
}

func (d *DMLevel) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"dev":`...)
	dst = appendJSONString(dst, d.Dev)
	dst = append(dst, `,"dev_name":`...)
	dst = appendJSONString(dst, d.DevName)
	if len(d.Targets) > 0 {
		dst = append(dst, `,"targets":`...)
		dst = appendJSONStrings(dst, d.Targets)
	}
	if len(d.TargetNames) > 0 {
		dst = append(dst, `,"target_names":`...)
		dst = appendJSONStrings(dst, d.TargetNames)
	}
	dst = append(dst, `,"bios":`...)
	dst = appendInt(dst, int64(d.Bios))
	dst = append(dst, `,"held_ns":`...)
	dst = appendInt(dst, d.HeldNs)
	dst = append(dst, `,"lower":`...)
	dst = d.Lower.appendJSON(dst)
	return append(dst, '}')
}

func (q *Request) appendJSON(dst []byte, e *FsyncEncoder) []byte {
	dst = append(dst, `{"role":`...)
	dst = appendJSONString(dst, q.Role)
	dst = append(dst, `,"dev":`...)
	dst = appendJSONString(dst, q.Dev)
	dst = append(dst, `,"op":`...)
	dst = appendJSONString(dst, q.Op)
	if len(q.Flags) > 0 {
		dst = append(dst, `,"flags":`...)
		dst = appendJSONStrings(dst, q.Flags)
	}
	dst = append(dst, `,"rwbs":`...)
	dst = appendJSONString(dst, q.Rwbs)
	if q.Sector != 0 {
		dst = append(dst, `,"sector":`...)
		dst = appendUint(dst, q.Sector)
	}
	dst = append(dst, `,"bytes":`...)
	dst = appendUint(dst, uint64(q.Bytes))
	if q.InsertNs != 0 {
		dst = append(dst, `,"insert_ns":`...)
		dst = appendUint(dst, q.InsertNs)
	}
	dst = append(dst, `,"issue_ns":`...)
	dst = appendUint(dst, q.IssueNs)
	dst = append(dst, `,"complete_ns":`...)
	dst = appendUint(dst, q.CompleteNs)
	if q.NotIssued {
		dst = append(dst, `,"not_issued":true`...)
	}
	if q.DM {
		dst = append(dst, `,"dm":true`...)
	}
	if q.RemapNs != 0 {
		dst = append(dst, `,"remap_ns":`...)
		dst = appendUint(dst, q.RemapNs)
	}
	if q.Target != "" {
		dst = append(dst, `,"target":`...)
		dst = appendJSONString(dst, q.Target)
	}
	if len(q.Host) > 0 {
		dst = append(dst, `,"host":[`...)
		for i := range q.Host {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.appendHost(dst, &q.Host[i])
		}
		dst = append(dst, ']')
	}
	if q.HostUntraced != "" {
		dst = append(dst, `,"host_untraced":`...)
		dst = appendJSONString(dst, q.HostUntraced)
	}
	dst = append(dst, `,"tid":`...)
	dst = appendUint(dst, uint64(q.TID))
	dst = append(dst, `,"comm":`...)
	dst = appendJSONString(dst, q.Comm)
	return append(dst, '}')
}

func (j *JournalWindow) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"source":`...)
	dst = appendJSONString(dst, j.Source)
	dst = append(dst, `,"dev":`...)
	dst = appendJSONString(dst, j.Dev)
	if j.Txn != 0 {
		dst = append(dst, `,"txn":`...)
		dst = appendUint(dst, uint64(j.Txn))
	}
	dst = append(dst, `,"start_ns":`...)
	dst = appendUint(dst, j.StartNs)
	dst = append(dst, `,"end_ns":`...)
	dst = appendUint(dst, j.EndNs)
	return append(dst, '}')
}

// appendJSONStrings writes a non-nil []string (callers handle omitempty).
func appendJSONStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// jsonSafe marks the ASCII bytes encoding/json copies unescaped with HTML
// escaping on (its htmlSafeSet).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendJSONString quotes s as encoding/json does with HTML escaping on
// (its default, and Encoder's): \" \\ \b \f \n \r \t, other control bytes
// and < > & as \u00XX, invalid UTF-8 as \ufffd, U+2028/U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
