package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["commit"] = subcommand{
		summary: "what each etcd write waits on: forwarding, the leader's WAL append, the quorum's deciding vote, apply",
		run:     runCommit,
	}
}

type commitFlags struct {
	pid                 int
	comm, output, ready string
	endpoints           []string
	cacert, cert, key   string
	duration            time.Duration
	load                string
	ringBytes           uint64
	sample              uint32
	rawEvents           bool
	grpc                bool
}

// commitStdout is where the report goes (tests capture it).
var commitStdout io.Writer = os.Stdout

func runCommit(args []string) error {
	var f commitFlags
	fs := newFlagSet("commit")
	fs.IntVar(&f.pid, "pid", 0, "the etcd member on this host (pgrep -x etcd)")
	fs.StringVar(&f.comm, "comm", "", "or the one process with this comm, e.g. etcd")
	fs.StringSliceVar(&f.endpoints, "etcd-endpoints", nil, "client URLs (comma-separated), one of them the traced member's: member names, leader and role, the model from /metrics, the --load target")
	fs.StringVar(&f.cacert, "cacert", "", "CA bundle for https --etcd-endpoints")
	fs.StringVar(&f.cert, "cert", "", "client certificate for https --etcd-endpoints")
	fs.StringVar(&f.key, "key", "", "client key for --cert")
	fs.DurationVar(&f.duration, "duration", time.Minute, "trace this long (0: until Ctrl-C)")
	fs.StringVar(&f.load, "load", "0", "drive N puts per second (e.g. 20/s) at the traced member, under a key prefix of etcdscope's own with a lease, timing each put client-side; 0: no load")
	fs.StringVar(&f.output, "output", "table", "table, or json (JSON Lines, schema commit/v2: docs/schema.md)")
	fs.StringVar(&f.ready, "ready-file", "", "create this file once the probes are attached (for scripts and tests)")
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultRingBytes, ringSizeUsage)
	fs.Uint32Var(&f.sample, "sample", 1, "follow 1 write in N, decided in the kernel at each write's entry (1: every write); the report counts the writes seen")
	fs.BoolVar(&f.grpc, "grpc", true, "also probe the gRPC call around each write (its grpc part); false saves two uprobe firings a write (docs/commit.md)")
	fs.BoolVar(&f.rawEvents, "raw-events", false, "send every probe's firing to etcdscope and join them there (the reference for the kernel's assembly; more CPU)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope commit --help')", err)
	}
	if err := emptyFlags(fs, "comm", "etcd-endpoints"); err != nil {
		return err
	}
	opt, err := f.validate(fs)
	if err != nil {
		return err
	}
	if err := tracer.CheckPrerequisites(); err != nil {
		return usagef("%v", err)
	}
	// The session owns the ready file and the tracers from here: it
	// drains and closes them, and removes the file, on every path.
	ctx, s, stop := newSession("commit", 0, f.ready) // RunCommit starts --duration's clock
	defer stop()
	defer s.Close()
	// Member names and etcd's own messages reach the output: JSON escapes
	// DEL and C1, the table every control (render.Terminal).
	enc := json.NewEncoder(render.JSONText(commitStdout))
	if f.output == "json" {
		opt.OnWrite = func(w *commit.Write, names commit.Names) error { return enc.Encode(render.CommitRecord(w, names)) }
	}
	opt.Notice = func(n commit.Notice) { fmt.Fprintln(os.Stderr, render.CommitNoticeLine(n)) }
	// The tracer is opened here, so that the pipeline loads no BPF: a
	// binary whose functions cannot be probed leaves opt.Source nil and
	// the run falls back to the model from etcd's metrics.
	// A signal while the probes are made (reading etcd's symbols, the
	// loads and attaches take a second or more on a busy host) skips the
	// steps after it: each costs its own load and detach before the exit
	// (a CI run: 2.28 s from the signal to the exit with both tracers).
	interrupted := errors.New("interrupted before the run started: nothing traced")
	if ctx.Err() != nil {
		return interrupted
	}
	tr, err := tracer.NewCommit(tracer.CommitConfig{PID: opt.PID, RingBytes: opt.RingBytes, Sched: true, Raw: opt.Raw, SampleEvery: opt.SampleEvery, NoGRPC: !f.grpc})
	switch {
	case err == nil:
		s.Add("commit", tr)
		opt.Source = tr
		for part, p := range tr.Unavailable() {
			opt.Unavailable = append(opt.Unavailable, analysis.UnavailablePart(string(part), p))
		}
	case (errors.Is(err, tracer.ErrGoFuncNotFound) || errors.Is(err, tracer.ErrNoGoSymbols)) && len(opt.Endpoints) == 0:
		// Not etcd (or not one this etcdscope can probe), and no metrics
		// to fall back on: the process given is the mistake.
		return usagef("pid %d: %v: not an etcd this etcdscope can probe; give etcd's pid (pgrep -x etcd), or --etcd-endpoints for the model from etcd's metrics", opt.PID, err)
	case (errors.Is(err, tracer.ErrGoFuncNotFound) || errors.Is(err, tracer.ErrNoGoSymbols)) && etcdinfo.ServedEndpoint(opt.Endpoints, opt.PID) == "":
		// The metrics fall back only for an etcd serving one of the
		// endpoints (a stripped binary); a process that is neither is
		// the mistake, and its binary says so first.
		return usagef("pid %d: %v: not an etcd this etcdscope can probe, and it serves none of --etcd-endpoints %s; give etcd's pid (pgrep -x etcd)", opt.PID, err, strings.Join(opt.Endpoints, ","))
	case errors.Is(err, tracer.ErrGoFuncNotFound) || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, tracer.ErrNoGoSymbols):
		opt.SourceErr = err
	case errors.Is(err, os.ErrPermission) && !tracer.HasCapability(unix.CAP_SYS_PTRACE):
		// /proc/PID/exe of a process with more capabilities (a root
		// etcd) needs ptrace read access.
		return usagef("pid %d: reading its executable for uprobes was refused: commit needs CAP_SYS_PTRACE besides CAP_BPF and CAP_PERFMON (run as root, or add it)", opt.PID)
	case errors.Is(err, os.ErrPermission):
		// Refused although this process holds CAP_SYS_PTRACE: the kernel
		// also wants the caller's capabilities to cover the target's (or a
		// security module forbids it), e.g. root in a container beside
		// a host process.
		return usagef("pid %d: the kernel refused reading its executable (/proc/%d/exe) despite CAP_SYS_PTRACE (%s); run etcdscope in the process's user namespace with at least its capabilities", opt.PID, opt.PID, capsCompared(opt.PID))
	default:
		return err
	}
	if ctx.Err() != nil {
		return interrupted
	}
	if opt.Source != nil {
		// Beside the uprobes, the fsync tracer on etcd alone splits each
		// WAL fdatasync into the disk's layers and the thread's scheduler
		// states, so that the verdict names the disk or the CPU.
		st, err := tracer.NewFsync(tracer.FsyncConfig{PID: uint32(opt.PID), Sched: true, Writes: true, RingBytes: opt.RingBytes, FSTypes: tracedFSTypes(opt.PID, "")})
		if err != nil {
			opt.Notice(commit.Notice{Kind: commit.NoticeNoSyncSplit, Err: err})
		} else {
			s.Add("fsync", st)
			opt.Syncs = st
		}
	}
	res, err := pipeline.RunCommit(s, opt)
	if err != nil && ctx.Err() != nil {
		return interrupted
	}
	var notServed *etcdinfo.NotServedError
	if errors.Is(err, etcdinfo.ErrUnreachable) || errors.As(err, &notServed) {
		// Before any write was traced, and the probes are closed at
		// exit: a wrong address is bad input.
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	// The pipeline's error policy: decode errors are counted, the report
	// is printed, and the run fails at exit.
	var decodeErr, exitErr error
	if res.DecodeErrors > 0 {
		decodeErr = fmt.Errorf("%d ring records could not be decoded", res.DecodeErrors)
	}
	// The run was cut short: the report covers what came before.
	if t := res.Target; t.Exited {
		exitErr = fmt.Errorf("etcd pid %d exited %.1f s into the run, which stopped then", t.PID, float64(t.ExitedAfterNs)/1e9)
	}
	run := commitRun(res, opt.PID)
	if f.output == "json" {
		return errors.Join(enc.Encode(render.CommitSummary(run)), decodeErr, exitErr)
	}
	return errors.Join(render.CommitTable(commitStdout, run), decodeErr, exitErr)
}

