package exporter

import (
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
)

// TestPeerWindow: events come back by half-open time range, and a query
// at time T first drops the events older than T minus the window.
func TestPeerWindow(t *testing.T) {
	w := newPeerWindow(10 * time.Second)
	for s := uint64(1); s <= 30; s++ { // one event a second, 1..30 s
		w.add(event.Peer{Kind: event.PeerRTT, TimeNs: s * 1e9})
	}
	for _, c := range []struct {
		from, to uint64 // seconds, in query order (each query trims)
		want     int
	}{
		{25, 30, 5}, // 25..29; the trim at 30 s keeps 20..30
		{0, 31, 10}, // the trim at 31 s keeps 21..30
		{0, 100, 0}, // the trim at 100 s drops everything
	} {
		if got := len(w.between(c.from*1e9, c.to*1e9)); got != c.want {
			t.Errorf("between(%d s, %d s) = %d events, want %d", c.from, c.to, got, c.want)
		}
	}
}
