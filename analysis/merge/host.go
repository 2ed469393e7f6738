// Package merge joins a guest's fsync recording (`etcdscope fsync --output
// json` inside a VM) with the hypervisor's recording on the host
// (`etcdscope hypervisor --output json`): it estimates the offset between
// the two CLOCK_MONOTONIC clocks from matched flushes and splits every
// guest fsync into guest, virtualization and host layers. The matching
// method and its error are documented in docs/merge.md. Pure Go: no root,
// no kernel, no I/O except reading recorded JSON Lines.
package merge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// SchemaVersion is the version of the hypervisor recording's records
// (docs/merge.md): "hypervisor", "hv_io", "hv_summary" and, unchanged from
// docs/schema.md, "fsync". Readers refuse newer versions.
const SchemaVersion = 1

// HostSummaryVersion is the version of the hypervisor recording's
// "hv_summary" line. 2 (2026-12-07): its unavailable entries are
// analysis.Unavailable's fields, not version 1's "probe: words" strings,
// which readers still take (analysis.Unavailable.UnmarshalJSON).
const HostSummaryVersion = 2

// SummaryVersion is the version of merge's "merge_summary" line. 2
// (2026-12-06): its levels are named as nested virtualization names them
// from the bottom, "L1 guest" on "L0 host" (version 1 said "L2 host", which
// that field reads as a guest inside the guest), the guest's share of host
// time "host (L0)".
const SummaryVersion = 2

// HostHeader is the first record of a hypervisor recording.
type HostHeader struct {
	Type  string `json:"type"` // "hypervisor"
	V     int    `json:"v"`
	PID   uint32 `json:"pid,omitempty"`  // the --pid filter, 0 if none
	Comm  string `json:"comm,omitempty"` // the --comm filter, "" if none
	Clock string `json:"clock"`          // always "CLOCK_MONOTONIC"
	// StartNs is when tracing began, host CLOCK_MONOTONIC ns.
	StartNs uint64 `json:"start_ns"`
}

// HostIO is one I/O call of the hypervisor on a file (record type
// "hv_io"): a read or write system call, an io_submit, an io_uring_enter,
// or one io_uring request from submission to completion.
type HostIO struct {
	Type    string `json:"type"` // "hv_io"
	V       int    `json:"v"`
	Op      string `json:"op"` // pread64, pwrite64, preadv, pwritev, preadv2, pwritev2, io_submit, io_uring_enter, io_uring_req
	PID     uint32 `json:"pid"`
	TID     uint32 `json:"tid"`
	Comm    string `json:"comm"`
	FD      int32  `json:"fd"`
	Path    string `json:"path"` // /proc/PID/fd/FD at record time if it still named the same inode, else .../d/names
	Dev     string `json:"dev"`  // the file's filesystem device (or the device of a block device node), major:minor
	Ino     uint64 `json:"ino"`
	FS      string `json:"fs"`       // s_type->name, or "blockdev"
	ODirect bool   `json:"o_direct"` // opened with O_DIRECT (cache=none or directsync)
	ODsync  bool   `json:"o_dsync,omitempty"`
	Opcode  uint8  `json:"opcode,omitempty"` // io_submit: IOCB_CMD_* of the first iocb; io_uring_req: IORING_OP_*
	Nr      uint32 `json:"nr,omitempty"`     // io_submit: iocbs; io_uring_enter: to_submit
	StartNs uint64 `json:"start_ns"`
	EndNs   uint64 `json:"end_ns"`
	Ret     int64  `json:"ret"` // bytes, iocbs submitted, or -errno
}

// Where an Image's cache mode came from.
const (
	CacheFromOpenFlags   = "open_flags"
	CacheFromCommandLine = "command_line"
)

// IORING_OP_FSYNC: an io_uring fsync request is the flush of aio=io_uring.
const ioringOpFsync = 3

