package peers

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/event"
)

// Schema names the JSON Lines format of recorded peer events: a Header
// line, then one Event object per line. `etcdscope peers --record FILE`
// writes it; ReadEvents reads it back so a report can be recomputed
// without root.
const Schema = "peers/v1"

// HeaderType is the "type" of a recording's first line, Header. Event
// lines have no "type" (they have "kind").
const HeaderType = "peers_recording"

// Header is a recording's first line: it names the schema, so that a
// reader refuses a format it does not know instead of misreading it.
// Recordings made before the header existed have none and are read as
// peers/v1.
type Header struct {
	Type   string `json:"type"`   // HeaderType
	Schema string `json:"schema"` // Schema
	// MonoToWallNs is CLOCK_REALTIME − CLOCK_MONOTONIC (ns) when the
	// recording started: the events' monotonic times on the wall clock
	// (report --html sets the recording against an fsync run's with it).
	// 0 in a recording made before it was kept.
	MonoToWallNs int64 `json:"mono_to_wall_ns,omitempty"`
}

// WriteHeader writes the Header line for this build's Schema, with the
// run's monoToWallNs (host.MonoToWallNs).
func WriteHeader(w io.Writer, monoToWallNs int64) error {
	b, err := json.Marshal(Header{Type: HeaderType, Schema: Schema, MonoToWallNs: monoToWallNs})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// CheckSchema returns an error naming schema when it is not the one this
// build reads (a record's "schema" field: the Header's, or the etcd metric
// record's).
func CheckSchema(schema string) error {
	if schema != Schema {
		return fmt.Errorf("schema %q, this build reads %s", schema, Schema)
	}
	return nil
}

// ReadHeader reads a Header line: its schema must be this build's.
func ReadHeader(line []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return h, err
	}
	return h, CheckSchema(h.Schema)
}

// WriteEvent writes e as one JSON line.
func WriteEvent(w io.Writer, e event.Peer) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadEvents reads JSON Lines written by WriteHeader and WriteEvent
// (through jsonl.Scan: the same line limit and errors as every
// recording); blank lines are skipped, a header of another schema and a
// malformed line fail with their line number. Other typed lines (the etcd
// metric record, which etcdmetric.ReadRecording reads) are skipped.
func ReadEvents(r io.Reader) ([]event.Peer, error) {
	var evs []event.Peer
	err := jsonl.Scan(r, func(_ int, h jsonl.Head, raw []byte) error {
		switch h.Type {
		case HeaderType:
			_, err := ReadHeader(raw)
			return err
		case "":
		default:
			return nil
		}
		var e event.Peer
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		evs = append(evs, e)
		return nil
	})
	return evs, err
}
