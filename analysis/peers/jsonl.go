package peers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/etcdscope/etcdscope/event"
)

// Schema names the JSON Lines format of recorded peer events: one Event
// object per line. `etcdscope peers --record FILE` writes it; ReadEvents
// reads it back so a report can be recomputed without root.
const Schema = "peers/v1"

// WriteEvent writes e as one JSON line.
func WriteEvent(w io.Writer, e event.Peer) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadEvents reads JSON Lines written by WriteEvent; blank lines are
// skipped, and a malformed line fails with its line number.
func ReadEvents(r io.Reader) ([]event.Peer, error) {
	var evs []event.Peer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e event.Peer
		if err := json.Unmarshal(line, &e); err != nil {
			return evs, fmt.Errorf("line %d: %w", n, err)
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
}
