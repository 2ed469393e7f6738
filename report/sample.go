package report

import (
	"hash/maphash"
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
// call up to MaxPageCalls, then a uniform sample of them. Each kept call
// holds its group as a 64-bit hash of the key (keyHash), not the key's
// strings: a recording is text anyone writes, and 131,072 one-call groups
// with 3 KB fs names held 673 MiB of keys. The zero value is not ready:
// use NewCallSample. Not safe for concurrent use.
type CallSample struct {
	slots  []sampledCall
	seed   maphash.Seed
	seen   int64
	t0, t1 uint64 // the first start and last end of every call seen
	rng    *rand.Rand
}

type sampledCall struct {
	Call
	key uint64 // keyHash of its group
}

// NewCallSample returns an empty sample.
func NewCallSample() *CallSample {
	return &CallSample{seed: maphash.MakeSeed(), rng: rand.New(rand.NewPCG(1, 2))}
}

// keyHash is k's hash: two of the at most MaxPageCalls groups a sample
// holds share one with a chance under 2^-30 (random seed each run).
func (s *CallSample) keyHash(k analysis.GroupKey) uint64 { return maphash.Comparable(s.seed, k) }

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
	sc := sampledCall{Call: c, key: s.keyHash(k)}
	if at == len(s.slots) {
		s.slots = append(s.slots, sc)
	} else {
		s.slots[at] = sc
	}
}

// Seen is how many calls were added; Kept how many the page draws (fewer
// when it draws a sample).
func (s *CallSample) Seen() int64 { return s.seen }

// Kept is how many calls the sample holds.
func (s *CallSample) Kept() int { return len(s.slots) }

// byGroup files the kept calls by group (keyHash), in the order they were
// added (a sample's in the order of their places).
func (s *CallSample) byGroup() map[uint64][]Call {
	m := map[uint64][]Call{}
	for _, c := range s.slots {
		m[c.key] = append(m[c.key], c.Call)
	}
	return m
}
