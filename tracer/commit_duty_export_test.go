package tracer

import (
	"errors"

	"github.com/cilium/ebpf"
)

// StateEntries counts the entries of the commit program's state maps
// (what Attach clears), for tracer_test.TestCommitDetachAttach.
func (t *CommitTracer) StateEntries() (int, error) {
	n := 0
	for _, m := range t.stateMaps() {
		k := make([]byte, m.KeySize())
		var prev any // nil: the first key
		for {
			if err := m.NextKey(prev, &k); errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			} else if err != nil {
				return n, err
			}
			n++
			prev = append([]byte(nil), k...)
		}
	}
	return n, nil
}

// IdlePoll is idlePoll, for tracer_test.TestCommitAfterIdle.
const IdlePoll = idlePoll
