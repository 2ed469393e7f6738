package peers

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestEventsRoundTrip(t *testing.T) {
	in := probeConn(5, 0, event.PeerActive, v6me, v6peer, 40_000, ms, 30)
	in = append(in, event.Peer{Kind: event.PeerRetransmit, TimeNs: 9, Socket: 5, Direction: event.PeerPreexisting, Local: hostA, Remote: hostB, TotalRetrans: 3})
	var buf bytes.Buffer
	for _, e := range in {
		if err := WriteEvent(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(buf.String(), `"kind":"close_start"`) || !strings.Contains(buf.String(), `"remote":"[fd00::2]:2380"`) {
		t.Errorf("unexpected encoding:\n%s", buf.String())
	}
	out, err := ReadEvents(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip changed events:\n%+v\n%+v", in, out)
	}
	if _, err := ReadEvents(strings.NewReader("{\"kind\":\"open\"}\n{\"kind\":\"sideways\"}\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad kind: %v", err)
	}
}

// TestOwnerEventRoundTrip: a PeerOwner event (no addresses, no TCP
// fields) is written to and read back from a peers/v1 recording as it
// was, so a replay attaches the late owner as the live run did.
func TestOwnerEventRoundTrip(t *testing.T) {
	e := event.Peer{Kind: event.PeerOwner, TimeNs: 5e9, Socket: 0xffff1234, SockIno: 99, Direction: event.PeerPreexisting, Owner: 42, Comm: "etcd"}
	var buf bytes.Buffer
	if err := WriteEvent(&buf, e); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEvents(&buf)
	if err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if len(got) != 1 || got[0] != e {
		t.Errorf("read back %+v, want %+v", got, e)
	}
}
