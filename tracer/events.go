package tracer

import "github.com/cilium/ebpf"

// sizeEvents sizes the shared events ring buffer of an object that
// includes bpf/events.h (ring bytes, a power of two ≥ page size) and sets
// wake_bytes, the fill level whose crossing wakes the reader early, to an
// eighth of it (256 KiB of the default ring: ~8 ms of make bench's 200k
// records/s, so a reader that missed a poll is woken before it fills).
func sizeEvents(spec *ebpf.CollectionSpec, ring uint32) error {
	spec.Maps["events"].MaxEntries = ring
	return setVariables(spec, map[string]any{"wake_bytes": uint64(ring / 8)})
}
