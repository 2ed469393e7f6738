// Package capture records the decoded kernel events of a run, with the
// host facts the attribution asked for while it ran (device names and
// disks, loop devices' backing files, the path of each fsync's file), so
// that `etcdscope report` can replay them through the same attribution on
// another machine and print the same report.
//
// A capture is JSON Lines, schema "capture/v2" (docs/schema.md): a header
// line (type "capture"), then fact and event lines in the order the
// pipeline handled them, then an end line (type "end") with the tracer's
// lost and missed counts. A fact line comes before the first event whose
// handling needed it, so a reader can replay the file in one pass.
//
// Event lines carry the event/ types' fields under short keys defined
// here, not by the Go field names, so that renaming a field in event/
// does not change the format. The package does no I/O except on the
// reader and writer handed to it.
package capture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/event"
)

// Schema names the format; Version is its "v". Version 2 (2026-12-07):
// the header's unavailable entries are analysis.Unavailable's fields, not
// version 1's "probe: words" strings, which a reader still takes (as
// analysis.Unavailable's Text) in a version 1 header and refuses in a
// version 2 one.
const (
	Schema  = "capture/v2"
	Version = 2
)

// Tracers whose events a capture can hold.
const (
	TracerFsync = "fsync"
	TracerPeers = "peers"
)

// Header is the first line: what was traced and how.
type Header struct {
	Type    string `json:"type"` // always "capture"
	V       int    `json:"v"`
	Schema  string `json:"schema"` // Schema
	Tracer  string `json:"tracer"` // TracerFsync or TracerPeers
	Command string `json:"command,omitempty"`
	// Unavailable lists the probes that did not attach and why (the
	// report's "unavailable" lines).
	Unavailable []analysis.Unavailable `json:"unavailable,omitempty"`
	// Disk is the fsync --dev filter as major:minor ("" for none): replay
	// keeps only records on that disk, as the live run did.
	Disk string `json:"disk,omitempty"`
	// Port is the peers tracer's port.
	Port int `json:"port,omitempty"`
	// Sched: the run followed the scheduler (fsync --sched): sched lines
	// follow, and replay splits calls by scheduler state.
	Sched bool `json:"sched,omitempty"`
}

// End is the last line: the tracer's counters at the end of the run.
type End struct {
	Type         string `json:"type"` // always "end"
	V            int    `json:"v"`
	LostEvents   uint64 `json:"lost_events"`
	MissedEvents uint64 `json:"missed_events"`
	DecodeErrors uint64 `json:"decode_errors,omitempty"`
	// WindowNs is the traced wall time (peers: the rates' denominator;
	// fsync: the summary's window_ns, the length the page states).
	WindowNs int64 `json:"window_ns,omitempty"`
	// MonoToWallNs is CLOCK_REALTIME − CLOCK_MONOTONIC at the end (the
	// fsync summary's mono_to_wall_ns).
	MonoToWallNs int64 `json:"mono_to_wall_ns,omitempty"`
	// DiskCaches: the write cache mode and FUA support of the traced disks as
	// the live run read them from sysfs (fsync), at most as many as the
	// report keeps; replay prints them as the live run did.
	DiskCaches []analysis.DiskCache `json:"disk_caches,omitempty"`
	// Journals: whether each ext4 group's device held a jbd2 journal as the
	// live run read /proc/fs/jbd2 (fsync); replay says what the run knew.
	Journals []analysis.Journal `json:"journals,omitempty"`
	// OwnConns: the local ends of the live run's own probe connections
	// (peers with --etcd-endpoints), which its table left out; replay
	// leaves them out too.
	OwnConns []netip.AddrPort `json:"own_conns,omitempty"`
	// Members: the member list the live peers run read (--etcd-endpoints),
	// so that the replay names the members and marks the links to none of
	// them as the live table did.
	Members []etcdmetric.Member `json:"members,omitempty"`
	// MembersError: why the live run's member list is missing or
	// incomplete (etcdmetric.PeersReport's members_error), said again by
	// the replay as the live run said it.
	MembersError string `json:"members_error,omitempty"`
	// Etcd: what the live peers run read of etcd's peer RTT metric
	// (--etcd-metrics), so that the replay compares it again; absent
	// without --etcd-metrics and in captures made before 2026-12-07 (the
	// replay then says the comparison is not in the capture).
	Etcd *Etcd `json:"etcd,omitempty"`
}

