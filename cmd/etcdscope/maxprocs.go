package main

import (
	"fmt"
	"math"
	"os"
	"runtime"

	"go.uber.org/automaxprocs/maxprocs"
)

// fitGOMAXPROCS lowers GOMAXPROCS to the process's cgroup CPU limit
// rounded up, down to 1 (cgroup v2's cpu.max or v1's cfs quota, read by
// go.uber.org/automaxprocs; GOMAXPROCS in the environment wins). Go's own
// container-aware default (1.25+) stops at 2 (runtime/cgroup_linux.go: "A
// limit less than 2 is rounded up to 2"), and that second P is what makes
// a reader held to a fraction of a CPU lose events: while the reader waits
// on its ring, the idle P runs the garbage collector's idle mark workers,
// which spend the cgroup's quota, so when the ring wakes the reader it is
// throttled for the rest of the period. `etcdscope peers` held to 10% of a
// CPU under 30k events/s lost 1.4k-14k events in 3 of 3 runs with 2 Ps
// (ring peak 2039-2045 KiB of 2048) and none in 3 of 3 with 1 (peak
// 367-863 KiB), using less CPU (bench/findings.md, section 13). It never
// raises GOMAXPROCS. It records what it did in procsNote for check.
func fitGOMAXPROCS() {
	before := runtime.GOMAXPROCS(0)
	quota := -1.0 // no limit read
	_, err := maxprocs.Set(maxprocs.Min(1), maxprocs.RoundQuotaFunc(func(cpus float64) int {
		quota = cpus
		return min(int(math.Ceil(cpus)), before)
	}))
	procsNote = describeProcs(runtime.GOMAXPROCS(0), before, quota, os.Getenv("GOMAXPROCS"), err)
}

// procsNote says how many Ps this process runs on and why (check's
// "GOMAXPROCS" line); set by fitGOMAXPROCS.
var procsNote string

// describeProcs words fitGOMAXPROCS's outcome: now Ps after it, before
// it, the cgroup CPU limit in CPUs (negative: none read), GOMAXPROCS from
// the environment, and the error reading the cgroup (the run goes on with
// Go's default).
func describeProcs(now, before int, quota float64, env string, err error) string {
	switch {
	case env != "":
		return fmt.Sprintf("%d, as GOMAXPROCS=%s in the environment says", now, env)
	case err != nil:
		return fmt.Sprintf("%d (Go's default): the cgroup CPU limit could not be read: %v", now, err)
	case quota < 0:
		return fmt.Sprintf("%d (Go's default): no cgroup CPU limit", now)
	case now < before:
		return fmt.Sprintf("%d: the cgroup CPU limit (%.2f CPUs) rounded up, down from Go's default %d (an idle P's GC workers would spend the quota the ring reader needs)", now, quota, before)
	default:
		return fmt.Sprintf("%d (Go's default): the cgroup CPU limit is %.2f CPUs", now, quota)
	}
}

// onePForReader drops to one P, unless GOMAXPROCS is in the environment:
// for `fsync` without --workload, whose one goroutine reads the ring,
// attributes and writes each record, so a second P only adds thread
// wake-ups. Each poll readies that goroutine from the netpoller, and
// with a P idle the runtime starts a spinning thread to look for more
// work, which finds none and parks again (bench/findings.md 26, 28).
// `serve` too: its fsync and peers readers and the scrapes' handler share
// one P at 10k fsync/s and at 1k etcd puts/s with every call counted, for
// less CPU than on two (findings 34), and so do the commit tracer's reader
// with them at 1k and at ~3k etcd puts/s (--commit-pid, findings 36).
// Called once the tracers are ready: the BPF load before it keeps both Ps
// (a later etcd's commit tracer, --commit-comm, loads on one).
func onePForReader() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > 1 {
		runtime.GOMAXPROCS(1)
	}
}
