package pipeline

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
)

// HypervisorSource yields the hypervisor tracer's events
// (tracer.HypervisorTracer).
type HypervisorSource interface {
	Read(ev *event.HypervisorIO) error
}

// HostIOSink receives every finished hypervisor I/O record (the hv_io
// record of docs/merge.md); rec is valid only during the call. An error
// ends Run with it.
type HostIOSink interface {
	HostIO(rec *merge.HostIO) error
}

// HypervisorConfig says where a Hypervisor pipeline's names come from and
// where its records go.
type HypervisorConfig struct {
	Host          Host // nil: LiveHost()
	Sinks         []HostIOSink
	OnDecodeError func(error)
}

// Hypervisor is the hypervisor tracer's data path: each read, write,
// submission or flush on an image file, named (its path through Host, as
// an fsync's), as a merge.HostIO to the sinks, with the same error policy
// as the other paths.
type Hypervisor struct {
	cfg     HypervisorConfig
	host    Host
	decErrs atomic.Uint64
}

// NewHypervisor returns a pipeline for cfg.
func NewHypervisor(cfg HypervisorConfig) *Hypervisor {
	p := &Hypervisor{cfg: cfg, host: cfg.Host}
	if p.host == nil {
		p.host = LiveHost()
	}
	return p
}

// DecodeErrors returns how many records the source could not decode.
func (p *Hypervisor) DecodeErrors() uint64 { return p.decErrs.Load() }

// Run reads src until it ends (nil), a sink fails, or the source fails
// maxConsecutiveErrors times in a row (that error).
func (p *Hypervisor) Run(src HypervisorSource) error {
	return run(src.Read, &p.decErrs, p.cfg.OnDecodeError, func(e *event.HypervisorIO) (bool, error) {
		fe := event.Fsync{PID: e.PID, FD: e.FD, Dev: e.Dev, Ino: e.Ino, IsBlockdev: e.IsBlockdev, Names: e.Names}
		rec := merge.HostIO{Type: "hv_io", V: merge.SchemaVersion, Op: e.Op.String(), PID: e.PID, TID: e.TID,
			Comm: e.Comm, FD: e.FD, Path: p.host.Path(&fe), Dev: e.Dev.String(), Ino: e.Ino, FS: e.FSType,
			ODirect: e.ODirect, ODsync: e.ODsync || e.OSync, Opcode: e.Opcode, Nr: e.Nr,
			StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret}
		if e.IsBlockdev {
			rec.FS = "blockdev"
		}
		for _, s := range p.cfg.Sinks {
			if err := s.HostIO(&rec); err != nil {
				return false, err
			}
		}
		return false, nil
	})
}

// HostIOKeeper is the sink of both of the hypervisor view's pipelines
// (the fsync loop's flushes and the Hypervisor's I/O): it keeps the
// records for the summary (Images) and hands each to Emit as it comes
// (one lock: Emit may share one encoder). Read IOs and Fsyncs once the
// pipelines are done.
type HostIOKeeper struct {
	Emit   func(any) error
	IOs    []merge.HostIO
	Fsyncs []analysis.FsyncRecord
	mu     sync.Mutex
	// drives: the image files and cache modes of each hypervisor
	// process's command line, read when the process is first seen (it may
	// be gone by the summary); cmdlines bounds how many are read.
	seen   map[uint32]bool
	drives []merge.DriveCache
}

// maxHypervisorCmdlines bounds the command lines one run reads (one per
// hypervisor process seen doing I/O).
const maxHypervisorCmdlines = 256

// Fsync keeps rec (FsyncSink).
func (s *HostIOKeeper) Fsync(rec *analysis.FsyncRecord) error {
	return keep(s, &s.Fsyncs, rec, rec.PID)
}

// HostIO keeps rec (HostIOSink).
func (s *HostIOKeeper) HostIO(rec *merge.HostIO) error { return keep(s, &s.IOs, rec, rec.PID) }

// keep appends rec of process pid to list, reads pid's command line the
// first time, and emits rec, under s's lock.
func keep[T any](s *HostIOKeeper, list *[]T, rec *T, pid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	*list = append(*list, *rec)
	s.readCmdline(pid)
	return s.Emit(rec)
}

// readCmdline reads a hypervisor's -drive/-blockdev cache modes once per
// process: the only record of cache=unsafe, which the image's open flags
// show as writeback.
func (s *HostIOKeeper) readCmdline(pid uint32) {
	if s.seen == nil {
		s.seen = map[uint32]bool{}
	}
	if s.seen[pid] || len(s.seen) >= maxHypervisorCmdlines {
		return
	}
	s.seen[pid] = true
	if argv, cwd, err := host.Cmdline(pid); err == nil {
		s.drives = append(s.drives, merge.ParseQEMUCmdline(argv, cwd)...)
	}
}

// Images are the images the run's records name, each with its format
// (read from its first bytes), its device's name on this machine and the
// cache modes of the hypervisor command lines that open it
// (merge.Images, merge.ApplyDriveCaches).
func (s *HostIOKeeper) Images() []merge.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	devs := host.NewDeviceResolver()
	images := merge.Images(s.IOs, s.Fsyncs, imageFormat, func(dev string) string {
		var maj, min uint32
		if _, err := fmt.Sscanf(dev, "%d:%d", &maj, &min); err != nil {
			return ""
		}
		return devs.Resolve(event.MkDev(maj, min)).Name
	})
	merge.ApplyDriveCaches(images, s.drives)
	return images
}

// imageFormat reads the image's first bytes (the hypervisor's own open
// flags say nothing of the format).
func imageFormat(path string) string {
	fh, err := safefile.OpenInput(path) // a FIFO the hypervisor holds must not block us
	if err != nil {
		return ""
	}
	defer fh.Close()
	b := make([]byte, 8)
	n, _ := io.ReadFull(fh, b)
	return merge.FormatFromMagic(b[:n])
}
