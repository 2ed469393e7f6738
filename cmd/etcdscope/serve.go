package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["serve"] = subcommand{
		summary: "run the tracers continuously and serve Prometheus metrics (/metrics, /healthz; /commit/entries with --commit-pid)",
		run:     runServe,
	}
}

type serveFlags struct {
	listen, comm, readyFile   string
	public, podLabels, pidSet bool
	writes, sched             bool
	pid, port                 int
	etcdMetrics, endpoints    []string
	dataDirs                  []string
	cacert, cert, key         string
	compareWindow             time.Duration
	ringBytes                 uint64
	commitPID                 int
	commitComm                string
	commitSample              uint32
	commitGRPC                bool
	commitDuty                string
	otlpEndpoint              string
	otlpInsecure              bool
	otlpHeaders               []string
	otlpHeaderFile            string
	otlpCA, otlpCert, otlpKey string
	otlpSampleEvery           uint64
	otlpMinDuration           time.Duration
	otlpQueue                 int
	otlpTimeout               time.Duration
}

// flagSet defines serve's flags on f (runServe, and the tests that parse
// the DaemonSets' arguments as serve does).
func (f *serveFlags) flagSet() *pflag.FlagSet {
	fs := newFlagSet("serve")
	fs.SortFlags = false
	fs.StringVar(&f.listen, "listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(exporter.DefaultPort)), "address for /metrics, /healthz (and /commit/entries with --commit-pid); loopback unless --listen-public")
	fs.BoolVar(&f.public, "listen-public", false, "allow a --listen address that is not loopback (a DaemonSet scraped over the node network)")
	fs.StringVar(&f.comm, "comm", "", "trace only fsyncs of tasks with this comm, e.g. etcd (empty: every process)")
	fs.IntVar(&f.pid, "pid", 0, "trace only fsyncs of this process id")
	fs.IntVar(&f.port, "port", tracer.DefaultPeerPort, "etcd's peer port: TCP connections with this local or remote port are traced")
	fs.StringArrayVar(&f.etcdMetrics, "etcd-metrics", nil, "etcd /metrics URL of a member on this host (repeatable), e.g. http://127.0.0.1:2381/metrics: exports the inflation of its peer RTT metric")
	fs.StringSliceVar(&f.endpoints, "etcd-endpoints", nil, "client URLs (comma-separated) for the member list: with --etcd-metrics, each series against its peer; with --commit-pid/-comm, by member")
	fs.StringVar(&f.cacert, "cacert", "", "CA bundle for https --etcd-metrics and --etcd-endpoints")
	fs.StringVar(&f.cert, "cert", "", "client certificate for https --etcd-metrics and --etcd-endpoints")
	fs.StringVar(&f.key, "key", "", "client key for --cert")
	fs.DurationVar(&f.compareWindow, "compare-window", exporter.DefaultCompareWindow, "scrape --etcd-metrics and recompute the inflation ratio this often")
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultRingBytes, ringSizeUsage+" (etcdscope_lost_events_total)")
	fs.BoolVar(&f.podLabels, "pod-labels", false, fmt.Sprintf("label etcdscope_fsync_duration_seconds with the caller's pod_uid and container_id from its cgroup path (no API server; at most %d pairs, then \"other\")", exporter.MaxPodSeries))
	fs.IntVar(&f.commitPID, "commit-pid", 0, "also split the writes of this etcd process, as etcdscope commit does, into etcdscope_commit_* (by role and member with --etcd-endpoints)")
	fs.StringVar(&f.commitComm, "commit-comm", "", "or of the one process with this comm, e.g. etcd; when it exits, the next one is followed (a restart); none yet: serve waits for it")
	fs.BoolVar(&f.commitGRPC, "commit-grpc", true, "also probe the gRPC call around each write of --commit-pid (its grpc part); false saves two uprobe firings a write")
	fs.Uint32Var(&f.commitSample, "commit-sample", 1, "follow 1 write in N of --commit-pid, decided in the kernel (1: every write); etcdscope_commit_writes_seen_total counts them all")
	fs.StringVar(&f.commitDuty, "commit-duty", "", "ON/PERIOD, e.g. 10s/60s: --commit-pid's probes attached for the first ON of every PERIOD of Unix time, the same on every member (default: always)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "with --commit-pid and --etcd-endpoints: export this member's spans of each write to an OTLP gRPC collector at host:port (TLS unless --otlp-insecure)")
	fs.BoolVar(&f.otlpInsecure, "otlp-insecure", false, "plain gRPC to --otlp-endpoint, without TLS")
	fs.StringArrayVar(&f.otlpHeaders, "otlp-header", nil, fmt.Sprintf("key=value sent with each export (repeatable, at most %d), e.g. authorization=Bearer TOKEN; a secret: never printed", otlp.MaxHeaders))
	fs.StringVar(&f.otlpHeaderFile, "otlp-header-file", "", "file of --otlp-header lines (key=value, one a line; '#' comments), kept out of the command line: root's or yours, not writable by group or others")
	fs.StringVar(&f.otlpCA, "otlp-ca", "", "PEM bundle of the CA that signed the collector's certificate (default: the system's roots)")
	fs.StringVar(&f.otlpCert, "otlp-cert", "", "client certificate for --otlp-endpoint (mutual TLS), with --otlp-key")
	fs.StringVar(&f.otlpKey, "otlp-key", "", "client key for --otlp-cert")
	fs.Uint64Var(&f.otlpSampleEvery, "otlp-sample-every", 1, "export 1 write in N: those whose Raft index is a multiple of N, so every member picks the same (1: every write)")
	fs.DurationVar(&f.otlpMinDuration, "otlp-min-duration", 0, "export a write's spans only when this member's own part lasted this long (docs/commit.md: what each member's part is)")
	fs.IntVar(&f.otlpQueue, "otlp-queue-size", otlp.DefaultQueueSpans, "spans waiting for export at most; when full, spans wait and later writes are dropped and counted")
	fs.DurationVar(&f.otlpTimeout, "otlp-timeout", otlp.DefaultTimeout, "bound on each export to --otlp-endpoint, retries included")
	fs.BoolVar(&f.writes, "writes", false, writesUsage+": etcdscope_write_*")
	fs.BoolVar(&f.sched, "sched", false, schedUsage+": etcdscope_fsync_other_state_*")
	fs.StringArrayVar(&f.dataDirs, "data-dir", nil, dataDirUsage)
	fs.StringVar(&f.readyFile, "ready-file", "", "create this file once the probes are attached and the server listens (for scripts and tests)")
	return fs
}

func runServe(args []string) error {
	var f serveFlags
	fs := f.flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope serve --help')", err)
	}
	if fs.NArg() > 0 {
		return unexpectedArg(fs)
	}
	if err := emptyFlags(fs, "comm", "etcd-endpoints", "etcd-metrics"); err != nil {
		return err
	}
	f.pidSet = fs.Changed("pid")
	cfg, tcfg, err := f.validate()
	if err != nil {
		return err
	}
	if err := tracer.CheckPrerequisites(); err != nil {
		return usagef("%v", err)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return usagef("--listen %s: %v (pick a free port)", f.listen, err)
	}
	defer ln.Close()
	cfg.Listener = ln
	ready := safefile.NewReady(f.readyFile)
	defer ready.Remove()
	var fsyncMode string // where the fsync tracer traces the calls, in words
	cfg.Ready = func() {
		onePForReader()
		fmt.Fprintln(os.Stderr, fsyncMode)
		fmt.Fprintln(os.Stderr, render.ServeListening(ln.Addr().String()))
		if err := ready.Put(ln.Addr().String() + "\n"); err != nil {
			fmt.Fprintln(os.Stderr, render.ServeReadyError(err))
		}
	}
	ctx, stop := runContext("serve", nil)
	defer stop()
	ft, err := tracer.NewFsync(tcfg.fsync)
	if err != nil {
		return tracerError("fsync tracer", err)
	}
	defer ft.Close()
	onSyscalls := slices.ContainsFunc(ft.Probes(), func(p event.Probe) bool {
		return p.Name == "tracepoint/syscalls/sys_enter_fsync" || p.Name == "tracepoint/syscalls/sys_enter_fdatasync"
	})
	// Said once serve is up (cfg.Ready): bad input found later is one line.
	who := render.ServeTraced(f.pid, f.comm)
	fsyncMode = render.ServeFsyncMode(who, ft.CanSwitchToExt4(), onSyscalls, tcfg.fsync.FSTypes)
	if ft.CanSwitchToExt4() {
		// Started before etcd (a node's boot): the fsync tracer is on the
		// syscall tracepoints until etcd's files are known.
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchFSTypes(wctx, ft, who, func() []string { return tracedFSTypes(f.pid, f.comm) }, fsTypePollEvery, os.Stderr)
		}()
		defer func() { wcancel(); <-done }()
	}
	pt, err := tracer.NewPeers(tcfg.peers)
	if err != nil {
		return tracerError("peers tracer", err)
	}
	defer pt.Close()
	cfg.Fsync, cfg.Peers = ft, pt
	if cfg.CommitPID != 0 {
		life, err := openCommit(cfg, cfg.CommitPID)
		if errors.Is(err, tracer.ErrGoFuncNotFound) || errors.Is(err, tracer.ErrNoGoSymbols) {
			// As commit: the process given is the mistake.
			return usagef("commit tracer (etcd pid %d): %v: not an etcd this etcdscope can probe; give etcd's pid (--commit-pid, pgrep -x etcd), or leave --commit-pid and --commit-comm out", cfg.CommitPID, err)
		}
		if err != nil {
			return tracerError(fmt.Sprintf("commit tracer (etcd pid %d)", cfg.CommitPID), err)
		}
		// The commit run's session closes each life's tracers; these
		// cover a return before it starts.
		defer life.Commit.Close()
		if life.Syncs != nil {
			defer life.Syncs.Close()
		}
		cfg.Commit, cfg.CommitUnavailable, cfg.CommitSyncs = life.Commit, life.Unavailable, life.Syncs
	}
	if cfg.CommitComm != "" {
		// Without a first process (CommitPID 0) serve starts waiting.
		cfg.CommitNext = nextCommit(cfg, cfg.CommitPID)
	}
	return setupErr(exporter.Run(ctx, cfg))
}