// Image is what the recording shows of one image file (or block device)
// the hypervisor wrote or flushed.
type Image struct {
	Path   string `json:"path"`
	Format string `json:"format"` // qcow2 (magic QFI\xfb), raw, or "" when unread
	Cache  string `json:"cache"`  // none (O_DIRECT), writethrough (O_DSYNC), writeback (host page cache); from QEMU's command line also directsync and unsafe
	// CacheFrom says where Cache came from: CacheFromOpenFlags (the
	// image's open flags: cache=unsafe looks like writeback there) or
	// CacheFromCommandLine (QEMU's -drive/-blockdev options).
	CacheFrom string `json:"cache_from,omitempty"`
	AIO       string `json:"aio"` // native (io_submit), io_uring, threads (read/write syscalls), unknown
	Dev       string `json:"dev"`
	DevName   string `json:"dev_name,omitempty"`
	FS        string `json:"fs"` // host filesystem, or blockdev
	// Counts of calls by kind, and bytes the read/write calls returned.
	Reads        int   `json:"reads"`
	Writes       int   `json:"writes"`
	IOSubmits    int   `json:"io_submits"`
	IOUringReqs  int   `json:"io_uring_reqs"`
	Flushes      int   `json:"flushes"` // fdatasync/fsync calls and io_uring fsync requests
	BytesRead    int64 `json:"bytes_read"`
	BytesWritten int64 `json:"bytes_written"`
	Threads      int   `json:"threads"` // distinct threads that did I/O on it
	// ThreadsNotCounted: calls on the file whose thread was not counted in
	// Threads, because MaxHostThreads (file, thread) pairs were held
	// already: Threads is then a lower bound.
	ThreadsNotCounted int `json:"threads_not_counted,omitempty"`
}

// HostSummary is the last record of a hypervisor recording.
type HostSummary struct {
	Type   string  `json:"type"` // "hv_summary"
	V      int     `json:"v"`
	Images []Image `json:"images"`
	// Warnings: Warnings(Images), worded (render.MergeWarnings fills it).
	Warnings []string `json:"warnings,omitempty"`
	// LostEvents: hv_io records that did not fit (ring buffer or map);
	// MissedEvents: runs of the hypervisor programs the kernel skipped
	// (recursion); FsyncLostEvents, FsyncMissedEvents: the fsync
	// tracer's counters.
	LostEvents        uint64                 `json:"lost_events"`
	MissedEvents      uint64                 `json:"missed_events"`
	FsyncLostEvents   uint64                 `json:"fsync_lost_events"`
	FsyncMissedEvents uint64                 `json:"fsync_missed_events"`
	Unavailable       []analysis.Unavailable `json:"unavailable,omitempty"`
}

// HostRecording is a parsed hypervisor recording.
type HostRecording struct {
	Header  HostHeader
	IO      []HostIO
	Fsyncs  []analysis.FsyncRecord // the hypervisor's fdatasync/fsync calls with their host layers
	Summary *HostSummary           // nil if the recording was cut short
}

// ReadHost parses a hypervisor recording. It refuses records of a newer
// version and lines that are not JSON, naming the line. It holds every
// record: `etcdscope merge` keeps only what a merge needs (ScanHost).
func ReadHost(r io.Reader) (HostRecording, error) {
	var rec HostRecording
	var err error
	rec.Header, rec.Summary, err = scanHost(r, func(io *HostIO) error { rec.IO = append(rec.IO, *io); return nil },
		func(f *analysis.FsyncRecord) error { rec.Fsyncs = append(rec.Fsyncs, *f); return nil })
	return rec, err
}

// scanHost reads a hypervisor recording a line at a time, handing each
// hv_io and fsync record to io and fsync (which may not keep the pointer);
// an error they return ends it.
func scanHost(r io.Reader, io func(*HostIO) error, fsync func(*analysis.FsyncRecord) error) (header HostHeader, summary *HostSummary, _ error) {
	err := jsonl.Scan(r, func(_ int, h jsonl.Head, raw []byte) error {
		max := SchemaVersion
		switch h.Type {
		case "fsync":
			max = analysis.SchemaVersion
		case "summary":
			max = analysis.SummaryVersion
		case "hv_summary":
			max = HostSummaryVersion
		}
		if h.V > max {
			return fmt.Errorf("%s record version %d is newer than this etcdscope's %d", h.Type, h.V, max)
		}
		switch h.Type {
		case "hypervisor":
			return json.Unmarshal(raw, &header)
		case "hv_io":
			var rec HostIO
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
			return io(&rec)
		case "fsync":
			var f analysis.FsyncRecord
			if err := json.Unmarshal(raw, &f); err != nil {
				return err
			}
			return fsync(&f)
		case "hv_summary":
			var s HostSummary
			err := json.Unmarshal(raw, &s)
			summary = &s
			return err
		}
		return nil
	})
	if err != nil {
		return header, summary, fmt.Errorf("host recording %w", err)
	}
	if header.Type != "hypervisor" {
		return header, summary, fmt.Errorf("not a hypervisor recording: no \"type\":\"hypervisor\" header (record it with etcdscope hypervisor --output json)")
	}
	return header, summary, nil
}

