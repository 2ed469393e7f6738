package etcdmetric

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse parses arbitrary /metrics text as the scrapes of etcd do
// (serve, peers), then takes the delta of the page with itself and the
// quantiles of every series: no panic. Seeds: the real etcd pages in
// testdata.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.prom")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("etcd_network_peer_round_trip_time_seconds_bucket{To=\"a\",le=\"+Inf\"} NaN\n"))
	f.Add([]byte("etcd_network_peer_round_trip_time_seconds_bucket{To=\"a\",le=\"x\"} 1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		sc, err := Parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		deltas, _ := DeltaScrapes(sc, sc)
		for _, d := range deltas {
			d.Ladder()
			d.Mean()
			d.Quantile(0.5)
			d.Quantile(0.99)
		}
	})
}