// openCommit loads the commit tracer on etcd process pid and, as commit
// does, the fsync tracer on it alone, which splits each WAL fdatasync
// (leader's and follower's) into the disk's layers and the thread's
// states for /commit/entries; a failure of that one is said and the run
// goes on without it.
func openCommit(cfg exporter.Config, pid int) (exporter.CommitLife, error) {
	ct, err := tracer.NewCommit(tracer.CommitConfig{PID: pid, RingBytes: cfg.RingBytes, Sched: true, SampleEvery: cfg.CommitSampleEvery, NoGRPC: cfg.CommitNoGRPC})
	if err != nil {
		return exporter.CommitLife{}, err
	}
	life := exporter.CommitLife{Commit: ct, PID: pid}
	for part, p := range ct.Unavailable() {
		life.Unavailable = append(life.Unavailable, analysis.UnavailablePart(string(part), p))
	}
	st, err := tracer.NewFsync(tracer.FsyncConfig{PID: uint32(pid), Sched: true, Writes: true, RingBytes: cfg.RingBytes, FSTypes: tracedFSTypes(pid, "")})
	if err != nil {
		fmt.Fprintln(os.Stderr, render.ServeCommitSyncsError(err))
	} else {
		life.Syncs = st
	}
	return life, nil
}

// fsTypePollEvery is how often serve, its fsync tracer started on the
// syscall tracepoints without knowing etcd's filesystem (no --data-dir,
// no etcd yet), looks at etcd's open files again (watchFSTypes).
const fsTypePollEvery = 2 * time.Second

