// Command benchrun is `make bench`: what etcdscope costs the machine it
// watches, against no tracer and against the tools a user would run
// instead (bpftrace, bcc's biolatency), run interleaved so drift in the
// machine's speed lands on every variant alike. It needs root, writes
// docs/performance.md, and removes every file and process it made, and the
// loop device, mount and cgroup of its starved run, on SIGINT and SIGTERM
// too; what a run killed outright (SIGKILL) left, the next run removes at
// its start.
//
//	go run ./bench/benchrun -etcdscope bin/etcdscope -fsyncgen bin/fsyncgen
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	etcdscope, fsyncgen, btScript, out, repo string
	fdatasyncScript                          string
	etcd, commitScript                       string
	findings                                 string
	rounds, microRounds                      int
	fioSize                                  string
	sweepSeconds, peersSeconds               float64
	starvedSeconds                           float64
	starvedComm                              string
	goBench                                  bool
	only                                     string
	microVariants, sweepPoints               string
	fioVariants                              string
	saveJSON, fromJSON                       string
	abBase                                   string
	abGenRate                                float64
	abNewFlags                               string
}

// want reports whether section name runs (-only empty: all of them).
func (o options) want(name string) bool {
	if o.only == "" {
		return true
	}
	for _, s := range strings.Split(o.only, ",") {
		if s == name {
			return true
		}
	}
	return false
}

