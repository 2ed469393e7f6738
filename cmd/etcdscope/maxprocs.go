package main

import (
	"math"
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
// raises GOMAXPROCS, and returns what it is now.
func fitGOMAXPROCS() int {
	now := runtime.GOMAXPROCS(0)
	maxprocs.Set(maxprocs.Min(1), maxprocs.RoundQuotaFunc(func(cpus float64) int {
		return min(int(math.Ceil(cpus)), now)
	}))
	return runtime.GOMAXPROCS(0)
}
