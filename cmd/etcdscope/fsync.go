package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["fsync"] = subcommand{
		summary: "split every fsync/fdatasync into its layers: data writeback, journal, device flush, block queue, dm (device-mapper), other",
		run:     runFsync,
	}
}

type fsyncFlags struct {
	comm, cgroup, dev, output, wl, dir, readyFile string
	capture                                       string
	pid, qemu                                     int
	duration, interval, minLatency                time.Duration
	rate                                          float64
	ringBytes                                     uint64
	failOverBudget, writes, sched                 bool
	kernelPartition                               bool
}

// writesUsage is --writes' help in fsync and serve: what it adds, and
// why it is off by default (its cost, bench/findings.md).
const writesUsage = "also split write(2) and its kin on the fsynced files into throttled, writeback_wait and other (+1-1.5 µs BPF per fsync)"

// schedUsage is --sched's help: what it adds, and why it is off by
// default.
const schedUsage = "also split each call's \"other\" time into runnable, running and blocked (runs at every context switch: +50-80% BPF)"

// kernelPartitionUsage is --kernel-partition's help.
const kernelPartitionUsage = "one kernel record per ext4 call on a plain disk (with --dev, or --workload on ext4): no per-request records, requests without sector (docs/performance.md #33)"

func runFsync(args []string) error {
	var f fsyncFlags
	fs := newFlagSet("fsync")
	fs.SortFlags = false
	fs.StringVar(&f.comm, "comm", "", "trace only tasks with this comm, e.g. etcd (may not exist yet: it waits)")
	fs.IntVar(&f.pid, "pid", 0, "trace only this process id")
	fs.StringVar(&f.cgroup, "cgroup", "", "trace only tasks in this cgroup v2 directory, e.g. /sys/fs/cgroup/system.slice/etcd.service")
	fs.StringVar(&f.dev, "dev", "", "only fsyncs and block requests on this disk, e.g. vda or nvme0n1 (all ext4: ext4's tracepoints, cheaper; docs/performance.md #10)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (0: until Ctrl-C; with --workload: 10s)")
	fs.DurationVar(&f.interval, "interval", time.Second, "print a summary line this often (0: never)")
	fs.StringVar(&f.output, "output", "table", "table, or json (JSON Lines: one object per fsync, then a summary; see docs/schema.md)")
	fs.DurationVar(&f.minLatency, "min-latency", 0, "with --output json, print only fsyncs at least this slow (the summary still covers all)")
	fs.StringVar(&f.wl, "workload", "", "run a built-in writer and trace it: wal (etcd-WAL-like 2300-byte appends + fdatasync)")
	fs.StringVar(&f.dir, "dir", "", "directory for --workload: a private one (0700) is made in it and removed at exit (default: in /var/tmp)")
	fs.Float64Var(&f.rate, "rate", 0, "with --workload: appends per second (0: as fast as fdatasync returns)")
	fs.StringVar(&f.readyFile, "ready-file", "", "create this file once every probe is attached (for scripts and tests)")
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultRingBytes, ringSizeUsage)
	fs.StringVar(&f.capture, "capture", "", "also record the decoded kernel events and the host facts the attribution used to this file (schema capture/v2), for 'etcdscope report FILE' to replay anywhere")
	fs.BoolVar(&f.failOverBudget, "fail-over-budget", false, failOverBudgetUsage)
	fs.BoolVar(&f.writes, "writes", false, writesUsage)
	fs.BoolVar(&f.sched, "sched", false, schedUsage)
	fs.BoolVar(&f.kernelPartition, "kernel-partition", false, kernelPartitionUsage)
	fs.IntVar(&f.qemu, "qemu", 0, "trace a hypervisor's I/O on its image files instead: the same as 'etcdscope hypervisor --pid N'")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope fsync --help')", err)
	}
	if fs.NArg() > 0 {
		return unexpectedArg(fs)
	}
	if err := emptyFlags(fs, "comm", "cgroup", "dev", "dir"); err != nil {
		return err
	}
	if fs.Changed("pid") && f.pid == 0 {
		return usagef("--pid 0 is not a process id; give etcd's (pgrep etcd), or drop --pid to trace every process")
	}
	if fs.Changed("qemu") {
		// Only the flags the hypervisor view shares may come with it.
		for _, n := range []string{"pid", "comm", "cgroup", "dev", "workload", "dir", "rate", "interval", "min-latency", "ring-size", "writes", "sched"} {
			if fs.Changed(n) {
				return usagef("--qemu traces the hypervisor's image I/O and takes no --%s: drop one of them", n)
			}
		}
		if err := checkQEMUPID("qemu", f.qemu); err != nil {
			return err
		}
		// The hypervisor view has its own flags; pass on those it shares.
		hv := []string{"--pid", strconv.Itoa(f.qemu), "--duration", f.duration.String(), "--output", f.output}
		if f.readyFile != "" {
			hv = append(hv, "--ready-file", f.readyFile)
		}
		return runHypervisor(hv)
	}
	cfg, err := f.validate()
	if err != nil {
		return err
	}
	if err := tracer.CheckPrerequisites(); err != nil {
		return usagef("%v", err)
	}
	return traceFsync(f, cfg)
}