// MaxHostRecords bounds the host flushes and image writes a HostIndex
// holds, together: at HostFlushBytes each (a write takes 32), 680 MiB
// live at the cap if all are flushes. A guest flush makes one host flush
// and a few writes: the guest's cap, MaxGuestFlushes, is the same count.
const MaxHostRecords = 2 << 20

// MaxHostFiles bounds the distinct files of a host recording a HostIndex
// counts (each held once, with its counts and threads: about 700 bytes),
// reads and failed calls included, which MaxHostRecords does not count: a
// hypervisor opens its images, firmware and kernel, a few dozen files; a
// hostile recording of 600,000 paths held 424 MiB. Past it, ScanHost
// fails with ErrHostTooLarge.
const MaxHostFiles = 4096

// MaxHostThreads bounds the (file, thread) pairs a HostIndex holds to
// count each file's distinct threads (Image.Threads): QEMU does I/O from
// a few dozen threads; a hostile recording of 10.5 M distinct threads on
// one file held 335 MiB. Past it the calls of a thread not held are
// counted (Image.ThreadsNotCounted), not their threads.
const MaxHostThreads = 1 << 16

// MaxHostPath bounds a path or syscall name of a host recording, bytes:
// the hypervisor reads paths from /proc/PID/fd, which the kernel gives in
// at most a page (PATH_MAX, 4096). A longer one is no recording etcdscope
// wrote: 4,096 files of 140 KB paths held 586 MiB. Past it, ScanHost fails
// with ErrHostPathTooLong.
const MaxHostPath = 4096

// ErrHostPathTooLong is returned (wrapped, with the length) by ScanHost
// for a path or syscall name longer than MaxHostPath.
var ErrHostPathTooLong = errors.New("a path longer than PATH_MAX")

// HostFlushBytes is what a merge holds live per host flush, bytes: the
// index's HostFlush (112), the merge's copy with its mark (120), the
// clock search's offsets it proposes (8 guest flushes each, about 10 bytes
// in a set: 80), and the summary's latency and seen-set entry (about 28).
// An image write is held in 32 (its span and its path, shared).
const HostFlushBytes = 340

// ErrHostTooLarge is returned (wrapped, with the count) by ScanHost past
// MaxHostRecords.
var ErrHostTooLarge = errors.New("a host recording larger than merge holds")

// HostIndex is what a merge needs of a hypervisor recording: its header
// and summary, its flushes (fdatasync/fsync calls and io_uring fsync
// requests) and its writes to image files (their spans), and the counts
// Images makes; not the records. Paths are held once each.
type HostIndex struct {
	Header  HostHeader   // the recording's first record
	Summary *HostSummary // its last; nil if the recording was cut short

	fsyncs  []HostFlush // fdatasync/fsync calls, in the recording's order
	uring   []HostFlush // io_uring fsync requests, in the recording's order
	writes  []hostWrite
	images  imageCounter
	paths   map[string]string
	records int
	// syscalls: the distinct syscall names held, at most
	// analysis.MaxSyscallNames; the rest are analysis.MoreSyscalls.
	syscalls []string
}

// hostWrite is one write call of the hypervisor on a file.
type hostWrite struct {
	path string
	span span
}

// ScanHost reads a hypervisor recording as ReadHost does, into a
// HostIndex; past MaxHostRecords flushes and writes it fails with
// ErrHostTooLarge.
func ScanHost(r io.Reader) (*HostIndex, error) {
	x := &HostIndex{paths: map[string]string{}}
	var err error
	x.Header, x.Summary, err = scanHost(r, x.addIO, x.addFsync)
	return x, err
}

