package pipeline

import (
	"sync/atomic"

	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/event"
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
