package tracer

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/etcdscope/etcdscope/event"
)

// fixed returns raw as the bpf2go struct T it holds, in place (valid as
// long as raw), or an error naming what when raw is too short for a T.
func fixed[T any](raw []byte, what string) (*T, error) {
	var zero T
	if len(raw) < int(unsafe.Sizeof(zero)) || len(raw) == 0 {
		return nil, fmt.Errorf("decoding %s event: record of %d bytes is too short", what, len(raw))
	}
	return (*T)(unsafe.Pointer(&raw[0])), nil
}

// cbytes returns the bytes of a NUL-terminated C string field, without
// copying them.
func cbytes(b []int8) []byte {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return buf[:i]
	}
	return buf
}

// internMax bounds each of decoder's tables; one that fills is emptied
// and refills with what is current (files come and go: WAL segments).
const internMax = 4096

// decoder turns raw records into events. It interns the strings that
// repeat from record to record (comm, filesystem type, path components,
// the Names slice itself), so a steady stream decodes without allocating:
// ten allocations per fsync record before (BenchmarkDecodeFsync).
// Interned values are shared between events and must not be modified.
// Not safe for concurrent use; the zero value is ready.
type decoder struct {
	recent [64]string
	strs   map[string]string
	names  map[string][]string // key: the raw components, each ended by NUL
	key    []byte
	// recentNames: the last two distinct raw name fields pathNames
	// answered and its answers, compared whole before the key is built
	// and hashed (one WAL file, or two files synced in turn); nextNames
	// is the slot a miss replaces.
	recentNames [2]rawNames
	nextNames   int
	// kp: the last KindKPart or KindFsyncKPart event's Slot, reused.
	kp []event.KPEntry
}

// pathComponents is how many d_name components a record carries
// (ES_PATH_DEPTH, bpf/fsync.h).
const pathComponents = len(fsyncFsyncEvent{}.Names)

// rawNames is a record's name components as the program wrote them
// (bytes after a NUL included: equal fields name equal components) and
// pathNames' answer for them.
type rawNames struct {
	raw   [pathComponents][48]int8
	names []string
	ok    bool
}

// intern returns b as a string, allocating only the first time. A small
// direct-mapped cache in front of the map answers the common case (the
// same few comms) in a compare instead of a hash.
func (d *decoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := (uint(len(b))*31 + uint(b[0])*7 + uint(b[len(b)-1])) % uint(len(d.recent))
	if s := d.recent[h]; s == string(b) { // comparing with string(b) does not allocate
		return s
	}
	s, ok := d.strs[string(b)] // nor does a lookup by it
	if !ok {
		if d.strs == nil || len(d.strs) >= internMax {
			d.strs = make(map[string]string)
		}
		s = string(b)
		d.strs[s] = s
	}
	d.recent[h] = s
	return s
}

// pathNames returns the non-empty leading components of names as strings,
// the same slice every time for the same components.
func (d *decoder) pathNames(names [][48]int8) []string {
	whole := len(names) == pathComponents
	if whole {
		for i := range d.recentNames {
			if r := &d.recentNames[i]; r.ok && [pathComponents][48]int8(names) == r.raw {
				d.nextNames = 1 - i
				return r.names
			}
		}
	}
	v := d.lookupNames(names)
	if whole {
		r := &d.recentNames[d.nextNames]
		r.raw, r.names, r.ok = [pathComponents][48]int8(names), v, true
		d.nextNames = 1 - d.nextNames
	}
	return v
}

// lookupNames is pathNames through the table keyed by the components.
func (d *decoder) lookupNames(names [][48]int8) []string {
	d.key = d.key[:0]
	n := 0
	for i := range names {
		c := cbytes(names[i][:])
		if len(c) == 0 {
			break
		}
		d.key = append(append(d.key, c...), 0)
		n++
	}
	if n == 0 {
		return nil
	}
	if v, ok := d.names[string(d.key)]; ok {
		return v
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.intern(cbytes(names[i][:]))
	}
	if d.names == nil || len(d.names) >= internMax {
		d.names = make(map[string][]string)
	}
	d.names[string(d.key)] = v
	return v
}