// validate checks every flag before anything touches the host.
func (f *fsyncFlags) validate() (tracer.FsyncConfig, error) {
	var cfg tracer.FsyncConfig
	switch {
	case f.duration < 0:
		return cfg, usagef("--duration %v is negative; give a positive duration such as 30s", f.duration)
	case f.interval < 0:
		return cfg, usagef("--interval %v is negative; give 0 to turn interval lines off, or e.g. 1s", f.interval)
	case f.minLatency < 0:
		return cfg, usagef("--min-latency %v is negative; give e.g. 5ms", f.minLatency)
	case f.minLatency > 0 && f.output != "json":
		return cfg, usagef("--min-latency filters the per-fsync JSON records: add --output json (the table always covers every call)")
	case f.output != "table" && f.output != "json":
		return cfg, usagef("--output %q: use table or json", f.output)
	case f.wl != "" && f.wl != "wal":
		return cfg, usagef("--workload %q: the built-in workload is wal", f.wl)
	case f.wl == "" && (f.dir != "" || f.rate != 0):
		return cfg, usagef("--dir and --rate go with --workload wal")
	case f.rate != 0 && !(f.rate >= minRate && f.rate <= maxRate): // NaN fails both
		return cfg, usagef("--rate %v: give appends per second from %g to %g, or 0 for as fast as fdatasync returns", f.rate, minRate, maxRate)
	case len(f.comm) > 15:
		return cfg, usagef("--comm %q is longer than the kernel's 15-byte comm; give its first 15 bytes", f.comm)
	}
	ring, err := ringSize(f.ringBytes)
	if err != nil {
		return cfg, err
	}
	cfg.Comm = f.comm
	cfg.RingBytes = ring
	cfg.Writes = f.writes
	cfg.Sched = f.sched
	// The replays, --writes and --sched need the per-request records.
	if f.kernelPartition {
		for _, c := range []struct {
			flag string
			on   bool
		}{{"--capture", f.capture != ""}, {"--writes", f.writes}, {"--sched", f.sched}} {
			if c.on {
				return cfg, usagef("--kernel-partition leaves out the per-request records %s needs: give one of them", c.flag)
			}
		}
	}
	cfg.KernelPartitionOnly = f.kernelPartition
	cfg.KernelPartition = cfg.KernelPartitionOnly
	if f.readyFile != "" {
		if err := safefile.CheckDir(f.readyFile); err != nil {
			return cfg, usagef("--ready-file %s: %v", f.readyFile, err)
		}
	}
	if f.capture != "" {
		if err := checkCapturePath(f.capture); err != nil {
			return cfg, err
		}
	}
	if f.pid != 0 && f.comm != "" {
		// Both would filter together, and a pid whose comm differs traces
		// nothing (a new user's run: pid 1 and "etcd", 0 calls, exit 0).
		return cfg, usagef("give --pid or --comm, not both: --pid %d names the process already", f.pid)
	}
	if f.pid < 0 {
		return cfg, usagef("--pid %d is not a process id", f.pid)
	}
	if f.pid > 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(f.pid)); err != nil {
			return cfg, usagef("--pid %d: no such process (see pgrep etcd)", f.pid)
		}
		cfg.PID = uint32(f.pid)
	}
	if f.cgroup != "" {
		// Where the v2 hierarchy is on this host (a hybrid host mounts
		// v1 under /sys/fs/cgroup and v2 at /sys/fs/cgroup/unified), or
		// none: the fix names it.
		ms, _ := host.Mounts()
		v2, ok := host.Cgroup2Mount(ms)
		fix := "this host mounts no cgroup v2 hierarchy (cgroup v1 only): select etcd with --pid or --comm instead"
		if ok {
			fix = "give a directory under " + v2 + ", where this host mounts cgroup v2"
		}
		var sfs unix.Statfs_t
		if err := unix.Statfs(f.cgroup, &sfs); err != nil {
			return cfg, usagef("--cgroup %s: %v: %s", f.cgroup, err, fix)
		}
		if sfs.Type != unix.CGROUP2_SUPER_MAGIC {
			return cfg, usagef("--cgroup %s is not on a cgroup v2 filesystem: %s", f.cgroup, fix)
		}
		var st unix.Stat_t
		if err := unix.Stat(f.cgroup, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return cfg, usagef("--cgroup %s is not a directory", f.cgroup)
		}
		cfg.CgroupID = st.Ino
	}
	if f.dev != "" {
		d, err := host.DiskByName(f.dev)
		if err != nil {
			return cfg, usagef("--dev: %v", err)
		}
		info := host.NewDeviceResolver().Resolve(d)
		if len(info.Disks) == 0 {
			return cfg, usagef("--dev %s: no disk found under it", f.dev)
		}
		cfg.Disk = info.Disks[0]
	}
	if f.wl != "" {
		if f.pid != 0 || f.comm != "" || f.cgroup != "" {
			return cfg, usagef("--workload traces itself; drop --pid, --comm and --cgroup")
		}
		cfg.PID = uint32(os.Getpid())
		if f.duration == 0 {
			f.duration = 10 * time.Second
		}
		if f.dir != "" {
			if st, err := os.Stat(f.dir); err == nil && !st.IsDir() {
				return cfg, usagef("--dir %s is not a directory: give the directory to test in", f.dir)
			} else if err != nil {
				return cfg, usagef("--dir %s is not an existing directory: create it (mkdir -p %s) on the disk to test, or give one that exists", f.dir, f.dir)
			}
			// Checked as the scratch directory will be made in it.
			if err := safefile.CheckDir(filepath.Join(f.dir, "x")); err != nil {
				return cfg, usagef("--dir: %v", err)
			}
			// Writable? (access(2) says yes to root even on /proc.)
			probe, err := os.MkdirTemp(f.dir, ".etcdscope-probe-")
			if err != nil {
				return cfg, usagef("--dir %s is not writable (%v): give a directory on the filesystem to test", f.dir, err)
			}
			os.Remove(probe)
		}
	}
	cfg.FSTypes = f.fsTypes(cfg.Disk)
	if f.kernelPartition {
		if err := kernelPartitionFS(cfg.FSTypes, f.wl != ""); err != nil {
			return cfg, err
		}
	}
	if f.wl != "" && f.failOverBudget && len(cfg.FSTypes) == 1 && analysis.InMemoryFS(cfg.FSTypes[0]) {
		// A gate on a disk the workload never reaches would always pass.
		return cfg, usagef("--fail-over-budget: --dir %s is on %s, which keeps files in memory: its fdatasyncs reach no disk; give a --dir on the disk etcd's data directory will use", f.dir, cfg.FSTypes[0])
	}
	return cfg, nil
}

