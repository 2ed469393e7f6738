package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/safefile"
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
	fs.Uint64Var(&f.ringBytes, "ring-size", tracer.DefaultRingBytes, ringSizeUsage+" (each of the two tracers)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope hypervisor --help')", err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (see 'etcdscope hypervisor --help')", fs.Arg(0))
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
		if _, err := os.Stat("/proc/" + strconv.Itoa(f.pid)); err != nil {
			return usagef("--pid %d: no such process (see pgrep qemu)", f.pid)
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	ft, err := tracer.NewFsync(tracer.FsyncConfig{PID: uint32(f.pid), Comm: f.comm, RingBytes: ring})
	if err != nil {
		return setupErr(err)
	}
	defer ft.Close()
	ht, err := tracer.NewHypervisor(tracer.HypervisorConfig{PID: uint32(f.pid), Comm: f.comm, RingBytes: ring})
	if err != nil {
		return err
	}
	defer ht.Close()
	var unavailable []string
	for _, p := range append(ft.Probes(), ht.Probes()...) {
		if !p.Attached {
			unavailable = append(unavailable, p.Name+": "+p.Why)
		}
	}
	var mu sync.Mutex // guards enc, ios, fsyncs
	enc := json.NewEncoder(os.Stdout)
	emit := func(v any) error {
		if f.output != "json" {
			return nil
		}
		return enc.Encode(v)
	}
	var ios []merge.HostIO
	var fsyncs []analysis.FsyncRecord
	if err := emit(merge.HostHeader{Type: "hypervisor", V: merge.SchemaVersion, PID: uint32(f.pid), Comm: f.comm,
		Clock: "CLOCK_MONOTONIC", StartNs: host.MonotonicNs()}); err != nil {
		return err
	}
	ready := safefile.NewReady(f.ready)
	defer ready.Remove()
	if err := ready.Put(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		return fmt.Errorf("writing --ready-file: %w", err)
	}
	fmt.Fprintf(os.Stderr, "tracing the image I/O of %s; Ctrl-C to stop\n", hvTarget(f))

	devs := host.NewDeviceResolver()
	var devMu sync.Mutex // DeviceResolver is not safe for concurrent use
	paths := host.NewPathResolver()
	var pathMu sync.Mutex
	pathOf := func(e *event.Fsync) string { pathMu.Lock(); defer pathMu.Unlock(); return paths.Path(e) }

	errs := make(chan error, 2)
	go func() { // fsync tracer: the flushes, with their host layers
		attr := analysis.NewAttributor(func(d event.Dev) (string, []event.Dev) {
			devMu.Lock()
			defer devMu.Unlock()
			info := devs.Resolve(d)
			return info.Name, info.Disks
		})
		var ev event.Any // reused: Read allocates nothing per event
		for {
			if err := ft.Read(&ev); err != nil {
				if errors.Is(err, tracer.ErrClosed) || errors.Is(err, tracer.ErrDrained) {
					err = nil
				}
				errs <- err
				return
			}
			if ev.Kind != event.KindFsync {
				attr.AddEvent(&ev)
				continue
			}
			fe := ev.Fsync
			rec := attr.Attribute(fe)
			rec.Path = pathOf(&fe)
			rec.FileKind = analysis.KindOther
			mu.Lock()
			fsyncs = append(fsyncs, rec)
			err := emit(&rec)
			mu.Unlock()
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // hypervisor tracer: reads, writes, submissions
		var e event.HypervisorIO
		for {
			if err := ht.Read(&e); err != nil {
				if errors.Is(err, tracer.ErrClosed) || errors.Is(err, tracer.ErrDrained) {
					err = nil
				}
				errs <- err
				return
			}
			fe := event.Fsync{PID: e.PID, FD: e.FD, Dev: e.Dev, Ino: e.Ino, IsBlockdev: e.IsBlockdev, Names: e.Names}
			rec := merge.HostIO{Type: "hv_io", V: merge.SchemaVersion, Op: e.Op.String(), PID: e.PID, TID: e.TID,
				Comm: e.Comm, FD: e.FD, Path: pathOf(&fe), Dev: e.Dev.String(), Ino: e.Ino, FS: e.FSType,
				ODirect: e.ODirect, ODsync: e.ODsync || e.OSync, Opcode: e.Opcode, Nr: e.Nr,
				StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret}
			if e.IsBlockdev {
				rec.FS = "blockdev"
			}
			mu.Lock()
			ios = append(ios, rec)
			err := emit(&rec)
			mu.Unlock()
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	// Drain both: every call that ended before now is already recorded.
	if err := ft.Drain(); err != nil {
		return fmt.Errorf("draining the fsync ring buffer: %w", err)
	}
	if err := ht.Drain(); err != nil {
		return fmt.Errorf("draining the hypervisor ring buffer: %w", err)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	hvLost, err := ht.Lost()
	if err != nil {
		return err
	}
	fsLost, err := ft.Lost()
	if err != nil {
		return err
	}
	images := merge.Images(ios, fsyncs, imageFormat, func(dev string) string {
		var maj, min uint32
		if _, err := fmt.Sscanf(dev, "%d:%d", &maj, &min); err != nil {
			return ""
		}
		return devs.Resolve(event.MkDev(maj, min)).Name
	})
	sum := merge.HostSummary{Type: "hv_summary", V: merge.SchemaVersion, Images: images, Warnings: merge.Warnings(images),
		LostEvents: hvLost, MissedEvents: ht.Missed(), FsyncLostEvents: fsLost, FsyncMissedEvents: ft.Missed(), Unavailable: unavailable}
	if f.output == "json" {
		return enc.Encode(&sum)
	}
	return render.HostTable(os.Stdout, sum, fsyncs, ios)
}

func hvTarget(f hvFlags) string {
	if f.pid != 0 {
		return fmt.Sprintf("pid %d", f.pid)
	}
	return fmt.Sprintf("comm %q", f.comm)
}

// imageFormat reads the image's first bytes (the hypervisor's own open
// flags say nothing of the format).
func imageFormat(path string) string {
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	b := make([]byte, 8)
	n, _ := io.ReadFull(fh, b)
	return merge.FormatFromMagic(b[:n])
}