// fsyncSwitcher is the fsync tracer as watchFSTypes moves it
// (tracer.FsyncTracer).
type fsyncSwitcher interface {
	SwitchToExt4(ctx context.Context) (stranded uint64, err error)
}

// watchFSTypes looks at fsTypes every poll until it knows the traced
// files' filesystems: all on ext4, it moves ft's calls to ext4's
// tracepoints (tracer.FsyncTracer.SwitchToExt4: every call counted once
// across it), so that serve holds no syscall tracepoint from then on, and
// says so in one line naming who (render.ServeTraced); on any other
// filesystem the syscall tracepoints stay, as they would have had etcd run
// at serve's start. It returns then, or when ctx ends.
func watchFSTypes(ctx context.Context, ft fsyncSwitcher, who string, fsTypes func() []string, poll time.Duration, logw io.Writer) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ts := fsTypes()
		switch {
		case ts == nil:
			continue
		case slices.ContainsFunc(ts, func(t string) bool { return t != "ext4" }):
			fmt.Fprintln(logw, render.ServeFsyncStaysOnSyscalls(who, ts))
			return
		}
		stranded, err := ft.SwitchToExt4(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			fmt.Fprintln(logw, render.ServeFsyncSwitchError(err))
		default:
			fmt.Fprintln(logw, render.ServeFsyncOnExt4(who, stranded))
		}
		return
	}
}