// validate checks every flag before anything touches the host.
func (f *commitFlags) validate(fs *pflag.FlagSet) (pipeline.CommitOptions, error) {
	var opt pipeline.CommitOptions
	switch {
	case fs.NArg() > 0:
		return opt, unexpectedArg(fs)
	case f.pid == 0 && f.comm == "":
		return opt, usagef("give --pid PID (pgrep -x etcd) or --comm etcd")
	case f.pid != 0 && f.comm != "":
		return opt, usagef("give --pid or --comm, not both")
	case f.pid < 0:
		return opt, usagef("--pid %d is not a process id", f.pid)
	case len(f.comm) > 15:
		return opt, usagef("--comm %q is longer than the kernel's 15-byte comm", f.comm)
	case f.duration < 0:
		return opt, usagef("--duration %v is negative; give e.g. 60s, or 0 to run until Ctrl-C", f.duration)
	case f.output != "table" && f.output != "json":
		return opt, usagef("--output %q: use table or json", f.output)
	case f.sample == 0:
		return opt, usagef("--sample 0: give N >= 1 (follow 1 write in N; 1: every write)")
	case f.rawEvents && f.sample > 1:
		return opt, usagef("--raw-events follows every write: drop --sample %d", f.sample)
	}
	if err := checkTLSFlags(f.cacert, f.cert, f.key, len(f.endpoints) > 0, "--etcd-endpoints"); err != nil {
		return opt, err
	}
	rate, err := parseRate(f.load)
	if err != nil {
		return opt, err
	}
	if rate > 0 && len(f.endpoints) == 0 {
		return opt, usagef("--load needs --etcd-endpoints (the traced member's client URL)")
	}
	if rate > 0 && f.duration == 0 {
		return opt, usagef("--load needs a --duration (its lease's TTL is the duration plus a minute)")
	}
	for _, e := range f.endpoints {
		if err := checkURL(e); err != nil {
			return opt, usagef("--etcd-endpoints %v", err)
		}
	}
	ring, err := ringSize(f.ringBytes)
	if err != nil {
		return opt, err
	}
	if f.ready != "" {
		if err := safefile.CheckDir(f.ready); err != nil {
			return opt, usagef("--ready-file %s: %v", f.ready, err)
		}
	}
	tlsCfg, err := clientTLS(f.cacert, f.cert, f.key)
	if err != nil {
		return opt, err
	}
	pid, err := etcdPID("--pid", f.pid, "--comm", f.comm)
	if err != nil {
		return opt, err
	}
	return pipeline.CommitOptions{PID: pid, Endpoints: f.endpoints, TLS: tlsCfg, Duration: f.duration, LoadPerSec: rate, RingBytes: ring,
		Raw: f.rawEvents, SampleEvery: f.sample}, nil
}

