package etcdtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// exposition has the shape of etcd v3.6.16's /metrics (family types and
// the To label as etcd exports them; values chosen for the test, with a
// counter in scientific notation as the Go client writes large values).
const exposition = `# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 180
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 200
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 206
etcd_disk_wal_fsync_duration_seconds_sum 0.21
etcd_disk_wal_fsync_duration_seconds_count 206
# HELP etcd_network_peer_round_trip_time_seconds Round-Trip-Time histogram between peers
# TYPE etcd_network_peer_round_trip_time_seconds histogram
etcd_network_peer_round_trip_time_seconds_bucket{To="33a6c09da364c987",le="0.0001"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="33a6c09da364c987",le="+Inf"} 4
etcd_network_peer_round_trip_time_seconds_sum{To="33a6c09da364c987"} 0.004
etcd_network_peer_round_trip_time_seconds_count{To="33a6c09da364c987"} 4
etcd_network_peer_round_trip_time_seconds_bucket{To="b468ebc36a0790c8",le="0.0001"} 0
etcd_network_peer_round_trip_time_seconds_bucket{To="b468ebc36a0790c8",le="+Inf"} 2
etcd_network_peer_round_trip_time_seconds_sum{To="b468ebc36a0790c8"} 0.002
etcd_network_peer_round_trip_time_seconds_count{To="b468ebc36a0790c8"} 2
# HELP etcd_network_peer_sent_bytes_total The total number of bytes sent to peers.
# TYPE etcd_network_peer_sent_bytes_total counter
etcd_network_peer_sent_bytes_total{To="33a6c09da364c987"} 1.5e+06
etcd_network_peer_sent_bytes_total{To="b468ebc36a0790c8"} 2500
# HELP etcd_server_is_leader Whether or not this member is a leader. 1 if is, 0 otherwise.
# TYPE etcd_server_is_leader gauge
etcd_server_is_leader 1
`

func TestScrapeSumCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(exposition))
	}))
	defer srv.Close()
	fams, err := Scrape(context.Background(), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"etcd_disk_wal_fsync_duration_seconds", 206},       // histogram: its _count
		{"etcd_disk_wal_fsync_duration_seconds_count", 206}, // the sample's own name
		{"etcd_network_peer_round_trip_time_seconds", 6},    // summed over To
		{"etcd_network_peer_sent_bytes_total", 1502500},     // counter, scientific notation
		{"etcd_server_is_leader", 0},                        // gauges are not counted
		{"etcd_no_such_metric", 0},                          // absent
		{"etcd_no_such_metric_count", 0},                    // absent with the suffix
	} {
		if got := SumCounter(fams, tc.name); got != tc.want {
			t.Errorf("SumCounter(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestScrapeErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		default:
			w.Write([]byte("not { a metric\n"))
		}
	}))
	defer srv.Close()
	for _, path := range []string{"/missing", "/garbage"} {
		if fams, err := Scrape(context.Background(), srv.URL+path, nil); err == nil {
			t.Errorf("Scrape(%s) = %d families, want an error", path, len(fams))
		} else {
			t.Logf("Scrape(%s): %v", path, err)
		}
	}
}