// commitPollEvery is how often serve --commit-comm looks for the next
// etcd after the traced one exited: a restarted member's first writes
// before it are not split (a static pod's etcd takes seconds to start).
const commitPollEvery = time.Second

// nextCommit returns serve --commit-comm's exporter.Config.CommitNext:
// it waits for the one live process of cfg.CommitComm that is not the
// last one traced (first, at the start; 0: none yet) and loads the
// tracers on it. A process it cannot probe (another binary of that comm)
// is said once and waited past.
func nextCommit(cfg exporter.Config, first int) func(ctx context.Context) (exporter.CommitLife, error) {
	last, refused := first, map[int]bool{}
	return func(ctx context.Context) (exporter.CommitLife, error) {
		tick := time.NewTicker(commitPollEvery)
		defer tick.Stop()
		for {
			if pids, err := host.PIDsByComm(cfg.CommitComm); err == nil && len(pids) == 1 && pids[0] != last && !refused[pids[0]] {
				life, err := openCommit(cfg, pids[0])
				if err == nil {
					last = pids[0]
					return life, nil
				}
				refused[pids[0]] = true
				fmt.Fprintln(os.Stderr, render.ServeCommitNextError(pids[0], err))
			}
			select {
			case <-ctx.Done():
				return exporter.CommitLife{}, ctx.Err()
			case <-tick.C:
			}
		}
	}
}

// noneRunning says whether no process of comm runs (a failed look-up is
// not "none": etcdPID says it).
func noneRunning(comm string) bool {
	pids, err := host.PIDsByComm(comm)
	return err == nil && len(pids) == 0
}

// tracerError is a tracer that could not load: a usage error (exit 2)
// when privilege or BTF is missing (setupErr).
func tracerError(what string, err error) error {
	return setupErr(fmt.Errorf("%s: %w", what, err))
}

// tracerConfigs are the configurations serve loads its tracers with.
type tracerConfigs struct {
	fsync tracer.FsyncConfig
	peers tracer.PeersConfig
}