// IndexHost indexes a recording ReadHost read (without MaxHostRecords:
// its records are held already).
func IndexHost(rec HostRecording) *HostIndex {
	x := &HostIndex{Header: rec.Header, Summary: rec.Summary, paths: map[string]string{}}
	x.records = math.MinInt
	for i := range rec.IO {
		x.addIO(&rec.IO[i])
	}
	for i := range rec.Fsyncs {
		x.addFsync(&rec.Fsyncs[i])
	}
	return x
}

// path returns p, held once.
func (x *HostIndex) path(p string) string {
	if q, ok := x.paths[p]; ok {
		return q
	}
	x.paths[p] = p
	return p
}

// checkLen fails for a path or syscall name longer than MaxHostPath.
func checkLen(ss ...string) error {
	for _, s := range ss {
		if len(s) > MaxHostPath {
			return fmt.Errorf("%w: %d bytes, more than %d", ErrHostPathTooLong, len(s), MaxHostPath)
		}
	}
	return nil
}

// syscall returns name held once, or analysis.MoreSyscalls once
// analysis.MaxSyscallNames distinct names are held (a run has a few).
func (x *HostIndex) syscall(name string) string {
	if i := slices.Index(x.syscalls, name); i >= 0 {
		return x.syscalls[i]
	}
	if len(x.syscalls) < analysis.MaxSyscallNames {
		x.syscalls = append(x.syscalls, name)
		return name
	}
	return analysis.MoreSyscalls
}

// count counts one more flush or write held, failing past MaxHostRecords.
func (x *HostIndex) count() error {
	if x.records++; x.records > MaxHostRecords {
		return fmt.Errorf("%w: more than %d flushes and image writes", ErrHostTooLarge, MaxHostRecords)
	}
	return nil
}

// countFiles fails once the files counted pass MaxHostFiles (not for a
// recording IndexHost indexes: its records are held already).
func (x *HostIndex) countFiles() error {
	if len(x.images.by) > MaxHostFiles && x.records >= 0 {
		return fmt.Errorf("%w: more than %d distinct files", ErrHostTooLarge, MaxHostFiles)
	}
	return nil
}

// addIO indexes one hv_io record: the counts of its image, and the
// io_uring fsync requests and write calls a merge uses (those hostFlushes
// and imageWrites take, of any image).
func (x *HostIndex) addIO(io *HostIO) error {
	if err := checkLen(io.Path); err != nil {
		return err
	}
	x.images.addIO(io)
	if err := x.countFiles(); err != nil {
		return err
	}
	switch {
	case io.Op == "io_uring_req" && io.Opcode == ioringOpFsync && io.EndNs >= io.StartNs:
		x.uring = append(x.uring, HostFlush{Syscall: "io_uring_fsync", TID: io.TID, StartNs: io.StartNs, EndNs: io.EndNs,
			Layers: analysis.Layers{OtherNs: int64(io.EndNs - io.StartNs)}, Path: x.path(io.Path)})
	case (io.Op == "pwrite64" || io.Op == "pwritev" || io.Op == "pwritev2") && io.EndNs > io.StartNs && io.Ret >= 0:
		x.writes = append(x.writes, hostWrite{path: x.path(io.Path), span: span{io.StartNs, io.EndNs}})
	default:
		return nil
	}
	return x.count()
}

// addFsync indexes one host fsync record: the counts of its image, and
// the flush if it succeeded.
func (x *HostIndex) addFsync(f *analysis.FsyncRecord) error {
	if err := checkLen(f.Path, f.Syscall); err != nil {
		return err
	}
	x.images.addFsync(f)
	if err := x.countFiles(); err != nil {
		return err
	}
	if f.Ret != 0 || f.EndNs < f.StartNs {
		return nil
	}
	x.fsyncs = append(x.fsyncs, HostFlush{Syscall: x.syscall(f.Syscall), TID: f.TID, StartNs: f.StartNs, EndNs: f.EndNs,
		Layers: f.Layers, Flushes: f.Flushes, Path: x.path(f.Path)})
	return x.count()
}

// Images is Images of the recording's records, without formats or
// device names.
func (x *HostIndex) Images() []Image { return x.images.images(nil, nil) }

