package etcdmetric

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// TestRecordingRoundTrip: the header, events and the metric record written
// as etcdscope peers --record writes them come back as they were (and a
// recording without the header still reads); other records and other
// schemas are refused with their line number, by ReadRecording and by
// peers.ReadEvents alike.
func TestRecordingRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := peers.WriteHeader(&b, 0); err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	evs := []event.Peer{{Kind: event.PeerOpen, Direction: event.PeerActive, Remote: remote, DurationNs: 25_000_000},
		{Kind: event.PeerRTT, Remote: remote, SRTTus: 25_100}}
	for _, e := range evs {
		if err := peers.WriteEvent(&b, e); err != nil {
			t.Fatal(err)
		}
	}
	cs := []PeerComparison{{Peer: remote.Addr(), Member: "m2", Comparison: Comparison{Key: Key{To: "8e9e05c52164694d", Prober: "ROUND_TRIPPER_SNAPSHOT"}, Observations: 8, Mean: 0.05}}}
	own := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:40112")}
	if err := WriteMetricRecord(&b, cs, own); err != nil {
		t.Fatal(err)
	}
	gotEvs, rec, err := ReadRecording(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(gotEvs) != 2 || gotEvs[1].SRTTus != 25_100 || gotEvs[0].Remote != remote {
		t.Errorf("events %+v", gotEvs)
	}
	if rec == nil || rec.Schema != peers.Schema || len(rec.Comparisons) != 1 || rec.Comparisons[0].Peer != remote.Addr() ||
		rec.Comparisons[0].Mean != 0.05 || rec.Comparisons[0].Key.To != "8e9e05c52164694d" {
		t.Errorf("metric record %+v", rec)
	}
	if ex := rec.ExcludeLocal(); len(ex) != 1 || !ex[own[0]] {
		t.Errorf("own connections read back %v, want %v", ex, own)
	}
	if (*MetricRecord)(nil).ExcludeLocal() != nil {
		t.Error("no record: exclusions")
	}
	if !strings.HasPrefix(b.String(), `{"type":"peers_recording","schema":"peers/v1"}`+"\n") {
		t.Errorf("recording does not open with its header: %.80q", b.String())
	}
	// peers.ReadEvents reads the same events, past the header and the
	// metric record.
	if got, err := peers.ReadEvents(bytes.NewReader(b.Bytes())); err != nil || len(got) != len(evs) || got[0].Remote != remote {
		t.Errorf("peers.ReadEvents: %+v, %v", got, err)
	}
	// Without the record: nil, not an error; without the header (a
	// recording made before it): read as peers/v1.
	lines := strings.SplitAfter(b.String(), "\n")
	if _, rec, err := ReadRecording(strings.NewReader(lines[0] + lines[1])); err != nil || rec != nil {
		t.Errorf("events only: %v, %v", rec, err)
	}
	if got, _, err := ReadRecording(strings.NewReader(strings.Join(lines[1:], ""))); err != nil || len(got) != len(evs) {
		t.Errorf("no header: %d events, %v", len(got), err)
	}
	for in, want := range map[string]string{
		`{"type":"fsync","v":1,"total_ns":5}`:                    `line 1: a "fsync" record, not a peer event`,
		`{"time_ns":5}`:                                          "line 1: not a peer event",
		`{"type":"capture","v":1,"tracer":"peers"}`:              "line 1: a capture (peers --capture), not a recording (peers --record)",
		`{"type":"etcd_peer_metric","schema":"peers/v0"}`:        `schema "peers/v0"`,
		`{"type":"peers_recording","schema":"peers/v2"}`:         `line 1: schema "peers/v2", this build reads peers/v1`,
		"{\"kind\":\"rtt\",\"srtt_us\":1}\n{\"kind\":\"bogus\"}": "line 2",
	} {
		if _, _, err := ReadRecording(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
	if _, err := peers.ReadEvents(strings.NewReader(`{"type":"peers_recording","schema":"peers/v2"}` + "\n")); err == nil || !strings.Contains(err.Error(), `schema "peers/v2"`) {
		t.Errorf("peers.ReadEvents took a peers/v2 recording: %v", err)
	}
}