// validate checks every flag before anything touches the host.
func (f *serveFlags) validate() (exporter.Config, tracerConfigs, error) {
	var cfg exporter.Config
	var tcfg tracerConfigs
	switch {
	case f.port < 1 || f.port > 65535:
		return cfg, tcfg, usagef("--port %d is out of range; give 1-65535 (etcd's peer port is 2380)", f.port)
	case len(f.comm) > 15:
		return cfg, tcfg, usagef("--comm %q is longer than the kernel's 15-byte comm; give its first 15 bytes", f.comm)
	case f.pid < 0:
		return cfg, tcfg, usagef("--pid %d is not a process id", f.pid)
	case f.pidSet && f.pid == 0:
		return cfg, tcfg, usagef("--pid 0 is not a process id; give etcd's (pgrep etcd), or drop --pid")
	case f.pid != 0 && f.comm != "":
		return cfg, tcfg, usagef("give --pid or --comm, not both: --pid %d names the process already", f.pid)
	case f.compareWindow < 10*time.Second:
		return cfg, tcfg, usagef("--compare-window %v is too short: etcd observes its peer RTT metric about once per 30 s per prober; give 1m or more", f.compareWindow)
	}
	ring, err := ringSize(f.ringBytes)
	if err != nil {
		return cfg, tcfg, err
	}
	if f.readyFile != "" {
		if err := safefile.CheckDir(f.readyFile); err != nil {
			return cfg, tcfg, usagef("--ready-file %s: %v", f.readyFile, err)
		}
	}
	host, port, err := normalizeListen(f.listen)
	if err != nil {
		return cfg, tcfg, err
	}
	f.listen = net.JoinHostPort(host, port) // IPv6 bracketed, IPv4 not
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return cfg, tcfg, usagef("--listen %q: port %q is not a number in 0-65535", f.listen, port)
	}
	if !f.public && !isLoopback(host) {
		return cfg, tcfg, usagef("--listen %s is not a loopback address; add --listen-public to serve metrics beyond this host", f.listen)
	}
	if f.pid > 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(f.pid)); err != nil {
			return cfg, tcfg, usagef("--pid %d: no such process (see pgrep etcd)", f.pid)
		}
		tcfg.fsync.PID = uint32(f.pid)
	}
	cfg.PodLabels = f.podLabels
	// What the operator watches keeps its series whatever other processes do.
	for _, c := range []string{f.comm, f.commitComm} {
		if c != "" {
			cfg.KeepComms = append(cfg.KeepComms, c)
		}
	}
	tcfg.fsync.Comm = f.comm
	tcfg.fsync.RingBytes = ring
	tcfg.fsync.Writes = f.writes
	tcfg.fsync.Sched = f.sched
	if tcfg.fsync.FSTypes, err = dataDirFSTypes(f.dataDirs); err != nil {
		return cfg, tcfg, err
	}
	if len(f.dataDirs) == 0 {
		tcfg.fsync.FSTypes = tracedFSTypes(f.pid, f.comm)
		// Not known yet (no process of --comm runs, or its files cannot
		// be told): serve keeps looking (watchFSTypes).
		tcfg.fsync.SwitchLater = tcfg.fsync.FSTypes == nil && (f.pid != 0 || f.comm != "")
	}
	cfg.Sched = f.sched
	// etcdscope_block_flush_duration_seconds observes every flush of every
	// disk, whoever issued it: not only those during a traced call.
	tcfg.fsync.EveryBlock = true
	tcfg.peers.Port = uint16(f.port)
	tcfg.peers.RingBytes = ring
	cfg.RingBytes = ring // named in the loss log
	for _, u := range f.etcdMetrics {
		if err := checkURL(u); err != nil {
			return cfg, tcfg, usagef("--etcd-metrics %v", err)
		}
	}
	cfg.EtcdMetrics = f.etcdMetrics
	cfg.CompareWindow = f.compareWindow
	commit := f.commitPID != 0 || f.commitComm != ""
	switch {
	case f.commitPID < 0:
		return cfg, tcfg, usagef("--commit-pid %d is not a process id", f.commitPID)
	case f.commitPID != 0 && f.commitComm != "":
		return cfg, tcfg, usagef("give --commit-pid or --commit-comm, not both")
	case f.commitSample == 0:
		return cfg, tcfg, usagef("--commit-sample 0: give N >= 1 (1 in N writes; 1: every write)")
	case len(f.commitComm) > 15:
		return cfg, tcfg, usagef("--commit-comm %q is longer than the kernel's 15-byte comm", f.commitComm)
	case len(f.endpoints) > 0 && len(f.etcdMetrics) == 0 && !commit:
		return cfg, tcfg, usagef("--etcd-endpoints goes with --etcd-metrics or --commit-pid (the member list labels their metrics)")
	}
	if err := f.validateOTLP(commit, &cfg); err != nil {
		return cfg, tcfg, err
	}
	cfg.CommitSampleEvery, cfg.CommitNoGRPC, cfg.CommitComm = f.commitSample, !f.commitGRPC, f.commitComm
	if f.commitDuty != "" {
		if !commit {
			return cfg, tcfg, usagef("--commit-duty cycles the probes of --commit-pid (or --commit-comm): give one, or drop --commit-duty")
		}
		if cfg.CommitDuty, err = parseDuty(f.commitDuty); err != nil {
			return cfg, tcfg, err
		}
	}
	switch {
	case !commit:
	case f.commitComm != "" && noneRunning(f.commitComm):
		// serve waits for the first one (nextCommit), as for the next
		// after a restart: an agent may start before etcd (a node's boot).
	default:
		if cfg.CommitPID, err = etcdPID("--commit-pid", f.commitPID, "--commit-comm", f.commitComm); err != nil {
			return cfg, tcfg, err
		}
	}
	for _, e := range f.endpoints {
		if err := checkURL(e); err != nil {
			return cfg, tcfg, usagef("--etcd-endpoints %v", err)
		}
	}
	cfg.EtcdEndpoints = f.endpoints
	if err := checkTLSFlags(f.cacert, f.cert, f.key, len(f.etcdMetrics) > 0 || len(f.endpoints) > 0, "--etcd-metrics", "--etcd-endpoints"); err != nil {
		return cfg, tcfg, err
	}
	tlsCfg, err := clientTLS(f.cacert, f.cert, f.key)
	if err != nil {
		return cfg, tcfg, err
	}
	cfg.EtcdTLS = tlsCfg
	return cfg, tcfg, nil
}

