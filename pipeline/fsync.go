package pipeline

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
)

// FsyncSource yields the fsync tracer's events in ring-buffer order:
// tracer.FsyncTracer, or a capture.Reader through ReadFunc. Read decodes
// the next event into ev; tracer.ErrClosed, tracer.ErrDrained and io.EOF
// end the stream, any other error is one record lost to decoding.
type FsyncSource interface {
	Read(ev *event.Any) error
}

// ReadFunc adapts a read method to FsyncSource, e.g.
// ReadFunc(tr.ReadEvent) or ReadFunc(capReader.ReadEvent).
type ReadFunc func(ev *event.Any) error

// Read calls f.
func (f ReadFunc) Read(ev *event.Any) error { return f(ev) }

// FsyncSink receives every finished fsync record (attributed, named, its
// file kind set). rec and what it points to are valid only during the
// call. An error ends Run with it.
type FsyncSink interface {
	Fsync(rec *analysis.FsyncRecord) error
}

// BlockSink is an FsyncSink that also wants the final completion of each
// block request that persists a disk's cache (event.Block.IsFlush), with
// the disk's kernel name ("" when it has none); serve's flush-latency
// histogram is one.
type BlockSink interface {
	Block(b *event.Block, diskName string)
}

// WriteSink is an FsyncSink that also wants the write(2)-family records
// (tracer's FsyncConfig.Writes), named and labelled as fsyncs are. rec is
// valid only during the call.
type WriteSink interface {
	Write(rec *analysis.WriteRecord) error
}

// FsyncLoopConfig says where an FsyncLoop's names come from and where its
// records go.
type FsyncLoopConfig struct {
	Host Host // nil: LiveHost()
	// Disk, if set, keeps only records whose disks include it (fsync --dev).
	Disk event.Dev
	// Sinks receive every record, in order.
	Sinks []FsyncSink
	// Capture, if set, records every event handled and the host answers it
	// needed (fsync --capture).
	Capture *capture.Writer
	// OnDecodeError, if set, is called for each record the source could
	// not decode (the loop goes on).
	OnDecodeError func(error)
	// FileKind labels a record by its path; nil: analysis.FileKind
	// (etcd's data directory layout).
	FileKind func(path string) string
	// Sched: the source carries event.Sched (the tracer's
	// FsyncConfig.Sched), so records get their scheduler split.
	Sched bool
}

// FsyncLoop is the fsync tracer's data path. Run it on one goroutine;
// StopAfter and DecodeErrors may be called from others.
type FsyncLoop struct {
	cfg     FsyncLoopConfig
	host    Host
	rec     *recordingHost // non-nil with a capture
	attr    *analysis.Attributor
	disk    string
	blocks  []BlockSink
	writes  []WriteSink
	stopNs  atomic.Uint64
	decErrs atomic.Uint64
	records atomic.Uint64
	// cur and curWrite hold the record being handed to the sinks: a
	// local would escape to the heap through the sinks' interface calls,
	// one allocation of a ~1 KB record per call (and the GC's work for
	// it), 7% of the reader's CPU at 10k fsync/s on tmpfs.
	cur      analysis.FsyncRecord
	curWrite analysis.WriteRecord
}

// NewFsyncLoop returns the loop for cfg.
func NewFsyncLoop(cfg FsyncLoopConfig) *FsyncLoop {
	p := &FsyncLoop{cfg: cfg, host: cfg.Host}
	if p.host == nil {
		p.host = LiveHost()
	}
	if cfg.Capture != nil {
		p.rec = &recordingHost{Host: p.host, w: cfg.Capture, devs: map[event.Dev]bool{}, backing: map[event.Dev]bool{}}
		p.host = p.rec
	}
	if cfg.Disk != 0 {
		p.disk = cfg.Disk.String()
	}
	for _, s := range cfg.Sinks {
		if b, ok := s.(BlockSink); ok {
			p.blocks = append(p.blocks, b)
		}
		if w, ok := s.(WriteSink); ok {
			p.writes = append(p.writes, w)
		}
	}
	p.attr = analysis.NewAttributor(func(d event.Dev) (string, []event.Dev) {
		v := p.host.Device(d)
		return v.Name, v.Disks
	})
	p.attr.SetSched(cfg.Sched)
	p.attr.SetBackingLookup(func(disk event.Dev) (analysis.Backing, bool) {
		b := p.host.Backing(disk)
		return analysis.Backing{Dev: b.Dev, Ino: b.Ino, Path: b.Path, FS: b.FS}, b.OK
	})
	return p
}