// etcdPID is the one etcd process named by the pid flag or the comm flag
// (flag names as the command spells them): a usage error when the comm
// matches no process or several, or the pid is not running.
func etcdPID(pidFlag string, pid int, commFlag, comm string) (int, error) {
	if comm == "" {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			return 0, usagef("%s %d: no such process (see pgrep -x etcd)", pidFlag, pid)
		}
		return pid, nil
	}
	pids, err := host.PIDsByComm(comm)
	if err != nil {
		return 0, usagef("%s %s: %v", commFlag, comm, err)
	}
	switch len(pids) {
	case 0:
		return 0, usagef("%s %s: no such process is running (pgrep -x %s finds none): start it first, or give %s", commFlag, comm, comm, pidFlag)
	case 1:
		return pids[0], nil
	}
	return 0, usagef("%s %s: %d processes (%v): give %s of the member to trace", commFlag, comm, len(pids), pids, pidFlag)
}

// parseRate reads --load: 0, N or N/s (puts per second, at most 1000).
func parseRate(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || !(v >= 0 && v <= 1000) { // NaN fails both
		return 0, usagef("--load %q: give puts per second as N/s, 0 < N <= 1000 (e.g. 20/s), or 0 for no load", s)
	}
	return v, nil
}

// commitRun is what the table and the JSON summary show of res.
func commitRun(res *pipeline.CommitResult, pid int) *render.CommitRun {
	run := &render.CommitRun{PID: pid, Source: res.Source, ProbeErr: res.ProbeErr, EtcdVersion: res.EtcdVersion, Report: res.Report, Cluster: res.Cluster, Role: res.Role, LocalID: res.LocalID,
		Unavailable: res.Unavailable, Lost: res.Lost, Missed: res.Missed, Dropped: res.Dropped,
		SampleEvery: res.SampleEvery, WritesSeen: res.WritesSeen, WritesSampled: res.WritesSampled, WALSyncs: res.WALSyncs.Summary(),
		Model: res.Model, ModelErr: res.ModelErr, ModelScrapes: res.ModelScrapes, Target: res.Target, ClientOutsideNs: res.ClientOutsideNs.Summary(),
		SyncCalls: res.SyncCalls, SyncLost: res.SyncLost, SyncMissed: res.SyncMissed}
	if l := res.Load; l != nil {
		run.Load = &render.CommitLoad{Prefix: l.Prefix, Puts: l.Puts, Errors: l.Errors,
			ClientNs: l.ClientNs.Summary(), GetNs: l.TransportNs.Summary(), IdleGetNs: l.IdleTransportNs.Summary()}
	}
	return run
}

// capsCompared says how pid's permitted capabilities (CapPrm in
// /proc/PID/status) compare with this process's, for the error when the
// kernel refuses ptrace access: the ones it holds that this one lacks.
func capsCompared(pid int) string {
	theirs, ok1 := host.PermittedCaps(pid)
	ours, ok2 := host.PermittedCaps(0)
	if !ok1 || !ok2 {
		return "its capabilities could not be read"
	}
	if extra := theirs &^ ours; extra != 0 {
		return fmt.Sprintf("it holds %d capabilities this process lacks, CapPrm %016x here %016x; or another user namespace, or a security module", bits.OnesCount64(extra), theirs, ours)
	}
	return "its capabilities are covered: another user namespace, or a security module such as Yama's ptrace_scope"
}