// Etcd is what a live peers run read of etcd around its window: the two
// scrapes of etcd_network_peer_round_trip_time_seconds and the facts the
// comparison took from the host (the member's pid, its timeouts,
// etcdscope's own kept-alive probe times).
type Etcd struct {
	MetricsURL string `json:"metrics_url"`
	// MetricsError: the scrapes' errors as the live run printed them.
	MetricsError string `json:"metrics_error,omitempty"`
	MemberPID    int    `json:"member_pid,omitempty"`
	// StartUnixNs: the window's start (after the start scrape), wall
	// clock; its end is StartUnixNs + the end line's window_ns.
	StartUnixNs int64 `json:"start_unix_ns"`
	// MonoStartNs: the window's start on the events' clock.
	MonoStartNs uint64 `json:"mono_start_ns"`
	// From, To: the scrapes at the window's start and end (absent: that
	// scrape failed).
	From *Scrape `json:"from,omitempty"`
	To   *Scrape `json:"to,omitempty"`
	// KeptAliveNs and ProbeErrors: etcdscope's kept-alive probe's mean
	// time and last error per peer address.
	KeptAliveNs map[netip.Addr]int64  `json:"kept_alive_ns,omitempty"`
	ProbeErrors map[netip.Addr]string `json:"probe_errors,omitempty"`
	// Timeouts: the scraped member's heartbeat and election timeouts, the
	// slow-peer verdicts' bounds.
	Timeouts etcdmetric.Timeouts `json:"timeouts"`
}

// Scrape is one etcdmetric.Scrape in the capture's own keys (a bucket's
// bound as the exposition writes it: "+Inf" is no JSON number).
type Scrape struct {
	Series         []ScrapeSeries `json:"series"`
	ProcessStartNs int64          `json:"process_start_unix_ns,omitempty"`
	Leader         int            `json:"is_leader"`
	IsEtcd         bool           `json:"is_etcd,omitempty"`
}

