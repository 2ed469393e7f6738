package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["hypervisor"] = subcommand{
		summary: "trace a hypervisor's (QEMU's) image-file I/O and flushes with their host layers; report aio and cache modes",
		run:     runHypervisor,
	}
}

type hvFlags struct {
	pid                 int
	comm, output, ready string
	duration            time.Duration
	ringBytes           uint64
}

func runHypervisor(args []string) error {
	var f hvFlags
	fs := newFlagSet("hypervisor")
	fs.SortFlags = false
	fs.IntVar(&f.pid, "pid", 0, "the hypervisor's process id (pgrep qemu)")
	fs.StringVar(&f.comm, "comm", "", "or every process with this comm, e.g. qemu-system-x86 (15 bytes at most)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	fs.StringVar(&f.output, "output", "table", "table, or json (JSON Lines for etcdscope merge; see docs/merge.md)")
	fs.StringVar(&f.ready, "ready-file", "", "create this file once every probe is attached (for scripts and tests)")
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultRingBytes, ringSizeUsage+" (each tracer's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope hypervisor --help')", err)
	}
	switch {
	case fs.NArg() > 0:
		return unexpectedArg(fs)
	case !fs.Changed("pid") && f.comm == "":
		return usagef("give --pid PID (pgrep qemu) or --comm qemu-system-x86")
	case fs.Changed("pid") && f.comm != "":
		return usagef("--pid and --comm both pick the hypervisor: give one of them")
	case fs.Changed("pid") && f.pid == 0:
		return usagef("--pid 0 is not a process id; give the hypervisor's (pgrep qemu)")
	case f.pid < 0:
		return usagef("--pid %d is not a process id", f.pid)
	case len(f.comm) > 15:
		return usagef("--comm %q is longer than the kernel's 15-byte comm; give its first 15 bytes (qemu-system-x86)", f.comm)
	case f.duration < 0:
		return usagef("--duration %v is negative; give e.g. 30s", f.duration)
	case f.output != "table" && f.output != "json":
		return usagef("--output %q: use table or json", f.output)
	}
	ring, err := ringSize(f.ringBytes)
	if err != nil {
		return err
	}
	if f.pid > 0 {
		if err := checkQEMUPID("pid", f.pid); err != nil {
			return err
		}
	}
	if f.ready != "" {
		if err := safefile.CheckDir(f.ready); err != nil {
			return usagef("--ready-file %s: %v", f.ready, err)
		}
	}
	if err := tracer.CheckPrerequisites(); err != nil {
		return usagef("%v", err)
	}
	return traceHypervisor(f, ring)
}

func traceHypervisor(f hvFlags, ring uint32) error {
	_, s, stop := newSession("hypervisor", f.duration, f.ready)
	defer stop()
	defer s.Close()
	ft, err := tracer.NewFsync(tracer.FsyncConfig{PID: uint32(f.pid), Comm: f.comm, RingBytes: ring})
	if err != nil {
		return setupErr(err)
	}
	fst := s.Add("fsync", ft)
	ht, err := tracer.NewHypervisor(tracer.HypervisorConfig{PID: uint32(f.pid), Comm: f.comm, RingBytes: ring})
	if err != nil {
		return err
	}
	hst := s.Add("hypervisor", ht)
	unavailable := analysis.UnavailableProbes(append(ft.Probes(), ht.Probes()...))
	enc := json.NewEncoder(render.JSONText(os.Stdout))
	emit := func(v any) error {
		if f.output != "json" {
			return nil
		}
		return enc.Encode(v)
	}
	if err := emit(merge.HostHeader{Type: "hypervisor", V: merge.SchemaVersion, PID: uint32(f.pid), Comm: f.comm,
		Clock: "CLOCK_MONOTONIC", StartNs: host.MonotonicNs()}); err != nil {
		return err
	}
	if err := s.Ready(); err != nil {
		return err
	}
	target := render.HypervisorTarget{PID: f.pid, Comm: f.comm}
	fmt.Fprintln(os.Stderr, render.HypervisorStart(target, f.duration))

	// Two data paths, one sink: the fsync tracer's flushes (with their host
	// layers) and the hypervisor tracer's reads, writes and submissions.
	sink := &pipeline.HostIOKeeper{Emit: emit}
	fp := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Sinks: []pipeline.FsyncSink{sink},
		FileKind: func(string) string { return analysis.KindOther }}) // images are not etcd's files
	hp := pipeline.NewHypervisor(pipeline.HypervisorConfig{Sinks: []pipeline.HostIOSink{sink}})
	s.Go(func() error { return fp.Run(ft) })
	s.Go(func() error { return hp.Run(ht) })
	if err := s.Wait(pipeline.WaitOptions{}); err != nil {
		return err
	}
	if err := s.Finish(nil); err != nil {
		return err
	}
	ios, fsyncs := sink.IOs, sink.Fsyncs
	images := sink.Images()
	sum := merge.HostSummary{Type: "hv_summary", V: merge.HostSummaryVersion, Images: images, Warnings: render.MergeWarnings(images),
		LostEvents: hst.Lost, MissedEvents: hst.Missed, FsyncLostEvents: fst.Lost, FsyncMissedEvents: fst.Missed, Unavailable: unavailable}
	if f.output == "json" {
		if err := enc.Encode(&sum); err != nil {
			return err
		}
	} else if err := render.HostTable(os.Stdout, sum, fsyncs, ios); err != nil {
		return err
	}
	if len(images) == 0 {
		fmt.Fprintln(os.Stderr, render.HypervisorNoImageIO(target))
	}
	return decodeErrors(fp.DecodeErrors() + hp.DecodeErrors())
}

// checkQEMUPID refuses pid, given as --flag, unless it is a running QEMU:
// any process's file I/O would read as image I/O (etcd's WAL listed as a
// raw image).
func checkQEMUPID(flag string, pid int) error {
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil || pid <= 0 {
		return usagef("--%s %d: no such process (see pgrep qemu)", flag, pid)
	}
	if q := host.QEMUOf(uint32(pid)); !q.IsQEMU() {
		return usagef("--%s %d is not a QEMU process (exe %q, comm %q, argv[0] %q: none names qemu): give the hypervisor's (pgrep qemu); for etcd's own fsyncs run etcdscope fsync --pid %d", flag, pid, q.Exe, q.Comm, q.Argv0, pid)
	}
	return nil
}
