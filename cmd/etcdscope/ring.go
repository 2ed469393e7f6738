package main

import "github.com/etcdscope/etcdscope/tracer"

// maxRingBytes bounds --ring-size: the kernel maps a ring buffer twice into
// the reader, so 1 GiB is already 2 GiB resident.
const maxRingBytes = 1 << 30

// ringSizeUsage is --ring-size's help, shared by the commands that take it.
const ringSizeUsage = "bytes of each BPF ring buffer, a power of two from 4096 to 1 GiB (kernel memory); raise it when events are lost"

// ringSize checks --ring-size n and returns it as the tracers take it.
func ringSize(n uint64) (uint32, error) {
	if n < 4096 || n > maxRingBytes || n&(n-1) != 0 {
		return 0, usagef("--ring-size %d must be a power of two from 4096 to %d (1 GiB); the default is %d", n, maxRingBytes, tracer.DefaultRingBytes)
	}
	return uint32(n), nil
}