// kernelPartitionFS refuses --kernel-partition where it could not apply:
// the mode assembles calls on ext4's tracepoints, so the traced files must
// be known to be on ext4 (fstypes: --dev's filesystems, or --dir's for the
// workload). It was silently off there (a new user's walk, 2026-12-07).
func kernelPartitionFS(fstypes []string, workload bool) error {
	if len(fstypes) > 0 && !slices.ContainsFunc(fstypes, func(t string) bool { return t != "ext4" }) {
		return nil
	}
	if len(fstypes) == 0 {
		if workload {
			return usagef("--kernel-partition: --dir's filesystem could not be told; give a --dir on ext4")
		}
		return usagef("--kernel-partition assembles ext4's calls: give --dev with the disk the traced files are on (e.g. --dev vda), or drop it")
	}
	where := "--dev's disk holds"
	if workload {
		where = "--dir is on"
	}
	return usagef("--kernel-partition assembles ext4's calls; %s %s: drop it, or trace files on ext4", where, strings.Join(fstypes, ", "))
}

// dataDirUsage is serve's --data-dir help.
const dataDirUsage = "etcd's --data-dir (repeatable: its --wal-dir too; default: --pid's or --comm's open files); on ext4, traced on ext4's tracepoints, which others don't pay for"

// dataDirFSTypes returns the types of the filesystems dirs are on
// (tracer.FsyncConfig.FSTypes; nil for none), or a usage error naming a
// dir that is not an existing directory.
func dataDirFSTypes(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return nil, usagef("--data-dir %s is not an existing directory: give etcd's --data-dir (or --wal-dir)", d)
		}
		t, err := host.FSTypeOf(d)
		if err != nil {
			return nil, usagef("--data-dir %s: %v", d, err)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// tracedFSTypes returns the types of the filesystems holding the etcd
// files the traced processes have open (host.OpenFileFSTypes): pid's, or
// those of every process named comm running now. etcd holds its current
// WAL segment and its bbolt file open, so where both are on ext4 its
// fsyncs are traced on ext4's tracepoints without --data-dir, and no
// syscall tracepoint taxes the host's other processes. nil (not known:
// the syscall tracepoints, which see every call; serve looks again,
// watchFSTypes) when no process is named or runs, when one does not hold
// both a WAL segment and the bbolt file open (etcd opens them seconds
// apart as it starts, and --wal-dir may put them on different
// filesystems), or when one's files cannot be told.
func tracedFSTypes(pid int, comm string) []string {
	pids := []int{pid}
	if pid == 0 {
		var err error
		if pids, err = host.PIDsByComm(comm); comm == "" || err != nil || len(pids) == 0 {
			return nil
		}
	}
	var out []string
	for _, p := range pids {
		var wal, backend bool
		ts, err := host.OpenFileFSTypes(p, func(path string) bool {
			switch analysis.FileKind(path) {
			case analysis.KindWAL:
				wal = true
			case analysis.KindBackend:
				backend = true
			default:
				return false
			}
			return true
		})
		if err != nil || !wal || !backend {
			return nil
		}
		for _, t := range ts {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// fsTypes returns the filesystems every traced fsync is on, where the
// flags say (tracer.FsyncConfig.FSTypes): the workload's directory's, or
// those mounted on --dev's disk (the records kept are those on it); nil
// when unknown or unreadable (the syscall tracepoints then see every
// call).
func (f *fsyncFlags) fsTypes(disk event.Dev) []string {
	if f.wl != "" {
		dir := f.dir
		if dir == "" {
			dir = "/var/tmp" // where traceFsync makes the scratch then
		}
		if t, err := host.FSTypeOf(dir); err == nil {
			return []string{t}
		}
		return nil
	}
	if disk != 0 {
		if ts, err := host.DiskFSTypes(host.NewDeviceResolver(), disk); err == nil {
			return ts
		}
	}
	return nil
}

// The bounds of --rate: below one append per 1,000 s a run shows nothing,
// above a million per second no disk's fdatasync keeps up, and both ends
// keep the ticker's interval a positive int64 of nanoseconds.
const (
	minRate = 0.001
	maxRate = 1e6
)

func traceFsync(f fsyncFlags, cfg tracer.FsyncConfig) error {
	_, s, stop := newSession("fsync", f.duration, f.readyFile)
	defer stop()
	defer s.Close()
	tr, err := tracer.NewFsync(cfg)
	if err != nil {
		return setupErr(err)
	}
	st := s.Add("", tr)
	unavailable := analysis.UnavailableProbes(tr.Probes())
	if err := s.Ready(); err != nil {
		return err
	}
	if f.wl == "" { // --workload's WAL writer runs in this process too
		onePForReader()
	}
	ocfg := pipeline.FsyncOutputConfig{Stdout: os.Stdout, Stderr: os.Stderr, JSON: f.output == "json", Interval: f.interval > 0, MinLatency: f.minLatency}
	if f.capture != "" {
		ocfg.CapturePath = f.capture
		ocfg.CaptureHeader = capture.Header{Tracer: capture.TracerFsync, Command: "fsync", Unavailable: unavailable, Sched: cfg.Sched}
		if cfg.Disk != 0 {
			ocfg.CaptureHeader.Disk = cfg.Disk.String()
		}
	}
	out, err := pipeline.NewFsyncOutput(ocfg)
	if err != nil {
		return err
	}
	defer out.Abandon()
	p := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Disk: cfg.Disk, Sinks: out.Sinks(), Sched: cfg.Sched, Capture: out.Capture()})
	s.Go(func() error { return p.Run(tr) })
	wl, err := pipeline.StartWALWorkload(s.Context(), f.wl == "wal", f.dir, f.rate)
	if err != nil {
		return err
	}
	defer wl.Remove()
	if wl.Running() {
		for _, d := range wl.Stale {
			fmt.Fprintln(os.Stderr, render.WALWorkloadStale(d))
		}
		fmt.Fprintln(os.Stderr, render.WALWorkloadStart(wl.Dir))
	}
	sf := startFacts(cfg, f, tr.Probes())
	sf.KernelPartitionOn = tr.KernelPartitionOnly()
	fmt.Fprintln(os.Stderr, render.FsyncStart(sf))
	if hint := filterHint(cfg); hint != "" {
		fmt.Fprintln(os.Stderr, hint)
	}
	err = s.Wait(pipeline.WaitOptions{Done: wl.Ended, Every: f.interval, Tick: func() { out.IntervalLine(tr) }})
	if err == nil {
		<-wl.Done
		// The pipeline stops at the first call that began after now: the
		// calls that ended before it are already in the ring buffer.
		p.StopAfter(host.MonotonicNs())
		err = s.Finish(nil)
	}
	if err := out.CloseLines(err); err != nil {
		return err
	}
	rep, err := out.Report(*st, s.Window(), p, unavailable)
	if err != nil {
		return err
	}
	if err := out.WorkloadEnd(wl); err != nil {
		return err
	}
	if hint := noCallsHint(cfg, f, rep, s.Window()); hint != "" {
		fmt.Fprintln(os.Stderr, hint)
	}
	if err := decodeErrors(p.DecodeErrors()); err != nil {
		return err
	}
	return checkBudget(f.failOverBudget, rep)
}

// startFacts: what fsync traces, for its start line; ps are the
// tracer's probes (no syscall tracepoint attached: ext4's own).
func startFacts(cfg tracer.FsyncConfig, f fsyncFlags, ps []event.Probe) render.FsyncFilter {
	sf := render.FsyncFilter{PID: int(cfg.PID), Comm: cfg.Comm, Cgroup: f.cgroup, Dev: f.dev, Duration: f.duration,
		Ext4Only: !slices.ContainsFunc(ps, func(p event.Probe) bool {
			return p.Attached && strings.HasPrefix(p.Name, "tracepoint/syscalls/")
		}),
		KernelPartition: f.kernelPartition}
	if cfg.PID != 0 {
		sf.PIDComm = host.Comm(uint32(cfg.PID))
	}
	return sf
}

// decodeErrors is the CLI's end of the pipeline's error policy: records
// that did not decode were counted and the run went on; the run fails at
// exit, after its report, naming how many.
func decodeErrors(n uint64) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d ring buffer record(s) could not be decoded: the report misses those events (a tracer and BPF object mismatch? rebuild with make)", n)
}

// noCallsHint says at the end of a run filtered on a process that saw no
// call what to check ("" when calls were seen or nothing was filtered).
func noCallsHint(cfg tracer.FsyncConfig, f fsyncFlags, rep analysis.Report, window time.Duration) string {
	if rep.Fsyncs > 0 || f.wl != "" {
		return ""
	}
	sf := render.FsyncFilter{PID: int(cfg.PID), Comm: cfg.Comm, Cgroup: f.cgroup}
	gone := false
	if cfg.PID != 0 {
		sf.PIDComm = host.Comm(cfg.PID)
		gone = sf.PIDComm == ""
	}
	return render.FsyncNoCalls(sf, window, gone)
}

// filterHint says at start when the filter matches nothing running now
// (--comm etcd with no etcd yet: it waits, and a run that ends with 0
// calls then has its reason on screen).
func filterHint(cfg tracer.FsyncConfig) string {
	if cfg.Comm != "" && cfg.PID == 0 && noneRunning(cfg.Comm) {
		return render.NoProcessNamed(cfg.Comm)
	}
	return ""
}