// FormatFromMagic names an image format from the file's first bytes:
// qcow2 ("QFI\xfb"), vmdk ("KDMV"), vdi, vhdx, else raw.
func FormatFromMagic(b []byte) string {
	s := string(b)
	switch {
	case strings.HasPrefix(s, "QFI\xfb"):
		return "qcow2"
	case strings.HasPrefix(s, "KDMV"):
		return "vmdk"
	case strings.HasPrefix(s, "vhdxfile"):
		return "vhdx"
	case strings.HasPrefix(s, "<<< "):
		return "vdi"
	}
	return "raw"
}

// Images summarises, per file, what the hypervisor did: the aio mode from
// the calls it used, the cache mode from the file's open flags, counts and
// bytes. Only files that were written or flushed are images (QEMU also
// reads its firmware and kernel). format and devName may be nil.
func Images(ios []HostIO, fsyncs []analysis.FsyncRecord, format func(path string) string, devName func(dev string) string) []Image {
	var c imageCounter
	for i := range ios {
		c.addIO(&ios[i])
	}
	for i := range fsyncs {
		c.addFsync(&fsyncs[i])
	}
	return c.images(format, devName)
}

// imageCounter is Images over a stream of records: per file, its counts
// and the threads seen (at most MaxHostThreads pairs in all).
type imageCounter struct {
	by      map[string]*Image
	threads map[string]map[uint32]bool
	pairs   int // (file, thread) pairs held in threads
}

// thread counts tid's call on im (path's), or counts the call in
// ThreadsNotCounted past MaxHostThreads pairs.
func (c *imageCounter) thread(path string, tid uint32, im *Image) {
	t := c.threads[path]
	switch {
	case t[tid]:
	case c.pairs < MaxHostThreads:
		t[tid] = true
		c.pairs++
	default:
		im.ThreadsNotCounted++
	}
}

func (c *imageCounter) get(path, dev, fs string) *Image {
	if c.by == nil {
		c.by, c.threads = map[string]*Image{}, map[string]map[uint32]bool{}
	}
	im, ok := c.by[path]
	if !ok {
		im = &Image{Path: path, Dev: dev, FS: fs}
		c.by[path] = im
		c.threads[path] = map[uint32]bool{}
	}
	return im
}

func (c *imageCounter) addIO(io *HostIO) {
	if io.Op == "io_uring_enter" || io.Path == "" {
		return // its fd is the ring, not a file
	}
	im := c.get(io.Path, io.Dev, io.FS)
	c.thread(io.Path, io.TID, im)
	if io.ODirect {
		im.Cache = "none"
	} else if io.ODsync && im.Cache != "none" {
		im.Cache = "writethrough"
	}
	switch io.Op {
	case "pread64", "preadv", "preadv2":
		im.Reads++
		if io.Ret > 0 {
			im.BytesRead += io.Ret
		}
	case "pwrite64", "pwritev", "pwritev2":
		im.Writes++
		if io.Ret > 0 {
			im.BytesWritten += io.Ret
		}
	case "io_submit":
		im.IOSubmits++
	case "io_uring_req":
		im.IOUringReqs++
		if io.Opcode == ioringOpFsync {
			im.Flushes++
		}
	}
}

func (c *imageCounter) addFsync(f *analysis.FsyncRecord) {
	im := c.get(f.Path, f.Dev, f.FS)
	im.Flushes++
	c.thread(f.Path, f.TID, im)
}