// ScrapeSeries is one etcdmetric.Series.
type ScrapeSeries struct {
	To       string            `json:"to"`
	Prober   string            `json:"prober,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Buckets  []ScrapeBucket    `json:"buckets"`
	Count    float64           `json:"count"`
	Sum      float64           `json:"sum"`
	HasCount bool              `json:"has_count,omitempty"`
	HasSum   bool              `json:"has_sum,omitempty"`
}

// ScrapeBucket is one cumulative bucket: LE its upper bound in seconds
// (strconv 'g', or "+Inf").
type ScrapeBucket struct {
	LE    string  `json:"le"`
	Count float64 `json:"count"`
}

// FromScrape is s in the capture's keys. A series with a count, sum or
// bucket that is no finite number (JSON has none) is left out.
func FromScrape(s etcdmetric.Scrape) *Scrape {
	out := &Scrape{Leader: s.Leader, IsEtcd: s.IsEtcd}
	if !s.ProcessStart.IsZero() {
		out.ProcessStartNs = s.ProcessStart.UnixNano()
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, se := range s.Series {
		cs := ScrapeSeries{To: se.Key.To, Prober: se.Key.Prober, Labels: se.Labels, Count: se.Count, Sum: se.Sum, HasCount: se.HasCount, HasSum: se.HasSum}
		ok := finite(se.Count) && finite(se.Sum)
		for _, b := range se.Buckets {
			ok = ok && finite(b.Count) && !math.IsNaN(b.UpperBound)
			cs.Buckets = append(cs.Buckets, ScrapeBucket{LE: strconv.FormatFloat(b.UpperBound, 'g', -1, 64), Count: b.Count})
		}
		if ok {
			out.Series = append(out.Series, cs)
		}
	}
	return out
}

// Metric is s as etcdmetric reads it; a bound that is no number is an
// error.
func (s *Scrape) Metric() (etcdmetric.Scrape, error) {
	out := etcdmetric.Scrape{Leader: s.Leader, IsEtcd: s.IsEtcd}
	if s.ProcessStartNs != 0 {
		out.ProcessStart = time.Unix(0, s.ProcessStartNs)
	}
	for _, cs := range s.Series {
		se := etcdmetric.Series{Key: etcdmetric.Key{To: cs.To, Prober: cs.Prober}, Labels: cs.Labels, Count: cs.Count, Sum: cs.Sum, HasCount: cs.HasCount, HasSum: cs.HasSum}
		for _, b := range cs.Buckets {
			le, err := strconv.ParseFloat(b.LE, 64)
			if err != nil {
				return etcdmetric.Scrape{}, fmt.Errorf("series to %s: bucket le %q is not a number", cs.To, b.LE)
			}
			se.Buckets = append(se.Buckets, etcdmetric.Bucket{UpperBound: le, Count: b.Count})
		}
		out.Series = append(out.Series, se)
	}
	return out, nil
}

// Device is the answer the run got for a filesystem or disk device: its
// kernel name and the whole disks whose requests serve it.
type Device struct {
	Dev       event.Dev
	Name      string
	Disks     []event.Dev
	DiskNames []string
}

// Backing is the answer the run got for whether a disk is a loop device
// and which file backs it (OK false: not stacked).
type Backing struct {
	Disk event.Dev
	OK   bool
	Path string
	Dev  event.Dev // the backing file's filesystem
	Ino  uint64
	FS   string // that filesystem's type ("" in captures made before it was recorded)
}

// line is every non-header line; Type says which fields are meaningful.
type line struct {
	Type string `json:"type"`
	V    int    `json:"v,omitempty"`

	// device and backing facts
	Dev       *event.Dev  `json:"dev,omitempty"`
	Name      string      `json:"name,omitempty"`
	Disks     []event.Dev `json:"disks,omitempty"`
	DiskNames []string    `json:"disk_names,omitempty"`
	Disk      *event.Dev  `json:"disk,omitempty"`
	OK        bool        `json:"ok,omitempty"`
	Path      string      `json:"path,omitempty"`
	Ino       uint64      `json:"ino,omitempty"`

	// events: "fsync", "kfsync" (a kernel thread's vfs_fsync), "enter",
	// "block", "journal", "flush_bio", "write", "sched", "peer"
	// "block", "journal", "flush_bio", "dm_bio", "remap", "peer"
	Sys      uint8          `json:"sys,omitempty"`
	PID      uint32         `json:"pid,omitempty"`
	TID      uint32         `json:"tid,omitempty"`
	Comm     string         `json:"comm,omitempty"`
	FD       int32          `json:"fd,omitempty"`
	Blkdev   bool           `json:"blkdev,omitempty"`
	FSType   string         `json:"fs,omitempty"`
	Names    []string       `json:"names,omitempty"`
	Cgroup   uint64         `json:"cgroup,omitempty"`
	Start    uint64         `json:"start,omitempty"`
	End      uint64         `json:"end,omitempty"`
	Ret      int64          `json:"ret,omitempty"`
	Rq       uint64         `json:"rq,omitempty"`
	Op       event.Op       `json:"op,omitempty"`
	Flags    event.ReqFlags `json:"flags,omitempty"`
	CmdFlags uint32         `json:"cmd_flags,omitempty"`
	Sector   uint64         `json:"sector,omitempty"`
	Bytes    uint32         `json:"bytes,omitempty"`
	Error    int32          `json:"error,omitempty"`
	Final    bool           `json:"final,omitempty"`
	Insert   uint64         `json:"insert,omitempty"`
	Issue    uint64         `json:"issue,omitempty"`
	Complete uint64         `json:"complete,omitempty"`
	Source   uint8          `json:"source,omitempty"`
	Txn      uint32         `json:"txn,omitempty"`
	Queue    uint64         `json:"queue,omitempty"`
	Bio      uint64         `json:"bio,omitempty"`
	Target   *event.Dev     `json:"target,omitempty"`
	Remap    uint64         `json:"remap,omitempty"`
	Peer     *event.Peer    `json:"peer,omitempty"`

	// sched: event.Sched's state (tid in TID, time in Start)
	State uint8 `json:"state,omitempty"`

	// write: event.Write's waits (its call in the fsync fields)
	Throttled uint64 `json:"throttled,omitempty"`
	Throttles uint32 `json:"throttles,omitempty"`
	WBWait    uint64 `json:"wb_wait,omitempty"`
	WBWaits   uint32 `json:"wb_waits,omitempty"`
}

// callLine is the line of a call (an fsync's or a write's).
func callLine(typ string, f *event.Fsync) line {
	return line{Type: typ, Sys: uint8(f.Syscall), PID: f.PID, TID: f.TID, Comm: f.Comm, FD: f.FD, Dev: &f.Dev,
		Blkdev: f.IsBlockdev, Ino: f.Ino, FSType: f.FSType, Names: f.Names, Cgroup: f.CgroupID,
		Start: f.StartNs, End: f.EndNs, Ret: f.Ret}
}

// call is the call of a line callLine wrote.
func (l *line) call() event.Fsync {
	return event.Fsync{Syscall: event.Syscall(l.Sys), PID: l.PID, TID: l.TID, Comm: l.Comm, FD: l.FD, Dev: dev(l.Dev),
		IsBlockdev: l.Blkdev, Ino: l.Ino, FSType: l.FSType, Names: l.Names, CgroupID: l.Cgroup,
		StartNs: l.Start, EndNs: l.End, Ret: l.Ret}
}

// Writer writes a capture. Not safe for concurrent use.
type Writer struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewWriter writes h (Type, V and Schema are filled in) and returns a
// writer for the lines after it; Close writes the end line.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Type, h.V, h.Schema = "capture", Version, Schema
	cw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	cw.put(h)
	return cw, cw.err
}

func (w *Writer) put(v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("encoding capture line: %w", err)
		return
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("writing capture: %w", err)
	}
}

// Device records a device answer.
func (w *Writer) Device(d Device) error {
	w.put(line{Type: "device", Dev: &d.Dev, Name: d.Name, Disks: d.Disks, DiskNames: d.DiskNames})
	return w.err
}

// Backing records a backing-file answer.
func (w *Writer) Backing(b Backing) error {
	l := line{Type: "backing", Disk: &b.Disk, OK: b.OK}
	if b.OK {
		l.Path, l.Dev, l.Ino, l.FSType = b.Path, &b.Dev, b.Ino, b.FS
	}
	w.put(l)
	return w.err
}

// Event records one fsync-tracer event; path is the name the run resolved
// for an fsync's or a write's file (ignored for other kinds).
func (w *Writer) Event(ev *event.Any, path string) error {
	var l line
	switch ev.Kind {
	case event.KindFsync, event.KindKernelFsync:
		l = callLine("fsync", &ev.Fsync)
		if ev.Kind == event.KindKernelFsync {
			l.Type = "kfsync"
		} else {
			l.Path = path
		}
	case event.KindFsyncEnter:
		l = line{Type: "enter", TID: ev.Enter.TID, Start: ev.Enter.StartNs}
	case event.KindBlock:
		b := &ev.Block
		l = line{Type: "block", Rq: b.Rq, Dev: &b.Dev, Op: b.Op, Flags: b.Flags, CmdFlags: b.CmdFlags, Sector: b.Sector,
			Bytes: b.Bytes, Error: b.Error, Final: b.Final, Insert: b.InsertNs, Issue: b.IssueNs, Complete: b.CompleteNs,
			PID: b.PID, TID: b.TID, Comm: b.Comm}
	case event.KindJournal:
		j := &ev.Journal
		l = line{Type: "journal", Source: uint8(j.Source), Dev: &j.Dev, TID: j.TID, Txn: j.Txn, Start: j.StartNs, End: j.EndNs}
	case event.KindFlushBio:
		f := &ev.FlushBio
		l = line{Type: "flush_bio", Dev: &f.Dev, Op: f.Op, Flags: f.Flags, PID: f.PID, TID: f.TID, Queue: f.QueueNs}
	case event.KindWrite:
		w := &ev.Write
		l = callLine("write", &w.Call)
		l.Path = path
		l.Throttled, l.Throttles, l.WBWait, l.WBWaits = w.ThrottledNs, w.Throttles, w.WritebackWaitNs, w.WritebackWaits
	case event.KindSched:
		l = line{Type: "sched", TID: ev.Sched.TID, State: uint8(ev.Sched.State), Start: ev.Sched.Ns}
	case event.KindDMBio:
		b := &ev.DMBio
		l = line{Type: "dm_bio", Bio: b.Bio, Dev: &b.Dev, Op: b.Op, Flags: b.Flags, Bytes: b.Bytes, Error: b.Error,
			PID: b.PID, TID: b.TID, Comm: b.Comm, Queue: b.QueueNs, Complete: b.CompleteNs}
	case event.KindBioRemap:
		r := &ev.Remap
		l = line{Type: "remap", Dev: &r.Dev, Target: &r.Target, Op: r.Op, Flags: r.Flags, TID: r.TID, Sector: r.Sector, Remap: r.RemapNs}
	default:
		return fmt.Errorf("capture: event kind %d has no line type", ev.Kind)
	}
	w.put(l)
	return w.err
}

// Peer records one peers-tracer event.
func (w *Writer) Peer(e *event.Peer) error {
	w.put(line{Type: "peer", Peer: e})
	return w.err
}

// Close writes the end line (Type and V filled in) and flushes; it does
// not close the underlying writer.
func (w *Writer) Close(e End) error {
	e.Type, e.V = "end", Version
	w.put(e)
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("writing capture: %w", err)
		}
	}
	return w.err
}

// Reader replays a capture. Not safe for concurrent use.
type Reader struct {
	sc       *bufio.Scanner
	n        int // line number of the last line read
	hdr      Header
	end      End
	ended    bool
	devices  map[event.Dev]Device
	backings map[event.Dev]Backing
	path     string
}

// MaxFacts bounds the device and backing facts a Reader holds (a run
// asks about each device it sees once: a host has a few dozen), and
// MaxFactBytes each fact's names and path together: a capture of 178 MB
// of device lines held 608 MiB. Past either, the Reader fails with
// ErrTooLarge.
const (
	MaxFacts     = 4096
	MaxFactBytes = 8 << 10
)

// ErrTooLarge is returned (wrapped, with what passed its bound) by the
// Reader for a capture with more facts than MaxFacts or a larger one
// than MaxFactBytes.
var ErrTooLarge = errors.New("more than a capture holds")

// factBytes is what a fact holds in names and path.
func factBytes(name, path string, disks int, names []string) int {
	n := len(name) + len(path) + 8*disks
	for _, s := range names {
		n += len(s)
	}
	return n
}

// ErrNotCapture is returned by NewReader when the first line is not a
// capture header.
var ErrNotCapture = errors.New("not a capture (no capture header line)")

// IsCapture reports whether the first line of a recording, as jsonl.Head
// decodes it, opens a capture.
func IsCapture(h jsonl.Head) bool { return h.Type == "capture" }

// NewReader reads the header of r; the events follow with ReadEvent or
// ReadPeer. A header of a newer version is an error.
func NewReader(r io.Reader) (*Reader, error) {
	cr := &Reader{sc: bufio.NewScanner(r), devices: map[event.Dev]Device{}, backings: map[event.Dev]Backing{}}
	cr.sc.Buffer(make([]byte, 64<<10), jsonl.MaxLine)
	b, err := cr.line()
	if err == io.EOF {
		return nil, ErrNotCapture
	}
	if err != nil {
		return nil, err
	}
	var h jsonl.Head
	if err := json.Unmarshal(b, &h); err != nil || !IsCapture(h) {
		return nil, ErrNotCapture
	}
	if h.V > Version {
		return nil, fmt.Errorf("capture version %d is newer than this etcdscope's %d", h.V, Version)
	}
	if err := json.Unmarshal(b, &cr.hdr); err != nil {
		return nil, fmt.Errorf("line %d: %w", cr.n, err)
	}
	if h.V >= 2 && slices.ContainsFunc(cr.hdr.Unavailable, func(u analysis.Unavailable) bool { return u.Text != "" }) {
		return nil, fmt.Errorf("line %d: a version %d header with an unavailable probe as version 1's text", cr.n, h.V)
	}
	return cr, nil
}

// line returns the next non-blank line (valid until the next call).
func (r *Reader) line() ([]byte, error) {
	for r.sc.Scan() {
		r.n++
		if b := bytes.TrimSpace(r.sc.Bytes()); len(b) > 0 {
			return b, nil
		}
	}
	if err := r.sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", r.n+1, err)
	}
	return nil, io.EOF
}

// Header returns the header line.
func (r *Reader) Header() Header { return r.hdr }

// End returns the end line, once ReadEvent or ReadPeer returned io.EOF;
// ok is false when the capture has none (a run killed before its end).
func (r *Reader) End() (End, bool) { return r.end, r.ended }

// Device returns the device answer the run recorded for d.
func (r *Reader) Device(d event.Dev) (Device, bool) {
	v, ok := r.devices[d]
	return v, ok
}

// Backing returns the backing-file answer the run recorded for disk.
func (r *Reader) Backing(disk event.Dev) (Backing, bool) {
	v, ok := r.backings[disk]
	return v, ok
}

// Path returns the path recorded with the last fsync event read.
func (r *Reader) Path() string { return r.path }

// next returns the next event line, taking in the facts and the end line
// before it; io.EOF at the end of the input.
func (r *Reader) next() (*line, error) {
	for {
		b, err := r.line()
		if err != nil {
			return nil, err
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", r.n, err)
		}
		if l.V > Version {
			return nil, fmt.Errorf("line %d: version %d is newer than this etcdscope's %d", r.n, l.V, Version)
		}
		switch l.Type {
		case "end":
			if err := json.Unmarshal(b, &r.end); err != nil {
				return nil, fmt.Errorf("line %d: %w", r.n, err)
			}
			r.ended = true
			continue
		case "device":
			if l.Dev == nil {
				return nil, fmt.Errorf("line %d: device fact without dev", r.n)
			}
			_, seen := r.devices[*l.Dev]
			if err := r.checkFact(len(r.devices), !seen, factBytes(l.Name, "", len(l.Disks), l.DiskNames)); err != nil {
				return nil, err
			}
			r.devices[*l.Dev] = Device{Dev: *l.Dev, Name: l.Name, Disks: l.Disks, DiskNames: l.DiskNames}
			continue
		case "backing":
			if l.Disk == nil {
				return nil, fmt.Errorf("line %d: backing fact without disk", r.n)
			}
			_, seen := r.backings[*l.Disk]
			if err := r.checkFact(len(r.backings), !seen, factBytes(l.FSType, l.Path, 0, nil)); err != nil {
				return nil, err
			}
			bk := Backing{Disk: *l.Disk, OK: l.OK, Path: l.Path, Ino: l.Ino, FS: l.FSType}
			if l.Dev != nil {
				bk.Dev = *l.Dev
			}
			r.backings[*l.Disk] = bk
			continue
		}
		return &l, nil
	}
}

// checkFact fails for a fact past MaxFactBytes, or a new one (held facts
// of its kind) past MaxFacts.
func (r *Reader) checkFact(held int, isNew bool, size int) error {
	if size > MaxFactBytes {
		return fmt.Errorf("line %d: %w: a fact of %d bytes (at most %d)", r.n, ErrTooLarge, size, MaxFactBytes)
	}
	if isNew && held >= MaxFacts {
		return fmt.Errorf("line %d: %w: more than %d device or backing facts", r.n, ErrTooLarge, MaxFacts)
	}
	return nil
}

func dev(d *event.Dev) event.Dev {
	if d == nil {
		return 0
	}
	return *d
}

// ReadEvent decodes the next fsync-tracer event into ev; io.EOF after the
// last. A peer line in an fsync capture is an error.
func (r *Reader) ReadEvent(ev *event.Any) error {
	l, err := r.next()
	if err != nil {
		return err
	}
	switch l.Type {
	case "fsync", "kfsync":
		ev.Kind = event.KindFsync
		if l.Type == "kfsync" {
			ev.Kind = event.KindKernelFsync
		}
		ev.Fsync = l.call()
		if l.Type == "fsync" {
			r.path = l.Path
		}
	case "enter":
		ev.Kind, ev.Enter = event.KindFsyncEnter, event.FsyncEnter{TID: l.TID, StartNs: l.Start}
	case "block":
		ev.Kind = event.KindBlock
		ev.Block = event.Block{Rq: l.Rq, Dev: dev(l.Dev), Op: l.Op, Flags: l.Flags, CmdFlags: l.CmdFlags, Sector: l.Sector,
			Bytes: l.Bytes, Error: l.Error, Final: l.Final, InsertNs: l.Insert, IssueNs: l.Issue, CompleteNs: l.Complete,
			PID: l.PID, TID: l.TID, Comm: l.Comm}
	case "journal":
		ev.Kind = event.KindJournal
		ev.Journal = event.Journal{Source: event.JournalSource(l.Source), Dev: dev(l.Dev), TID: l.TID, Txn: l.Txn, StartNs: l.Start, EndNs: l.End}
	case "flush_bio":
		ev.Kind = event.KindFlushBio
		ev.FlushBio = event.FlushBio{Dev: dev(l.Dev), Op: l.Op, Flags: l.Flags, PID: l.PID, TID: l.TID, QueueNs: l.Queue}
	case "write":
		ev.Kind = event.KindWrite
		ev.Write = event.Write{Call: l.call(), ThrottledNs: l.Throttled, Throttles: l.Throttles,
			WritebackWaitNs: l.WBWait, WritebackWaits: l.WBWaits}
		r.path = l.Path
	case "sched":
		ev.Kind = event.KindSched
		ev.Sched = event.Sched{TID: l.TID, State: event.SchedState(l.State), Ns: l.Start}
	case "dm_bio":
		ev.Kind = event.KindDMBio
		ev.DMBio = event.DMBio{Bio: l.Bio, Dev: dev(l.Dev), Op: l.Op, Flags: l.Flags, Bytes: l.Bytes, Error: l.Error,
			PID: l.PID, TID: l.TID, Comm: l.Comm, QueueNs: l.Queue, CompleteNs: l.Complete}
	case "remap":
		ev.Kind = event.KindBioRemap
		ev.Remap = event.BioRemap{Dev: dev(l.Dev), Target: dev(l.Target), Op: l.Op, Flags: l.Flags, TID: l.TID, Sector: l.Sector, RemapNs: l.Remap}
	default:
		return fmt.Errorf("line %d: %q is not an fsync-tracer event", r.n, l.Type)
	}
	return nil
}

// ReadPeer decodes the next peers-tracer event into e; io.EOF after the
// last.
func (r *Reader) ReadPeer(e *event.Peer) error {
	l, err := r.next()
	if err != nil {
		return err
	}
	if l.Type != "peer" || l.Peer == nil {
		return fmt.Errorf("line %d: %q is not a peer event", r.n, l.Type)
	}
	*e = *l.Peer
	return nil
}

// ParseDev parses a device as Header.Disk writes it ("major:minor").
func ParseDev(s string) (event.Dev, error) {
	var maj, min uint32
	if n, err := fmt.Sscanf(s, "%d:%d", &maj, &min); err != nil || n != 2 {
		return 0, fmt.Errorf("device %q is not major:minor", s)
	}
	return event.MkDev(maj, min), nil
}