func main() {
	var o options
	flag.StringVar(&o.etcdscope, "etcdscope", "bin/etcdscope", "etcdscope binary")
	flag.StringVar(&o.fsyncgen, "fsyncgen", "bin/fsyncgen", "fsyncgen binary (bench/fsyncgen)")
	flag.StringVar(&o.btScript, "bpftrace-script", "bench/fsync.bt", "bpftrace equivalent of etcdscope fsync")
	flag.StringVar(&o.fdatasyncScript, "fdatasync-script", "bench/fdatasync.bt", "two-line bpftrace script on sys_enter/exit_fdatasync (the syscall tax section)")
	flag.StringVar(&o.etcd, "etcd", "bin/etcd", "etcd binary for the commit section (make etcd)")
	flag.StringVar(&o.commitScript, "commit-script", "bench/commit.bt", "bpftrace equivalent of etcdscope commit's uprobes")
	flag.StringVar(&o.out, "out", "docs/performance.md", "where the results go")
	flag.StringVar(&o.repo, "repo", ".", "repository root (for the Go benchmarks)")
	flag.StringVar(&o.findings, "findings", "bench/findings.md", "hand-written analysis appended to the results")
	flag.IntVar(&o.rounds, "rounds", 10, "interleaved fio rounds (each runs every variant once)")
	flag.IntVar(&o.microRounds, "micro-rounds", 7, "interleaved rounds of the fdatasync syscall microbenchmark")
	flag.StringVar(&o.fioSize, "fio-size", "22m", "fio --size of the etcd job")
	flag.Float64Var(&o.peersSeconds, "peers-seconds", 60, "seconds of connection churn under etcdscope peers (the memory goal's run)")
	flag.StringVar(&o.starvedComm, "starved-comm", "starvedgen", "the starved fsync run's writers' comm, which its tracer follows (another name when another benchrun's starved run may share the machine: each tracer would count both runs' calls)")
	flag.Float64Var(&o.starvedSeconds, "starved-seconds", 60, "seconds of each starved-reader run (issue 12's loss goal: 60)")
	flag.Float64Var(&o.sweepSeconds, "sweep-seconds", 4, "seconds per rate of the event-rate sweep")
	flag.BoolVar(&o.goBench, "go-bench", true, "run the Go benchmarks too")
	flag.StringVar(&o.saveJSON, "save", "", "also write the raw results as JSON to this file")
	flag.StringVar(&o.fromJSON, "from", "", "render -out from results saved with -save, measuring nothing (no root needed)")
	flag.StringVar(&o.only, "only", "", "comma-separated sections to run (ready,fio,micro,ctxsw,tax,peers,starved,sweep,commit,go,ab); empty: all (ab only with -ab-base)")
	flag.StringVar(&o.abBase, "ab-base", "", "another etcdscope binary for the ab section: both trace the same fio jobs at once, paired against -etcdscope")
	flag.Float64Var(&o.abGenRate, "ab-gen-rate", 0, "ab section: instead of fio jobs, fsyncgen at this many fdatasync/s on /dev/shm for -sweep-seconds a round, traced with `fsync --output json` (the userspace goal's load); 0: fio")
	flag.StringVar(&o.abNewFlags, "ab-new-flags", "", "ab section: fsync flags given to NEW only, '+'-separated without dashes (e.g. kernel-partition)")
	flag.StringVar(&o.fioVariants, "fio-variants", strings.Join(fioVariants, ","), "comma-separated tracers of the fio section (untraced first), e.g. with etcdscope+dev+kernel-partition")
	flag.StringVar(&o.microVariants, "micro-variants", strings.Join(microVariants, ","), "comma-separated variants of the fdatasync loop (untraced is the pairing base: keep it)")
	flag.StringVar(&o.sweepPoints, "sweep-points", "", "comma-separated sweep rows to run, named rate-output[-flag] as in sweepPoints (e.g. 10000-table-writes); empty: all")
	flag.Parse()
	if o.fromJSON != "" {
		if err := rerender(o); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			os.Exit(1)
		}
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "benchrun: needs root (BPF, bpf_stats); run `sudo make bench`")
		os.Exit(2)
	}
	for _, p := range []*string{&o.abBase, &o.etcdscope, &o.fsyncgen, &o.btScript, &o.fdatasyncScript, &o.out, &o.repo, &o.findings, &o.etcd, &o.commitScript} {
		if *p == "" { // -ab-base unset
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	// What a killed run (SIGKILL: no handler ran) left: its loop device,
	// mount, scratch directory and cgroup.
	gone, err := removeStaleLoops("/sys/block", "/proc/self/mountinfo", "/var/tmp", pidAlive)
	if err == nil {
		var cgs []string
		cgs, err = removeStaleCgroups([]string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu"}, pidAlive)
		gone = append(gone, cgs...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun: a killed run's leftovers:", err)
		os.Exit(1)
	}
	if len(gone) > 0 {
		fmt.Fprintln(os.Stderr, "benchrun: removed a killed run's leftovers:", strings.Join(gone, ", "))
	}
	restore, err := enableBPFStats()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		killChildren()
		restore()
		fmt.Fprintln(os.Stderr, "benchrun: interrupted; children killed, bpf_stats restored")
		os.Exit(130)
	}()
	err = run(o)
	killChildren()
	restore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// enableBPFStats turns on kernel.bpf_stats_enabled (run_time_ns and
// run_cnt per program cost a clock read per run while on) and returns how
// to put back the previous value.
func enableBPFStats() (func(), error) {
	const path = "/proc/sys/kernel/bpf_stats_enabled"
	prev, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return nil, fmt.Errorf("enabling bpf_stats: %w", err)
	}
	return func() { os.WriteFile(path, prev, 0o644) }, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(o options) error {
	start := time.Now()
	var r results
	r.Options = o
	r.FioSize, r.Rounds, r.MicroRounds, r.SweepSeconds = o.fioSize, o.rounds, o.microRounds, o.sweepSeconds
	r.Machine = describeMachine()
	r.Disk = benchDisk
	r.LoadStart = loadavg()
	for _, l := range r.Machine {
		logf("machine: %s", l)
	}

	logf("time to ready: 5 starts of etcdscope fsync")
	for i := 0; i < 5 && o.want("ready"); i++ {
		t, err := startTracer("etcdscope", "benchready", o.etcdscope, o.btScript)
		if err != nil {
			return err
		}
		r.ReadyMs = append(r.ReadyMs, float64(t.readyIn)/1e6)
		if s, err := sampleProc(t.cmd.Process.Pid); err == nil {
			r.IdleHWMKiB = max(r.IdleHWMKiB, s.vmHWMKiB)
		}
		if _, err := t.stop(); err != nil {
			return err
		}
	}
	logf("ready: median %.1f ms", median(r.ReadyMs))

	if o.want("fio") {
		if err := fioSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("ab") && o.abBase != "" {
		if err := abSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("micro") {
		if err := microSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("ctxsw") {
		if err := ctxswSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("tax") {
		if err := taxSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("peers") {
		if err := peersSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("starved") {
		if err := starvedSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("sweep") {
		if err := sweepSection(o, &r); err != nil {
			return err
		}
	}
	if o.want("commit") {
		if err := commitSection(o, &r); err != nil {
			return err
		}
	}
	if o.goBench && o.want("go") {
		if err := goBenchSection(o, &r); err != nil {
			return err
		}
	}
	r.Elapsed = time.Since(start)
	r.Machine = append(r.Machine, "load average (/proc/loadavg) at start: "+r.LoadStart+"; at end: "+loadavg())
	if o.saveJSON != "" {
		b, err := json.MarshalIndent(&r, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.saveJSON, b, 0o644); err != nil {
			return err
		}
	}
	doc := r.markdown()
	if err := os.WriteFile(o.out, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	fmt.Print(doc)
	logf("wrote %s in %s", o.out, r.Elapsed.Round(time.Second))
	return nil
}

// rerender writes -out again from saved results, with the current
// findings: for editing the analysis without measuring again.
func rerender(o options) error {
	b, err := os.ReadFile(o.fromJSON)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("reading %s: %w", o.fromJSON, err)
	}
	r.Options = o
	return os.WriteFile(o.out, []byte(r.markdown()), 0o644)
}

// fioRun is one run of fio's etcd job, and the tracer's view of it.
type fioRun struct {
	IOPS         float64
	SyncMeanNs   float64 // fio's fdatasync latency (sync.lat_ns)
	SyncP99Ns    float64
	Fsyncs       int64 // fio's count of fdatasync calls (sync.lat_ns.N)
	Seconds      float64
	TracerCPU    float64 // tracer's CPU seconds (user+sys) during the job
	TracerHWMKiB int64
	Progs        []progStat
	Seen         int64 // etcdscope: fsyncs in its summary
	Lost, Missed uint64
}

func runFio(o options) (fioRun, error) {
	var fr fioRun
	dir, err := mkScratch("/var/tmp", "etcdscope-bench-fio-")
	if err != nil {
		return fr, err
	}
	defer dropScratch(dir)
	var out bytes.Buffer
	cmd := exec.Command("fio", "--name=etcd", "--directory="+dir, "--rw=write", "--ioengine=sync",
		"--fdatasync=1", "--bs=2300", "--size="+o.fioSize, "--output-format=json")
	cmd.Stdout = &out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := startChild(cmd); err != nil {
		return fr, fmt.Errorf("starting fio: %w", err)
	}
	if err := waitChild(cmd); err != nil {
		return fr, fmt.Errorf("fio: %w: %s", err, stderr.String())
	}
	var j struct {
		Jobs []struct {
			JobRuntime float64 `json:"job_runtime"` // ms
			Write      struct {
				IOPS float64 `json:"iops"`
			} `json:"write"`
			Sync struct {
				LatNs struct {
					Mean       float64            `json:"mean"`
					N          int64              `json:"N"`
					Percentile map[string]float64 `json:"percentile"`
				} `json:"lat_ns"`
			} `json:"sync"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil || len(j.Jobs) != 1 {
		return fr, fmt.Errorf("parsing fio JSON: %v", err)
	}
	jb := j.Jobs[0]
	fr.IOPS, fr.SyncMeanNs, fr.Fsyncs = jb.Write.IOPS, jb.Sync.LatNs.Mean, jb.Sync.LatNs.N
	fr.SyncP99Ns = jb.Sync.LatNs.Percentile["99.000000"]
	fr.Seconds = jb.JobRuntime / 1e3
	return fr, nil
}

// etcdscopeSummary is the last line of `etcdscope fsync --output json`.
type etcdscopeSummary struct {
	Type   string `json:"type"`
	Fsyncs int64  `json:"fsyncs"`
	Lost   uint64 `json:"lost_events"`
	Missed uint64 `json:"missed_events"`
}

// parseTableSummary reads the first line of the table report, "etcdscope
// fsync report: N calls, L lost events, M missed probe runs".
func parseTableSummary(out []byte) (etcdscopeSummary, error) {
	s := etcdscopeSummary{Type: "summary"}
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "etcdscope fsync report: "); ok {
			if _, err := fmt.Sscanf(rest, "%d calls, %d lost events, %d missed probe runs", &s.Fsyncs, &s.Lost, &s.Missed); err != nil {
				return s, fmt.Errorf("etcdscope's report line %q: %w", l, err)
			}
			return s, nil
		}
	}
	return s, fmt.Errorf("etcdscope printed no report")
}

func parseSummary(out []byte) (etcdscopeSummary, error) {
	var s etcdscopeSummary
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &s); err != nil || s.Type != "summary" {
		return s, fmt.Errorf("etcdscope printed no summary line (%v)", err)
	}
	return s, nil
}

// traced runs work under tracer kind and fills in the tracer's CPU, RSS,
// BPF program cost and (etcdscope) its summary.
func traced(o options, kind, comm string, work func() error) (cpuSec float64, hwm int64, progs []progStat, sum etcdscopeSummary, err error) {
	script := o.btScript
	if kind == "bpftrace-fdatasync" {
		script = o.fdatasyncScript
	}
	t, err := startTracer(kind, comm, o.etcdscope, script)
	if err != nil {
		return 0, 0, nil, sum, err
	}
	pid := t.cmd.Process.Pid
	s0, _ := sampleProc(pid)
	werr := work()
	s1, _ := sampleProc(pid)
	progs = progStats(pid)
	out, serr := t.stop()
	if werr != nil {
		return 0, 0, nil, sum, werr
	}
	if serr != nil {
		return 0, 0, nil, sum, serr
	}
	switch base, _, _ := strings.Cut(kind, "+"); base {
	case "etcdscope":
		sum, err = parseSummary(out)
	case "etcdscope-table":
		sum, err = parseTableSummary(out)
	}
	if err != nil {
		return 0, 0, nil, sum, err
	}
	return float64(s1.cpuNs-s0.cpuNs) / 1e9, s1.vmHWMKiB, progs, sum, nil
}

// fioVariants are the fio section's tracers by default. etcdscope+dev:
// with --dev naming fio's disk, whose filesystems are all ext4 here: the
// calls on ext4's tracepoints, no syscall ones.
var fioVariants = []string{"untraced", "etcdscope", "etcdscope+dev", "bpftrace"}

func fioSection(o options, r *results) error {
	variants := strings.Split(o.fioVariants, ",")
	// biolatency: one try; bcc compiles C against kernel headers at start.
	if _, err := exec.LookPath("biolatency-bpfcc"); err != nil {
		r.BiolatencyWhy = "not installed (apt-get install bpfcc-tools)"
	} else if t, err := startTracer("biolatency", "", o.etcdscope, o.btScript); err != nil {
		r.BiolatencyWhy = err.Error()
	} else {
		t.stop()
		variants = append(variants, "biolatency")
	}
	if r.BiolatencyWhy != "" {
		logf("biolatency skipped: %s", r.BiolatencyWhy)
	}
	r.Variants = variants
	r.Fio = map[string][]fioRun{}
	for round := 0; round < o.rounds; round++ {
		// Rotate the order so no variant always runs first in a round.
		for k := range variants {
			v := variants[(k+round)%len(variants)]
			var fr fioRun
			var err error
			if v == "untraced" {
				fr, err = runFio(o)
			} else {
				var sum etcdscopeSummary
				fr.TracerCPU, fr.TracerHWMKiB, fr.Progs, sum, err = traced(o, v, "fio", func() error {
					var ferr error
					fr, ferr = runFio(o)
					return ferr
				})
				fr.Seen, fr.Lost, fr.Missed = sum.Fsyncs, sum.Lost, sum.Missed
			}
			if err != nil {
				return fmt.Errorf("fio round %d, %s: %w", round+1, v, err)
			}
			r.Fio[v] = append(r.Fio[v], fr)
			logf("fio round %d/%d %-10s %7.0f IOPS  fdatasync mean %6.1f µs  tracer cpu %.2f s", round+1, o.rounds, v, fr.IOPS, fr.SyncMeanNs/1e3, fr.TracerCPU)
		}
	}
	return nil
}

// genResult is fsyncgen's JSON line.
type genResult struct {
	Fsyncs     float64 `json:"fsyncs"`
	Seconds    float64 `json:"seconds"`
	RatePerS   float64 `json:"rate_per_s"`
	NsPerFsync float64 `json:"ns_per_fsync"`
}

func runGen(o options, args ...string) (genResult, error) {
	var g genResult
	dir, err := mkScratch("/dev/shm", "etcdscope-bench-gen-")
	if err != nil {
		return g, err
	}
	defer dropScratch(dir)
	var out, stderr bytes.Buffer
	cmd := exec.Command(o.fsyncgen, append([]string{"-dir", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := startChild(cmd); err != nil {
		return g, err
	}
	if err := waitChild(cmd); err != nil {
		return g, fmt.Errorf("fsyncgen: %w: %s", err, stderr.String())
	}
	return g, json.Unmarshal(out.Bytes(), &g)
}

// microRun is one unpaced single-thread fdatasync loop on tmpfs.
type microRun struct {
	NsPerFsync float64
	Fsyncs     float64
	BPFNs      uint64 // run time of the tracer's programs
	BPFRuns    uint64
	// Others: BPF programs on syscall tracepoints that other processes
	// held during the run (tax section; -1 unknown).
	Others int `json:",omitempty"`
}

// microVariants are the fdatasync loop's variants, in table order: no
// tracer, etcdscope as by default (its table output; the loop's rate is
// beyond what its JSON output keeps up with), bpftrace, and etcdscope with
// each opt-in probe set (kind+flag: --flag), whose cost is why they are
// flags.
var microVariants = []string{"untraced", "etcdscope", "bpftrace", "etcdscope+writes", "etcdscope+sched"}

func microSection(o options, r *results) error {
	r.Micro = map[string][]microRun{}
	return interleaved(o, "fsyncgen", strings.Split(o.microVariants, ","), r.Micro, "fdatasync loop", "ns per pwrite+fdatasync",
		func(mr *microRun) error {
			g, err := runGen(o, "-threads", "1", "-duration", "1s")
			mr.NsPerFsync, mr.Fsyncs = g.NsPerFsync, g.Fsyncs
			return err
		})
}

// interleaved runs gen under each variant (a tracer kind, or untraced) in
// o.microRounds rounds, rotating the order one per round so no variant
// always runs first, and appends each run to runs[variant], with its
// tracer's BPF run time. Tracers filter on comm.
func interleaved(o options, comm string, variants []string, runs map[string][]microRun, what, unit string, gen func(*microRun) error) error {
	for round := 0; round < o.microRounds; round++ {
		for k := range variants {
			v := variants[(k+round)%len(variants)]
			var mr microRun
			var err error
			if v == "untraced" {
				err = gen(&mr)
			} else {
				var progs []progStat
				_, _, progs, _, err = traced(o, v, comm, func() error { return gen(&mr) })
				mr.BPFNs, mr.BPFRuns = sumRunTime(progs)
			}
			if err != nil {
				return fmt.Errorf("%s round %d, %s: %w", what, round+1, v, err)
			}
			runs[v] = append(runs[v], mr)
			logf("%s round %d/%d %-22s %6.0f %s", what, round+1, o.microRounds, v, mr.NsPerFsync, unit)
		}
	}
	return nil
}

// ctxswVariants: no tracer, etcdscope as by default, and with --sched,
// whose sched_switch/sched_wakeup programs run at every switch on the
// machine.
var ctxswVariants = []string{"untraced", "etcdscope-table", "etcdscope-table+sched"}

// ctxswSection measures what a tracer costs tasks it does not trace: a
// pipe ping-pong between two threads on one CPU that makes no fsync
// (fsyncgen -pingpong), interleaved rounds paired with untraced. Its runs
// are microRuns whose "fsyncs" are round trips.
func ctxswSection(o options, r *results) error {
	r.Ctxsw = map[string][]microRun{}
	return interleaved(o, "fsyncgen", ctxswVariants, r.Ctxsw, "pipe ping-pong", "ns per round trip", func(mr *microRun) error {
		var out, stderr bytes.Buffer
		cmd := exec.Command(o.fsyncgen, "-pingpong", "-duration", "1s")
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := startChild(cmd); err != nil {
			return err
		}
		if err := waitChild(cmd); err != nil {
			return fmt.Errorf("fsyncgen -pingpong: %w: %s", err, stderr.String())
		}
		var g struct {
			RoundTrips float64 `json:"round_trips"`
			Ns         float64 `json:"ns_per_round_trip"`
		}
		if err := json.Unmarshal(out.Bytes(), &g); err != nil {
			return err
		}
		mr.NsPerFsync, mr.Fsyncs = g.Ns, g.RoundTrips
		return nil
	})
}

// taxVariants: no tracer; etcdscope on the syscall tracepoints (what it
// attaches when the traced files' filesystems are unknown, or XFS or
// btrfs, which have no sync_file exit tracepoint); etcdscope --dev on
// fio's disk (ext4 only here: ext4's tracepoints, no syscall ones); and
// the smallest bpftrace script on sys_enter/exit_fdatasync.
var taxVariants = []string{"untraced", "etcdscope-table", "etcdscope-table+dev", "bpftrace-fdatasync"}

// taxSection measures what a tracer costs every syscall of tasks it does
// not trace: fsyncgen -getppid (one thread calling getppid(2), no fsync)
// under each of taxVariants, all filtering on a comm no task has,
// interleaved rounds paired with untraced. Its runs are microRuns whose
// "fsyncs" are getppid calls. Each untraced round also counts the syscall
// tracepoints other processes had attached (bpftool perf list), which
// would tax the baseline too.
func taxSection(o options, r *results) error {
	r.Tax = map[string][]microRun{}
	return interleaved(o, "nosuchcomm", taxVariants, r.Tax, "getppid loop", "ns per getppid", func(mr *microRun) error {
		others := othersSyscallTracepoints()
		var out, stderr bytes.Buffer
		cmd := exec.Command(o.fsyncgen, "-getppid", "-duration", "1s")
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := startChild(cmd); err != nil {
			return err
		}
		if err := waitChild(cmd); err != nil {
			return fmt.Errorf("fsyncgen -getppid: %w: %s", err, stderr.String())
		}
		var g struct {
			Calls float64 `json:"calls"`
			Ns    float64 `json:"ns_per_call"`
		}
		if err := json.Unmarshal(out.Bytes(), &g); err != nil {
			return err
		}
		mr.NsPerFsync, mr.Fsyncs = g.Ns, g.Calls
		mr.Others = max(others, othersSyscallTracepoints())
		return nil
	})
}

// othersSyscallTracepoints counts the BPF programs attached to syscall
// tracepoints (bpftool perf list) by processes benchrun did not start:
// while there is one, every task pays the syscall tracepoints' slow path,
// untraced rounds included. -1 when bpftool cannot tell.
func othersSyscallTracepoints() int {
	b, err := exec.Command("bpftool", "-j", "perf", "list").Output()
	if err != nil {
		return -1
	}
	var list []struct {
		PID        int    `json:"pid"`
		Tracepoint string `json:"tracepoint"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return -1
	}
	children.Lock()
	defer children.Unlock()
	n := 0
	for _, l := range list {
		if _, ours := children.m[l.PID]; !ours && strings.HasPrefix(l.Tracepoint, "sys_") {
			n++
		}
	}
	return n
}

// peersRun is etcdscope peers under fsyncgen -churn: its memory over time.
type peersRun struct {
	Seconds        float64 // of churn
	Conns          float64 // connections fsyncgen made
	Events, Lost   int64   // etcdscope peers' own count
	TimesS         []float64
	RSSKiB         []int64 // VmRSS at TimesS (s since the churn began)
	HWMKiB         int64
	TargetConnsPer float64
}

// peersChurnRate: connections a second, ~10 events each (open, setup,
// close start, close on both ends, an RTT sample): ~30-40k events/s
// where the machine lets fsyncgen keep up (the section reports the rate).
const peersChurnRate = 4000

// peersSection runs `etcdscope peers` on a port of its own while fsyncgen
// -churn opens and closes peersChurnRate connections a second there, and
// samples the tracer's VmRSS every 5 s: what 10 minutes at 30k events/s
// would hold is extrapolated from the growth after the first 20 s.
func peersSection(o options, r *results) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logf("peers: %g s of connection churn at %d/s on port %s", o.peersSeconds, peersChurnRate, port)
	t, err := startTracer("etcdscope-peers", port, o.etcdscope, "")
	if err != nil {
		return err
	}
	pid := t.cmd.Process.Pid
	pr := peersRun{Seconds: o.peersSeconds, TargetConnsPer: peersChurnRate}
	var out, stderr bytes.Buffer
	cmd := exec.Command(o.fsyncgen, "-churn", port, "-threads", "8", "-rate", fmt.Sprint(peersChurnRate), "-duration", fmt.Sprintf("%gs", o.peersSeconds))
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := startChild(cmd); err != nil {
		t.stop()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- waitChild(cmd) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var werr error
loop:
	for {
		select {
		case werr = <-done:
			break loop
		case <-tick.C:
			if s, err := sampleProc(pid); err == nil {
				pr.TimesS = append(pr.TimesS, time.Since(start).Seconds())
				pr.RSSKiB = append(pr.RSSKiB, s.vmRSSKiB)
				pr.HWMKiB = s.vmHWMKiB
			}
		}
	}
	if s, err := sampleProc(pid); err == nil {
		pr.HWMKiB = s.vmHWMKiB
	}
	sum, serr := t.stop()
	if werr != nil {
		return fmt.Errorf("fsyncgen -churn: %w: %s", werr, stderr.String())
	}
	if serr != nil {
		return serr
	}
	var g struct {
		Conns float64 `json:"conns"`
	}
	if err := json.Unmarshal(out.Bytes(), &g); err != nil {
		return err
	}
	pr.Conns = g.Conns
	// "etcdscope peers: 45.1s on port 40123, 1386592 events, 4147 lost, 0 missed"
	for _, l := range strings.Split(string(sum), "\n") {
		if rest, ok := strings.CutPrefix(l, "etcdscope peers: "); ok {
			if _, after, ok := strings.Cut(rest, ", "); ok {
				fmt.Sscanf(after, "%d events, %d lost", &pr.Events, &pr.Lost)
			}
			break
		}
	}
	r.Peers = &pr
	logf("peers: %d events (%.0f/s), %d lost, VmHWM %.1f MiB", pr.Events, float64(pr.Events)/pr.Seconds, pr.Lost, float64(pr.HWMKiB)/1024)
	return nil
}

// sweepRow is one paced rate of the event-rate sweep, traced by etcdscope.
type sweepRow struct {
	TargetFsyncPerS float64
	// Output is etcdscope's --output: "json" (one line per fsync), or
	// "table" (the default: a report at exit); "" in older results is json.
	Output string
	// Flag is the opt-in probe set etcdscope ran with ("" none; writes:
	// --writes).
	Flag           string `json:",omitempty"`
	Gen            genResult
	Seen           int64
	Lost, Missed   uint64
	CPUSec         float64
	HWMKiB         int64
	BPFNs, BPFRuns uint64
}

// sweepPoint is one row of the event-rate sweep: a rate, etcdscope's
// output, and an opt-in flag ("", writes or sched: the table output with
// --writes or --sched).
type sweepPoint struct {
	rate   float64
	output string
	flag   string
}

func (p sweepPoint) name() string {
	n := fmt.Sprintf("%.0f-%s", p.rate, p.output)
	if p.flag != "" {
		n += "-" + p.flag
	}
	return n
}

// sweepPoints: JSON at every rate; the default table output at 10k too,
// where the userspace goal is checked, and there with each opt-in flag.
var sweepPoints = []sweepPoint{{10e3, "json", ""}, {10e3, "table", ""}, {10e3, "table", "writes"}, {10e3, "table", "sched"}, {50e3, "json", ""}, {100e3, "json", ""}}

func sweepSection(o options, r *results) error {
	for _, p := range sweepPoints {
		if o.sweepPoints != "" && !slices.Contains(strings.Split(o.sweepPoints, ","), p.name()) {
			continue
		}
		row := sweepRow{TargetFsyncPerS: p.rate, Output: p.output, Flag: p.flag}
		kind := "etcdscope"
		if p.output == "table" {
			kind = "etcdscope-table"
		}
		if p.flag != "" {
			kind += "+" + p.flag
		}
		var progs []progStat
		var sum etcdscopeSummary
		var err error
		row.CPUSec, row.HWMKiB, progs, sum, err = traced(o, kind, "fsyncgen", func() error {
			var gerr error
			row.Gen, gerr = runGen(o, "-threads", "2", "-rate", fmt.Sprint(p.rate), "-duration", fmt.Sprintf("%gs", o.sweepSeconds))
			return gerr
		})
		if err != nil {
			return fmt.Errorf("sweep at %g fsync/s, %s output: %w", p.rate, p.output, err)
		}
		row.Seen, row.Lost, row.Missed = sum.Fsyncs, sum.Lost, sum.Missed
		row.BPFNs, row.BPFRuns = sumRunTime(progs)
		r.Sweep = append(r.Sweep, row)
		logf("sweep %6.0f fsync/s, %s %s: made %.0f, etcdscope saw %d, lost %d, missed %d, cpu %.1f%% of a core, VmHWM %.1f MiB",
			row.Gen.RatePerS, p.output, p.flag, row.Gen.Fsyncs, row.Seen, row.Lost, row.Missed, 100*row.CPUSec/row.Gen.Seconds, float64(row.HWMKiB)/1024)
	}
	return nil
}

// output is the row's --output, json for results saved before it was kept.
func (s *sweepRow) output() string {
	if s.Output == "" {
		return "json"
	}
	return s.Output
}

// goBench is one Go benchmark over -count runs.
type goBench struct {
	Name        string
	NsPerOp     []float64
	BytesPerOp  float64
	AllocsPerOp float64
}

func goBenchSection(o options, r *results) error {
	logf("Go benchmarks (-count 5 -benchmem)")
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "5", "./analysis/", "./analysis/stats/", "./tracer/")
	cmd.Dir = o.repo
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := startChild(cmd); err != nil {
		return err
	}
	if err := waitChild(cmd); err != nil {
		return fmt.Errorf("go test -bench: %w: %s%s", err, out.String(), stderr.String())
	}
	byName := map[string]*goBench{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		b := byName[f[0]]
		if b == nil {
			b = &goBench{Name: f[0]}
			byName[f[0]] = b
			r.GoBench = append(r.GoBench, b)
		}
		// "N ns/op [X MB/s] Y B/op Z allocs/op": each value precedes its
		// unit (b.SetBytes adds the MB/s column).
		var ns, bytesOp, allocs float64
		for i := 2; i < len(f); i++ {
			switch f[i] {
			case "ns/op":
				fmt.Sscan(f[i-1], &ns)
			case "B/op":
				fmt.Sscan(f[i-1], &bytesOp)
			case "allocs/op":
				fmt.Sscan(f[i-1], &allocs)
			}
		}
		b.NsPerOp = append(b.NsPerOp, ns)
		b.BytesPerOp, b.AllocsPerOp = bytesOp, allocs
	}
	// Where the Attributor's time goes: pprof of its benchmark.
	dir, err := mkScratch("", "etcdscope-bench-pprof-")
	if err != nil {
		return err
	}
	defer dropScratch(dir)
	prof, bin := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "analysis.test")
	cmd = exec.Command("go", "test", "-run", "^$", "-bench", "AttributorFsync", "-cpuprofile", prof, "-o", bin, "./analysis/")
	cmd.Dir = o.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("profiling the Attributor: %w: %s", err, b)
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=8", bin, prof).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	r.AttributorProfile = trimPprof(string(top))

	// The whole userspace pipeline in-process (bench/pipeline_test.go) at
	// 10k fsync/s, profiled: where etcdscope's CPU goes, start-up included.
	logf("in-process pipeline at 10k fsync/s, profiled")
	prof, bin = filepath.Join(dir, "pipe.prof"), filepath.Join(dir, "bench.test")
	cmd = exec.Command("go", "test", "-tags", "bench", "-count=1", "-run", "TestPipeline", "-v", "-cpuprofile", prof, "-o", bin,
		"./bench/", "-args", "-rate", "10000", "-seconds", "4")
	cmd.Dir = o.repo
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pipeline harness: %w: %s", err, b)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "fsyncgen made") {
			r.PipelineLine = strings.TrimSpace(l)
		}
	}
	top, err = exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=22", bin, prof).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	r.PipelineProfile = trimPprof(string(top))
	return nil
}

// trimPprof keeps pprof -top's table (from the "flat" header on).
func trimPprof(s string) string {
	if i := strings.Index(s, "      flat"); i >= 0 {
		s = s[i:]
	}
	return strings.TrimRight(s, "\n")
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// benchDisk is the kernel name of the disk under fio's directory (from
// describeMachine): what the +dev variants pass to --dev.
var benchDisk = "vda"

// describeMachine says what the numbers were measured on.
func describeMachine() []string {
	var out []string
	cmdOut := func(name string, args ...string) string {
		b, err := exec.Command(name, args...).Output()
		if err != nil {
			return "unavailable"
		}
		return strings.TrimSpace(strings.Split(string(b), "\n")[0])
	}
	var uts syscall.Utsname
	syscall.Uname(&uts)
	cstr := func(b [65]int8) string {
		var s []byte
		for _, c := range b {
			if c == 0 {
				break
			}
			s = append(s, byte(c))
		}
		return string(s)
	}
	out = append(out, "kernel: Linux "+cstr(uts.Release)+" "+cstr(uts.Machine))
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	out = append(out, fmt.Sprintf("CPU: %s, %s online", cpu, cmdOut("nproc")))
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		out = append(out, "memory: "+strings.Join(strings.Fields(strings.Split(string(b), "\n")[0])[1:], " "))
	}
	src := cmdOut("findmnt", "-no", "SOURCE,FSTYPE,OPTIONS", "-T", "/var/tmp")
	out = append(out, "fio's directory /var/tmp: "+src)
	if f := strings.Fields(src); len(f) > 0 {
		dev := filepath.Base(f[0])
		benchDisk = dev
		sched, _ := os.ReadFile("/sys/block/" + dev + "/queue/scheduler")
		rot, _ := os.ReadFile("/sys/block/" + dev + "/queue/rotational")
		wc, _ := os.ReadFile("/sys/block/" + dev + "/queue/write_cache")
		out = append(out, fmt.Sprintf("disk %s: scheduler %s, rotational %s, write cache %s", dev,
			strings.TrimSpace(string(sched)), strings.TrimSpace(string(rot)), strings.TrimSpace(string(wc))))
	}
	out = append(out, "tools: "+cmdOut("fio", "--version")+", "+cmdOut("bpftrace", "--version")+", "+cmdOut("go", "version"))
	return out
}