// images is Images of the records added; the counter stays usable.
func (c *imageCounter) images(format func(path string) string, devName func(dev string) string) []Image {
	var out []Image
	for path, im0 := range c.by {
		im := *im0
		if im.Writes == 0 && im.IOSubmits == 0 && im.IOUringReqs == 0 && im.Flushes == 0 {
			continue
		}
		switch {
		case im.IOSubmits > 0:
			im.AIO = "native"
		case im.IOUringReqs > 0:
			im.AIO = "io_uring"
		case im.Reads+im.Writes > 0:
			im.AIO = "threads"
		default:
			im.AIO = "unknown"
		}
		if im.Cache == "" {
			im.Cache = "writeback"
		}
		im.CacheFrom = CacheFromOpenFlags
		im.Threads = len(c.threads[path])
		if format != nil {
			im.Format = format(path)
		}
		if devName != nil {
			im.DevName = devName(im.Dev)
		}
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// replicatedFS are host filesystems that replicate every write themselves.
var replicatedFS = map[string]bool{"ceph": true, "nfs": true, "nfs4": true, "glusterfs": true, "ocfs2": true, "gfs2": true, "fuse.glusterfs": true, "fuse.ceph": true}

// WarningKind is a known-bad pairing of an image with its mode or the
// storage under it; render.MergeWarning words each.
type WarningKind uint8

// The known-bad pairings.
const (
	// WarnCacheUnsafe: cache=unsafe on QEMU's command line: the guest's
	// flushes never reach the host, no durability.
	WarnCacheUnsafe WarningKind = iota + 1
	// WarnNeverFlushed: written (Warning.Writes times) but never flushed
	// in the recording, its mode not on the command line: the guest did
	// not flush, or QEMU drops its flushes.
	WarnNeverFlushed
	// WarnIOUringBlockdev: aio=io_uring over a block device (LVM, raw
	// partitions: measured slower than aio=native).
	WarnIOUringBlockdev
	// WarnNativeBuffered: aio=native without O_DIRECT (io_submit blocks).
	WarnNativeBuffered
	// WarnOpaqueBelow: the image's flushes leave the kernel's block layer
	// (FUSE, network filesystems, NBD): the host split sees nothing.
	WarnOpaqueBelow
	// WarnReplicated: the image is on a replicated storage layer under
	// etcd, which already replicates every write through Raft.
	WarnReplicated
)

// Warning is one known-bad pairing of one image.
type Warning struct {
	Kind   WarningKind
	Image  string // the image's path
	Writes int    // WarnNeverFlushed: its write calls in the recording
	FS     string // the filesystem it is on
	Dev    string // the device under it (its name, or its major:minor)
}

// Warnings names the known-bad pairings among images: cache=unsafe (the
// guest's flushes never reach the host: no durability), an image written
// but never flushed whose mode the command line did not give (the same, or
// a guest that did not flush), aio=io_uring over a
// block device (LVM, raw partitions: measured slower than aio=native and
// hit by io_uring+O_DIRECT regressions on such stacks), aio=native without
// O_DIRECT (QEMU then submits synchronously: io_submit blocks), and an
// image on a replicated storage layer (ceph, rbd, drbd, NFS/GlusterFS)
// under etcd, which already replicates every write through Raft.
func Warnings(images []Image) []Warning {
	var w []Warning
	for _, im := range images {
		at := func(k WarningKind) Warning { return Warning{Kind: k, Image: im.Path, FS: im.FS, Dev: nameOr(im)} }
		switch {
		case im.Cache == "unsafe":
			w = append(w, at(WarnCacheUnsafe))
		case im.CacheFrom != CacheFromCommandLine && im.Writes+im.IOSubmits+im.IOUringReqs > 0 && im.Flushes == 0:
			nf := at(WarnNeverFlushed)
			nf.Writes = im.Writes + im.IOSubmits + im.IOUringReqs
			w = append(w, nf)
		}
		if im.AIO == "io_uring" && im.FS == "blockdev" {
			w = append(w, at(WarnIOUringBlockdev))
		}
		if im.AIO == "native" && im.Cache != "none" {
			w = append(w, at(WarnNativeBuffered))
		}
		if opaqueBelow(im) {
			w = append(w, at(WarnOpaqueBelow))
		}
		if replicatedFS[im.FS] || strings.HasPrefix(im.DevName, "rbd") || strings.HasPrefix(im.DevName, "drbd") {
			w = append(w, at(WarnReplicated))
		}
	}
	return w
}

// opaqueBelow: an image whose host flush ends outside this kernel's block
// layer (FUSE, network filesystems, an NBD device), where the host split
// has nothing to follow.
func opaqueBelow(im Image) bool {
	for _, p := range []string{"fuse", "nfs", "cifs", "smb", "9p", "virtiofs", "ceph", "glusterfs"} {
		if strings.HasPrefix(im.FS, p) {
			return true
		}
	}
	return strings.HasPrefix(im.DevName, "nbd")
}

func nameOr(im Image) string { return im.DeviceName() }

// DeviceName is the device under the image: its kernel name, or its
// major:minor when the name is not known.
func (im Image) DeviceName() string {
	if im.DevName != "" {
		return im.DevName
	}
	return im.Dev
}
