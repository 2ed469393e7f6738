package etcdmetric

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// TestRecordingRoundTrip: events and the metric record written as etcdscope
// peers --record writes them come back as they were; other records and
// other schemas are refused with their line number.
func TestRecordingRoundTrip(t *testing.T) {
	var b bytes.Buffer
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	evs := []event.Peer{{Kind: event.PeerOpen, Direction: event.PeerActive, Remote: remote, DurationNs: 25_000_000},
		{Kind: event.PeerRTT, Remote: remote, SRTTus: 25_100}}
	for _, e := range evs {
		if err := peers.WriteEvent(&b, e); err != nil {
			t.Fatal(err)
		}
	}
	cs := []PeerComparison{{Peer: remote.Addr(), Member: "m2", Comparison: Comparison{Key: Key{To: "8e9e05c52164694d", Prober: "ROUND_TRIPPER_SNAPSHOT"}, Observations: 8, Mean: 0.05}}}
	if err := WriteMetricRecord(&b, cs); err != nil {
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
	// Without the record: nil, not an error.
	if _, rec, err := ReadRecording(strings.NewReader(strings.SplitN(b.String(), "\n", 2)[0] + "\n")); err != nil || rec != nil {
		t.Errorf("events only: %v, %v", rec, err)
	}
	for in, want := range map[string]string{
		`{"type":"fsync","v":1,"total_ns":5}`:                    `line 1: a "fsync" record, not a peer event`,
		`{"time_ns":5}`:                                          "line 1: not a peer event",
		`{"type":"etcd_peer_metric","schema":"peers/v0"}`:        `schema "peers/v0"`,
		"{\"kind\":\"rtt\",\"srtt_us\":1}\n{\"kind\":\"bogus\"}": "line 2",
	} {
		if _, _, err := ReadRecording(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}
