package pipeline

import (
	"fmt"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// Host answers the questions the attribution asks about the machine:
// which disks serve a filesystem device and what the kernel calls them,
// which file backs a loop device, and the path of an fsync's file. The
// live answers come from sysfs and /proc (LiveHost); a replay gets the
// answers the live run recorded (ReplayHost).
type Host interface {
	// Device returns the name and whole disks of device d.
	Device(d event.Dev) capture.Device
	// Backing returns the file under disk when disk is a loop device
	// (OK false otherwise).
	Backing(disk event.Dev) capture.Backing
	// Path returns the path of the file the fsync f was for.
	Path(f *event.Fsync) string
}

// liveHost is LiveHost's implementation. Not safe for concurrent use (the
// pipeline calls it from its one loop).
type liveHost struct {
	devs  *host.DeviceResolver
	paths *host.PathResolver
}

// LiveHost returns a Host reading this machine's /sys and /proc
// (host.DeviceResolver, host.PathResolver); answers about devices are
// cached for the run: a loop device re-bound while tracing keeps its first
// answer.
func LiveHost() Host {
	return &liveHost{devs: host.NewDeviceResolver(), paths: host.NewPathResolver()}
}

func (h *liveHost) Device(d event.Dev) capture.Device {
	info := h.devs.Resolve(d)
	return capture.Device{Dev: d, Name: info.Name, Disks: info.Disks, DiskNames: info.DiskNames}
}

func (h *liveHost) Backing(disk event.Dev) capture.Backing {
	b, ok := h.devs.Backing(disk)
	if !ok {
		return capture.Backing{Disk: disk}
	}
	return capture.Backing{Disk: disk, OK: true, Path: b.Path, Dev: b.Dev, Ino: b.Ino, FS: b.FS}
}

func (h *liveHost) Path(f *event.Fsync) string { return h.paths.Path(f) }

// ReplayHost returns the Host of a capture: the answers its live run
// recorded. A device the run never asked about has no name and no disks.
func ReplayHost(r *capture.Reader) Host { return replayHost{r} }

type replayHost struct{ r *capture.Reader }

func (h replayHost) Device(d event.Dev) capture.Device {
	v, ok := h.r.Device(d)
	if !ok {
		return capture.Device{Dev: d}
	}
	return v
}

func (h replayHost) Backing(disk event.Dev) capture.Backing {
	v, _ := h.r.Backing(disk)
	v.Disk = disk
	return v
}

func (h replayHost) Path(*event.Fsync) string { return h.r.Path() }

// recordingHost passes a Host's answers on and writes each device and
// backing answer to a capture the first time it is given, before the
// event whose handling asked for it.
type recordingHost struct {
	Host
	w       *capture.Writer
	devs    map[event.Dev]bool
	backing map[event.Dev]bool
	err     error // the first capture write error
}

func (h *recordingHost) Device(d event.Dev) capture.Device {
	v := h.Host.Device(d)
	if !h.devs[d] {
		h.devs[d] = true
		if err := h.w.Device(v); err != nil && h.err == nil {
			h.err = err
		}
	}
	return v
}

func (h *recordingHost) Backing(disk event.Dev) capture.Backing {
	v := h.Host.Backing(disk)
	if !h.backing[disk] {
		h.backing[disk] = true
		if err := h.w.Backing(v); err != nil && h.err == nil {
			h.err = err
		}
	}
	return v
}

// LiveDiskCaches fills the write cache mode and FUA support of each of
// r's disks from this machine's sysfs (host.DeviceResolver.WriteCache); a
// disk gone since (or unreadable) keeps them empty: unknown.
func LiveDiskCaches(r *analysis.Report) {
	res := host.NewDeviceResolver()
	for i := range r.Disks {
		d := &r.Disks[i]
		var maj, min uint32
		if _, err := fmt.Sscanf(d.Dev, "%d:%d", &maj, &min); err != nil {
			continue
		}
		if c, err := res.WriteCache(event.MkDev(maj, min)); err == nil {
			d.Name, d.WriteCache, d.FUA = c.Name, c.WriteCache, c.FUA
		}
	}
}

// LiveJournals fills r.Journals for its ext4 groups from this machine's
// /proc/fs/jbd2 (host.DeviceResolver.JBD2Journals): whether each group's
// device holds a jbd2 journal. Unreadable: left unknown.
func LiveJournals(r *analysis.Report) {
	names, err := host.NewDeviceResolver().JBD2Journals()
	if err != nil {
		return
	}
	var known []analysis.Journal
	for _, g := range r.Groups {
		if g.Key.FS == "ext4" && g.Key.DevName != "" {
			known = append(known, analysis.Journal{Dev: g.Key.Dev, Name: g.Key.DevName, JBD2: names[g.Key.DevName]})
		}
	}
	r.SetJournals(known)
}