// minDutyOn is the shortest --commit-duty window: each attach and detach
// of the commit tracer's probes takes tens of ms (uprobe_multi on Linux
// 6.18, docs/commit.md), so a shorter window would be mostly switching.
const minDutyOn = time.Second

// parseDuty reads --commit-duty ON/PERIOD.
func parseDuty(s string) (commit.Duty, error) {
	on, period, ok := strings.Cut(s, "/")
	if !ok {
		return commit.Duty{}, usagef("--commit-duty %q: give ON/PERIOD, e.g. 10s/60s (attached 10 s of every minute)", s)
	}
	var d commit.Duty
	var err1, err2 error
	d.On, err1 = time.ParseDuration(on)
	d.Period, err2 = time.ParseDuration(period)
	switch {
	case err1 != nil || err2 != nil:
		return d, usagef("--commit-duty %q: ON and PERIOD are durations, e.g. 10s/60s", s)
	case d.On < minDutyOn:
		return d, usagef("--commit-duty %q: give ON of at least %v, e.g. 10s/60s", s, minDutyOn)
	case d.On > d.Period:
		return d, usagef("--commit-duty %q: ON is longer than PERIOD; give ON <= PERIOD, e.g. 10s/60s", s)
	}
	return d, nil
}

// isLoopback accepts loopback IPs and "localhost"; an empty host (all
// interfaces) is not loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// validateOTLP checks the --otlp-* flags into cfg.OTLP (nil without
// --otlp-endpoint).
func (f *serveFlags) validateOTLP(commit bool, cfg *exporter.Config) error {
	if f.otlpEndpoint == "" {
		if f.otlpInsecure || len(f.otlpHeaders) > 0 || f.otlpHeaderFile != "" || f.otlpCA != "" || f.otlpCert != "" || f.otlpKey != "" || f.otlpSampleEvery != 1 || f.otlpMinDuration != 0 || f.otlpQueue != otlp.DefaultQueueSpans || f.otlpTimeout != otlp.DefaultTimeout {
			return usagef("the --otlp-* flags go with --otlp-endpoint host:port")
		}
		return nil
	}
	switch err := otlp.CheckEndpoint(f.otlpEndpoint); {
	case err != nil:
		return usagef("--otlp-endpoint %v", err)
	case !commit:
		return usagef("--otlp-endpoint exports the writes of --commit-pid (or --commit-comm): give one")
	case len(f.endpoints) == 0:
		return usagef("--otlp-endpoint needs --etcd-endpoints (this member's client URL): the span IDs derive from etcd's cluster and member ids")
	case f.otlpSampleEvery == 0:
		return usagef("--otlp-sample-every 0: give N >= 1 (1 write in N by Raft index; 1: every write)")
	case f.otlpMinDuration < 0:
		return usagef("--otlp-min-duration %v: give 0 or a positive duration, e.g. 10ms", f.otlpMinDuration)
	case f.otlpQueue < 1 || f.otlpQueue > 1<<20:
		return usagef("--otlp-queue-size %d: give 1 to %d spans", f.otlpQueue, 1<<20)
	case f.otlpTimeout <= 0 || f.otlpTimeout > time.Minute:
		return usagef("--otlp-timeout %v: give a duration up to 1m, e.g. 5s", f.otlpTimeout)
	case f.otlpInsecure && (f.otlpCA != "" || f.otlpCert != ""):
		return usagef("--otlp-ca/--otlp-cert are for TLS: drop --otlp-insecure")
	case (f.otlpCert == "") != (f.otlpKey == ""):
		return usagef("--otlp-cert and --otlp-key go together")
	}
	args, err := f.otlpHeaderArgs()
	if err != nil {
		return err
	}
	headers, err := otlpHeaders(args)
	if err != nil {
		return err
	}
	tlsCfg, err := loadTLS(etcdinfo.TLSFiles{CAFlag: "--otlp-ca", CA: f.otlpCA, CertFlag: "--otlp-cert", Cert: f.otlpCert, KeyFlag: "--otlp-key", Key: f.otlpKey})
	if err != nil {
		return err
	}
	cfg.OTLP = &otlp.Config{Endpoint: f.otlpEndpoint, Insecure: f.otlpInsecure, TLS: tlsCfg, Headers: headers, QueueSpans: f.otlpQueue,
		Timeout: f.otlpTimeout, Sampling: otlp.Sampling{Every: f.otlpSampleEvery, MinNs: f.otlpMinDuration.Nanoseconds()}}
	return nil
}

