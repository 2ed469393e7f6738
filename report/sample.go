package report

import (
	"math/rand/v2"

	"github.com/etcdscope/etcdscope/analysis"
)

// MaxPageCalls bounds the calls the page keeps to draw (its layer bars and
// heatmaps): 80 bytes each, 10 MiB, and as much again for a group's
// sorted copy. Up to it the page draws every call; past it, a uniform
// sample of MaxPageCalls of them (reservoir sampling, seeded the same on
// every run, so a page is reproducible), and says so. The tables' counts
// and percentiles are the report's, of every call. Before, the page held
// every call: ~365 bytes a call of minimal records, 463 MiB for 1.3 M.
const MaxPageCalls = 1 << 17

// CallSample keeps what the page draws of a recording's fsyncs: every
// call up to MaxPageCalls, then a uniform sample of them. The zero value
// is not ready: use NewCallSample. Not safe for concurrent use.
type CallSample struct {
	slots  []sampledCall
	keys   []analysis.GroupKey // slots' groups, each once
	index  map[analysis.GroupKey]uint32
	seen   int64
	t0, t1 uint64 // the first start and last end of every call seen
	rng    *rand.Rand
}

type sampledCall struct {
	Call
	key uint32 // in keys
}

// NewCallSample returns an empty sample.
func NewCallSample() *CallSample {
	return &CallSample{index: map[analysis.GroupKey]uint32{}, rng: rand.New(rand.NewPCG(1, 2))}
}

// Add counts r and keeps what the page draws of it if it falls in the
// sample.
func (s *CallSample) Add(r *analysis.FsyncRecord) {
	k, c := CallOf(r)
	if s.seen == 0 || c.StartNs < s.t0 {
		s.t0 = c.StartNs
	}
	s.t1 = max(s.t1, c.EndNs)
	s.seen++
	at := len(s.slots)
	if at >= MaxPageCalls {
		j := s.rng.Int64N(s.seen)
		if j >= MaxPageCalls {
			return
		}
		at = int(j)
	}
	i, ok := s.index[k]
	if !ok {
		if len(s.keys) >= 2*MaxPageCalls {
			s.compact()
		}
		i = uint32(len(s.keys))
		s.keys = append(s.keys, k)
		s.index[k] = i
	}
	if at == len(s.slots) {
		s.slots = append(s.slots, sampledCall{Call: c, key: i})
	} else {
		s.slots[at] = sampledCall{Call: c, key: i}
	}
}

// compact forgets the groups no kept call is of (a sample replaces calls,
// and a flood of one-call groups would otherwise grow keys without end).
func (s *CallSample) compact() {
	keys, index := s.keys[:0:0], map[analysis.GroupKey]uint32{}
	for j := range s.slots {
		k := s.keys[s.slots[j].key]
		i, ok := index[k]
		if !ok {
			i = uint32(len(keys))
			keys = append(keys, k)
			index[k] = i
		}
		s.slots[j].key = i
	}
	s.keys, s.index = keys, index
}

// Seen is how many calls were added; Kept how many the page draws (fewer
// when it draws a sample).
func (s *CallSample) Seen() int64 { return s.seen }

// Kept is how many calls the sample holds.
func (s *CallSample) Kept() int { return len(s.slots) }

// byGroup files the kept calls by group, in the order they were added
// (a sample's in the order of their places).
func (s *CallSample) byGroup() map[analysis.GroupKey][]Call {
	m := map[analysis.GroupKey][]Call{}
	for _, c := range s.slots {
		k := s.keys[c.key]
		m[k] = append(m[k], c.Call)
	}
	return m
}
