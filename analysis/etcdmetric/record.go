package etcdmetric

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// MetricRecordType is the "type" of the record `etcdscope peers --record
// FILE --etcd-metrics URL` appends to a peers/v1 recording: what etcd's
// own etcd_network_peer_round_trip_time_seconds measured between the two
// scrapes, per series, beside the traced links. Event lines have no
// "type" (they have "kind"), so old readers of event lines are unaffected
// as long as they skip typed lines (ReadRecording does).
const MetricRecordType = "etcd_peer_metric"

// MetricRecord is that record.
type MetricRecord struct {
	Type   string `json:"type"`   // MetricRecordType
	Schema string `json:"schema"` // peers.Schema: the recording's format
	// Comparisons: CompareScrapes' output (Mean, P50, P99 are etcd's
	// measured metric over the window, seconds; Peer the address the
	// traced numbers are for, when the member list matched it).
	Comparisons []PeerComparison `json:"comparisons"`
	// OwnConns: the local ends of etcdscope's own kept-alive probe
	// connections (--probe-answer), which the live run left out of every
	// link (peers.Options.ExcludeLocal); absent in recordings made before
	// 2026-12-07.
	OwnConns []netip.AddrPort `json:"own_conns,omitempty"`
}

// ExcludeLocal is OwnConns as peers.Options.ExcludeLocal (nil when none),
// so that a replay leaves out what the live run left out.
func (m *MetricRecord) ExcludeLocal() map[netip.AddrPort]bool {
	if m == nil || len(m.OwnConns) == 0 {
		return nil
	}
	out := make(map[netip.AddrPort]bool, len(m.OwnConns))
	for _, a := range m.OwnConns {
		out[a] = true
	}
	return out
}

// WriteMetricRecord writes the record for cs and own (OwnConns) as one
// JSON line.
func WriteMetricRecord(w io.Writer, cs []PeerComparison, own []netip.AddrPort) error {
	b, err := json.Marshal(MetricRecord{Type: MetricRecordType, Schema: peers.Schema, Comparisons: cs, OwnConns: own})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadRecording reads a peers recording: its header (peers.Header; a
// recording made before headers has none), its events, and its metric
// record when it has one (nil otherwise). A header or metric record of
// another schema, a line with another "type", or an event line without a
// kind, fails with its line number: it is some other recording (an fsync
// one, say).
func ReadRecording(r io.Reader) ([]event.Peer, *MetricRecord, error) {
	var evs []event.Peer
	rec, _, err := ScanRecording(r, func(e *event.Peer) { evs = append(evs, *e) })
	if err != nil {
		return nil, nil, err
	}
	return evs, rec, nil
}

// ScanRecording reads a peers recording as ReadRecording does, a line at a
// time: fn gets each event in the recording's order (and may not keep
// the pointer). It returns the metric record (nil without one) and the
// header (zero in a recording made before headers). Its memory is one
// line and the metric record.
func ScanRecording(r io.Reader, fn func(*event.Peer)) (*MetricRecord, peers.Header, error) {
	var rec *MetricRecord
	var hdr peers.Header
	err := jsonl.Scan(r, func(n int, h jsonl.Head, line []byte) error {
		switch h.Type {
		case "":
			var e event.Peer
			if err := json.Unmarshal(line, &e); err != nil {
				return err
			}
			if e.Kind == 0 {
				return errors.New("not a peer event (no kind)")
			}
			fn(&e)
		case peers.HeaderType:
			var err error
			hdr, err = peers.ReadHeader(line)
			return err
		case MetricRecordType:
			var m MetricRecord
			if err := json.Unmarshal(line, &m); err != nil {
				return err
			}
			if err := peers.CheckSchema(m.Schema); err != nil {
				return err
			}
			rec = &m
		case "capture":
			// report replays a capture on its own; --peers wants the
			// recording of the same run.
			return errors.New("a capture (peers --capture), not a recording (peers --record)")
		default:
			return fmt.Errorf("a %q record, not a peer event", h.Type)
		}
		return nil
	})
	if err != nil {
		return nil, hdr, err
	}
	return rec, hdr, nil
}