// headerArg is one key=value header and where it was given: a flag, a
// line of --otlp-header-file, an entry of the SDK's variable.
type headerArg struct{ from, arg string }

// otlpHeaderArgs gathers the headers of --otlp-header, --otlp-header-file
// and, when neither is given, the SDK's OTEL_EXPORTER_OTLP_(TRACES_)HEADERS
// (taken out of the environment either way: otlp.TakeEnvHeaders). A
// variable beside the flags is refused, not silently dropped.
func (f *serveFlags) otlpHeaderArgs() ([]headerArg, error) {
	var args []headerArg
	for _, a := range f.otlpHeaders {
		args = append(args, headerArg{"--otlp-header", a})
	}
	if f.otlpHeaderFile != "" {
		b, err := safefile.ReadSecret(f.otlpHeaderFile, safefile.MaxSecretBytes)
		if err != nil {
			return nil, usagef("--otlp-header-file %v", err)
		}
		hs, lines := otlp.ParseHeaderFile(b)
		if len(hs) == 0 {
			return nil, usagef("--otlp-header-file %s holds no key=value line: give e.g. authorization=Bearer TOKEN", f.otlpHeaderFile)
		}
		for i, h := range hs {
			args = append(args, headerArg{fmt.Sprintf("--otlp-header-file %s line %d:", f.otlpHeaderFile, lines[i]), h})
		}
	}
	env, v := otlp.TakeEnvHeaders()
	switch {
	case env == "":
	case len(args) > 0:
		return nil, usagef("%s is set and --otlp-header(-file) given: give the headers one way (unset %s, or drop the flags)", env, env)
	default:
		hs, err := otlp.ParseEnvHeaders(v)
		if err != nil {
			return nil, usagef("%s %v", env, err)
		}
		for _, h := range hs {
			args = append(args, headerArg{env, h})
		}
	}
	if len(args) > otlp.MaxHeaders {
		return nil, usagef("%d headers given: give at most %d", len(args), otlp.MaxHeaders)
	}
	return args, nil
}

// otlpHeaders checks each header's key=value; the errors name where it
// was given and its key, never the value (a secret).
func otlpHeaders(args []headerArg) (map[string]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(args))
	for _, a := range args {
		k, v, err := otlp.ParseHeader(a.arg)
		if err != nil {
			return nil, usagef("%s %v", a.from, err)
		}
		if _, dup := h[k]; dup {
			return nil, usagef("%s %q given twice: give each key once", a.from, k)
		}
		h[k] = v
	}
	return h, nil
}
