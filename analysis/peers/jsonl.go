package peers

import (
	"encoding/json"
	"io"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
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

// ReadEvents reads JSON Lines written by WriteEvent (through jsonl.Scan:
// the same line limit and errors as every recording); blank lines are
// skipped, and a malformed line fails with its line number.
func ReadEvents(r io.Reader) ([]event.Peer, error) {
	var evs []event.Peer
	err := jsonl.Scan(r, func(_ int, _ jsonl.Head, raw []byte) error {
		var e event.Peer
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		evs = append(evs, e)
		return nil
	})
	return evs, err
}
