package analysis

import (
	"hash/maphash"
	"maps"
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// Stacked levels (LevelRow.Level), named by their role in one kernel's
// storage stack, not numbered: virtualization numbers levels from the
// bare-metal host up (L0 the host, L1 its guest, L2 a nested guest), so
// numbers here would read as guests (issue 26).
const (
	// LevelUpper: the filesystem the caller fsyncs on (over a loop or a
	// device-mapper device).
	LevelUpper = "upper"
	// LevelBacking: the fsyncs the loop driver made of its backing file,
	// on the filesystem under the loop device, for upper's flushes.
	LevelBacking = "backing"
	// LevelDM: per upper fsync, the time a device-mapper target held the
	// call's bios (FS "dm").
	LevelDM = "dm"
	// LevelLower: per upper fsync, the requests on the disks beneath the
	// device-mapper device (FS "disk").
	LevelLower = "lower"
)

// LevelNames lists the levels in table order.
var LevelNames = []string{LevelUpper, LevelBacking, LevelDM, LevelLower}

// UntracedReason says why a stacked level has no numbers (LevelRow.Untraced).
type UntracedReason string

const (
	// UntracedBackingFS: the loop driver's fsyncs of its backing file come
	// from a kernel thread, and only ext4's sync_file tracepoints show a
	// kernel thread's fsync; the backing file is on another filesystem
	// (LevelRow.FS), so the flushes' time stays in upper's device_flush.
	UntracedBackingFS UntracedReason = "backing_fs_unseen"
)

// LevelRow is one row of the stacked-device table, in the shape people
// publish for nested storage: one row per level and device (LevelUpper,
// the filesystem the application fsyncs on; LevelBacking, the filesystem
// under its loop device; or, on a device-mapper device, LevelDM, the dm
// target, FS "dm", and LevelLower, the disks beneath it, FS "disk").
type LevelRow struct {
	Level  string `json:"level"`  // LevelUpper, LevelBacking, LevelDM or LevelLower
	Device string `json:"device"` // kernel name, e.g. loop0, vda, dm-0
	FS     string `json:"fs"`
	// Total: the level's own fsyncs (upper, backing), or per upper fsync
	// the time its dm target held its bios (dm) or its requests took on
	// the disks beneath (lower); with upper's own layers these sum to
	// upper's total.
	Total stats.Summary `json:"total_ns"`
	// FlushesPerFsync counts this level's flush requests per upper fsync.
	FlushesPerFsync float64     `json:"flushes_per_fsync"`
	Layers          []LayerStat `json:"layers"`
	// NestedShare is, for backing, the share of upper's device-flush time
	// that the backing file's fsyncs account for (the rest is the loop
	// driver's own work and queueing between the two levels).
	NestedShare float64 `json:"nested_share,omitempty"`
	// Untraced, on a backing row, says why the level has no numbers: the
	// loop device's backing file is on a filesystem whose fsyncs the
	// backing level cannot see (HostLevelTraced): UntracedBackingFS.
	// Device is then the loop disk (major:minor), FS the backing file's
	// filesystem.
	Untraced UntracedReason `json:"untraced,omitempty"`
	// UntracedDropped, when not 0, marks the one backing row after the
	// untraced ones that counts the flush requests on untraced (disk,
	// filesystem) pairs past the MaxUntracedLevels listed: those pairs
	// are not named.
	UntracedDropped int64 `json:"untraced_dropped,omitempty"`
	// Folded, when not 0, marks the one row of its level that sums the
	// devices past MaxLevelRows (Device and FS empty): how many, at most
	// MaxFoldedDevices (which means that many or more).
	Folded int64 `json:"folded_devices,omitempty"`
}

// levelV1 maps a row of a version 1 summary, whose levels were numbered
// from the top of one kernel's stack, to the role that replaced its name:
// "L1" upper; "L2" backing, or dm where FS is "dm" (a folded row: where the
// dm layer holds all its time; version 1 folded loop and dm devices
// together); "L3" lower. Its untraced sentence, the one reason version 1
// wrote, becomes UntracedBackingFS.
func (r *LevelRow) levelV1() {
	switch r.Level {
	case "L1":
		r.Level = LevelUpper
	case "L2":
		r.Level = LevelBacking
		if r.FS == "dm" || r.Folded > 0 && onlyDM(r.Layers) {
			r.Level = LevelDM
		}
	case "L3":
		r.Level = LevelLower
	}
	if r.Untraced != "" {
		r.Untraced = UntracedBackingFS
	}
}

// onlyDM says whether the dm layer holds all of layers' time, and some.
func onlyDM(layers []LayerStat) bool {
	dm := false
	for _, l := range layers {
		switch {
		case l.Stats.Sum == 0:
		case l.Name == LayerDM:
			dm = true
		default:
			return false
		}
	}
	return dm
}

// MaxLevelRows bounds the devices each level of the stacked table keeps
// apart: a stack has a few (a loop device and its host filesystem; a dm
// device and its disks), and a hostile recording of 50,000 dm devices
// held 457 MiB (its page 841 MiB). Past it the device with the fewest upper
// fsyncs is folded into one row of its level (LevelRow.Folded), as a
// report's groups are (MaxGroups).
const MaxLevelRows = 16

// BuildLevels returns the per-level table for records whose flushes nested
// host-level fsyncs (Request.Host) or that ran on a device-mapper device
// (FsyncRecord.DM), or nil when none did.
func BuildLevels(recs []FsyncRecord) []LevelRow {
	l := newLevelsAcc(nil)
	for i := range recs {
		l.add(&recs[i])
	}
	return l.rows()
}

// levelsAcc accumulates BuildLevels' table one record at a time.
type levelsAcc struct {
	upper, backing, dm, lower *levelSet
	any                       bool
	untraced                  map[[2]string]bool // {loop disk, backing filesystem} without a backing level
	// untracedDropped: flush requests on pairs past MaxUntracedLevels.
	untracedDropped int64
	budget          *stats.Budget // the exact values of every row's series
}

type levelAcc struct {
	dev, fs string
	totals  stats.Series
	layers  [numLayers]stats.Series // in LayerNames order
	flushes int64
	uppers  int64 // upper fsyncs these rows belong to
	nested  int64 // backing: its fsyncs' time nested
	flushNs int64 // backing: upper's device-flush time it nests in
}

// newLevelsAcc returns an empty table whose rows' series are bound to
// budget (nil: each bounded by stats.ExactLimit alone).
func newLevelsAcc(budget *stats.Budget) *levelsAcc {
	return &levelsAcc{upper: newLevelSet(), backing: newLevelSet(), dm: newLevelSet(), lower: newLevelSet(), budget: budget}
}

// made returns a with its series bound to l's budget.
func (l *levelsAcc) made(a *levelAcc) *levelAcc {
	a.totals.Bind(l.budget)
	for _, x := range seriesOf(a.layers[:]) {
		x.Bind(l.budget)
	}
	return a
}

// levelSet is one level's rows by device, at most MaxLevelRows apart and
// the rest folded into other.
type levelSet struct {
	m      map[string]*levelAcc
	other  *levelAcc // nil until a device is folded
	folded int64     // distinct devices folded (LevelRow.Folded)
	// foldedKeys: the hashes of the devices folded, so that one folded,
	// seen again (a row of its own) and folded again counts once; at most
	// MaxFoldedDevices, past which no fold is counted.
	foldedKeys map[uint64]struct{}
	seed       maphash.Seed
}

// MaxFoldedDevices bounds the folded devices a level remembers to count
// each once (16 bytes each: 1 MiB). Past it a fold is not counted, since
// the device may be one folded before: LevelRow.Folded is then a lower
// bound, MaxFoldedDevices, shown as "or more" (it counted every fold, and
// 70,000 dm devices seen twice said 74,433 devices folded).
const MaxFoldedDevices = 1 << 16

func newLevelSet() *levelSet {
	return &levelSet{m: map[string]*levelAcc{}, foldedKeys: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
}

// countFolded counts device key k folded, once however often it is, while
// the level remembers fewer than MaxFoldedDevices.
func (s *levelSet) countFolded(k string) {
	h := maphash.String(s.seed, k)
	if _, ok := s.foldedKeys[h]; ok {
		return
	}
	if len(s.foldedKeys) < MaxFoldedDevices {
		s.foldedKeys[h] = struct{}{}
		s.folded++
	}
}

func (l *levelsAcc) get(s *levelSet, dev, fs string) *levelAcc {
	k := dev + "\x00" + fs
	if a := s.m[k]; a != nil {
		return a
	}
	if len(s.m) >= MaxLevelRows {
		var vk string
		var v *levelAcc
		for k, a := range s.m { // the fewest upper fsyncs, then calls; the least key of equals
			if v == nil || a.uppers < v.uppers || a.uppers == v.uppers && (a.totals.Count() < v.totals.Count() || a.totals.Count() == v.totals.Count() && k < vk) {
				vk, v = k, a
			}
		}
		if s.other == nil {
			s.other = l.made(&levelAcc{})
		}
		s.other.fold(v)
		s.countFolded(vk)
		delete(s.m, vk)
	}
	a := l.made(&levelAcc{dev: dev, fs: fs})
	s.m[k] = a
	return a
}

// fold adds f's calls to a's.
func (a *levelAcc) fold(f *levelAcc) {
	a.totals.Absorb(&f.totals)
	mergeSeries(a.layers[:], f.layers[:])
	a.flushes += f.flushes
	a.uppers += f.uppers
	a.nested += f.nested
	a.flushNs += f.flushNs
}

func (a *levelAcc) add(r *FsyncRecord) {
	a.addLayers(r.TotalNs, r.Layers)
	a.flushes += int64(r.Flushes)
}

func (a *levelAcc) addLayers(total int64, l Layers) {
	a.totals.Add(total)
	for i, v := range l.values() {
		a.layers[i].Add(v)
	}
}

// addDM adds the levels of a call on a device-mapper device: upper the
// call, dm the target's hold, lower the requests of the disks beneath.
func (l *levelsAcc) addDM(r *FsyncRecord) {
	l.any = true
	a := l.get(l.upper, r.DevName, r.FS)
	a.add(r)
	a.uppers++
	dm := r.DM
	name := dm.DevName
	if name == "" {
		name = dm.Dev
	}
	b := l.get(l.dm, name, "dm")
	b.addLayers(dm.HeldNs, Layers{DMNs: dm.HeldNs})
	b.uppers++
	c := l.get(l.lower, dm.Beneath(), "disk")
	c.addLayers(dm.Lower.Sum(), dm.Lower)
	c.uppers++
	for _, q := range r.Requests {
		if q.Role == RoleFlush && !q.DM {
			c.flushes++
		} else if q.Role == RoleFlush {
			b.flushes++
		}
	}
}

func (l *levelsAcc) add(r *FsyncRecord) {
	if r.DM != nil {
		l.addDM(r)
		return
	}
	hasHost := false
	for _, q := range r.Requests {
		if len(q.Host) > 0 {
			hasHost = true
		}
		if q.HostUntraced != "" {
			k := [2]string{q.Dev, q.HostUntraced}
			switch {
			case l.untraced[k]:
			case len(l.untraced) < MaxUntracedLevels:
				if l.untraced == nil {
					l.untraced = map[[2]string]bool{}
				}
				l.untraced[k] = true
			default:
				l.untracedDropped++
			}
		}
	}
	if !hasHost {
		return
	}
	l.any = true
	a := l.get(l.upper, r.DevName, r.FS)
	a.add(r)
	a.uppers++
	seen := map[string]bool{}
	for _, q := range r.Requests {
		for j := range q.Host {
			h := &q.Host[j]
			b := l.get(l.backing, h.DevName, h.FS)
			b.add(h)
			b.nested += h.TotalNs
			if k := h.DevName + "\x00" + h.FS; !seen[k] {
				seen[k] = true
				b.uppers++
				b.flushNs += r.Layers.DeviceFlushNs
			}
		}
	}
}

// MaxUntracedLevels bounds the untraced (disk, filesystem) pairs a report
// lists; the flush requests on the rest are counted
// (LevelRow.UntracedDropped).
const MaxUntracedLevels = 16

func (l *levelsAcc) rows() []LevelRow {
	if !l.any && len(l.untraced) == 0 {
		return nil
	}
	var nUpper int64
	for _, a := range l.upper.m {
		nUpper += a.uppers
	}
	if l.upper.other != nil {
		nUpper += l.upper.other.uppers
	}
	rows := func(level string, s *levelSet, upperCount int64) []LevelRow {
		var out []LevelRow
		accs := slices.Collect(maps.Values(s.m))
		if s.other != nil {
			accs = append(accs, s.other)
		}
		for _, a := range accs {
			row := LevelRow{Level: level, Device: a.dev, FS: a.fs, Total: a.totals.Summary()}
			if a == s.other {
				row.Folded = s.folded
			}
			for i, n := range LayerNames {
				st := a.layers[i].Summary()
				if n == LayerDM && st.Sum == 0 {
					continue
				}
				share := 0.0
				if row.Total.Sum > 0 {
					share = float64(st.Sum) / float64(row.Total.Sum)
				}
				row.Layers = append(row.Layers, LayerStat{Name: n, Stats: st, Share: share})
			}
			n := a.uppers
			if upperCount > 0 {
				n = upperCount
			}
			if n > 0 {
				row.FlushesPerFsync = float64(a.flushes) / float64(n)
			}
			if level == LevelBacking && a.flushNs > 0 {
				row.NestedShare = float64(a.nested) / float64(a.flushNs)
			}
			out = append(out, row)
		}
		sort.Slice(out, func(i, j int) bool {
			if fi, fj := out[i].Folded > 0, out[j].Folded > 0; fi != fj {
				return fj // the folded row last
			}
			return out[i].Device < out[j].Device
		})
		return out
	}
	out := rows(LevelUpper, l.upper, 0)
	out = append(out, rows(LevelBacking, l.backing, nUpper)...)
	out = append(out, rows(LevelDM, l.dm, nUpper)...)
	out = append(out, rows(LevelLower, l.lower, nUpper)...)
	var un []LevelRow
	for k := range l.untraced {
		un = append(un, LevelRow{Level: LevelBacking, Device: k[0], FS: k[1], Untraced: UntracedBackingFS})
	}
	sort.Slice(un, func(i, j int) bool { return un[i].Device+un[i].FS < un[j].Device+un[j].FS })
	if l.untracedDropped > 0 {
		un = append(un, LevelRow{Level: LevelBacking, UntracedDropped: l.untracedDropped})
	}
	return append(out, un...)
}