// StopAfter makes Run return at the first fsync that began after ns
// (CLOCK_MONOTONIC): the calls that ended before the drain started are
// already in the ring buffer, later ones are left out.
func (p *FsyncLoop) StopAfter(ns uint64) { p.stopNs.Store(ns) }

// Overflow returns the attribution's enters and partial completions not
// held (analysis.Attributor.Overflow); call it after Run.
func (p *FsyncLoop) Overflow() (enters, partials uint64) { return p.attr.Overflow() }

// DecodeErrors returns how many records the source could not decode.
func (p *FsyncLoop) DecodeErrors() uint64 { return p.decErrs.Load() }

// Records returns how many records went to the sinks.
func (p *FsyncLoop) Records() uint64 { return p.records.Load() }

// Run reads src until it ends (nil), a sink or the capture fails, or the
// source fails maxConsecutiveErrors times in a row (that error).
func (p *FsyncLoop) Run(src FsyncSource) error {
	return run(src.Read, &p.decErrs, p.cfg.OnDecodeError, p.handle)
}

// handle runs one event through the path; stop is true at the first fsync
// after StopAfter's time. ev is the loop's one value, reused: the
// tracer's read allocates nothing per event.
func (p *FsyncLoop) handle(ev *event.Any) (stop bool, err error) {
	if ev.Kind == event.KindWrite {
		return p.write(ev)
	}
	if ev.Kind != event.KindFsync && ev.Kind != event.KindFsyncKPart {
		p.attr.AddEvent(ev)
		if ev.Kind == event.KindBlock && ev.Block.Final && len(p.blocks) > 0 && ev.Block.IsFlush() {
			name := p.host.Device(ev.Block.Dev).Name
			for _, s := range p.blocks {
				s.Block(&ev.Block, name)
			}
		}
		return false, p.capture(ev, "")
	}
	fe := &ev.Fsync
	if s := p.stopNs.Load(); s != 0 && fe.StartNs > s {
		return true, nil
	}
	switch {
	case ev.Kind == event.KindFsyncKPart && ev.KPart.Reason != event.KPartOK:
		// The kernel could not partition it and wrote no raw records to
		// attribute it from: counted in the tracer's Lost (its
		// Unpartitioned), not a record of zero time.
		return false, nil
	case ev.Kind == event.KindFsyncKPart:
		p.cur = p.attr.AttributeKPart(*fe, &ev.KPart)
	default:
		p.cur = p.attr.Attribute(*fe)
	}
	rec := &p.cur
	if p.disk != "" && !slices.Contains(rec.Disks, p.disk) {
		return false, p.capture(ev, "")
	}
	rec.Path = p.host.Path(fe)
	rec.FileKind = p.fileKind(rec.Path)
	if err := p.capture(ev, rec.Path); err != nil {
		return false, err
	}
	p.records.Add(1)
	for _, s := range p.cfg.Sinks {
		if err := s.Fsync(rec); err != nil {
			return false, err
		}
	}
	return false, nil
}

// write names one write call and hands its record to the WriteSinks;
// stop as for an fsync.
func (p *FsyncLoop) write(ev *event.Any) (stop bool, err error) {
	c := &ev.Write.Call
	if s := p.stopNs.Load(); s != 0 && c.StartNs > s {
		return true, nil
	}
	p.curWrite = p.attr.AttributeWrite(&ev.Write)
	rec := &p.curWrite
	if p.disk != "" && !slices.Contains(rec.Disks, p.disk) {
		return false, p.capture(ev, "")
	}
	rec.Path = p.host.Path(c)
	rec.FileKind = p.fileKind(rec.Path)
	if err := p.capture(ev, rec.Path); err != nil {
		return false, err
	}
	for _, s := range p.writes {
		if err := s.Write(rec); err != nil {
			return false, err
		}
	}
	return false, nil
}

// fileKind labels a record's file by its path.
func (p *FsyncLoop) fileKind(path string) string {
	if p.cfg.FileKind != nil {
		return p.cfg.FileKind(path)
	}
	return analysis.FileKind(path)
}

func (p *FsyncLoop) capture(ev *event.Any, path string) error {
	if p.cfg.Capture == nil {
		return nil
	}
	if p.rec.err != nil {
		return fmt.Errorf("capture: %w", p.rec.err)
	}
	return p.cfg.Capture.Event(ev, path)
}
