package diagnose

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPeerCommandNamesEachMembersURL: three members polled at their own
// URLs (a real etcd 3.6.16 scrape pair, each member's made distinct by
// its process_start_time_seconds) get suggested peers commands naming
// their own /metrics URL; a member read from a file gets the default
// one. The walk of 2026-12-07 found every member's command naming the
// first URL given (m2's kernel RTT would have been compared with m1's
// metric).
func TestPeerCommandNamesEachMembersURL(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("../etcdmetric/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	start, end := read("etcd-3.6.16-tls-loopback-start.prom"), read("etcd-3.6.16-tls-loopback-end.prom")
	const startTime = "process_start_time_seconds 1.79601829131e+09"
	if !strings.Contains(start, startTime) || !strings.Contains(end, startTime) {
		t.Fatalf("testdata changed: no %q", startTime)
	}
	member := func(i int, s string) []byte {
		return []byte(strings.Replace(s, startTime, fmt.Sprintf("process_start_time_seconds 1.79601829%d31e+09", i), 1))
	}
	// Each member polled twice, 61 s apart (diagnose --window's shape:
	// two scrapes with their fetch times).
	t0 := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	var inputs []Input
	for i := 1; i <= 3; i++ {
		url := fmt.Sprintf("http://127.0.29.%d:2381/metrics", i)
		inputs = append(inputs, Input{Name: url, Data: member(i, start), At: t0}, Input{Name: url, Data: member(i, end), At: t0.Add(61 * time.Second)})
	}
	inputs = append(inputs, Input{Name: "m4.prom", Data: member(4, end)})
	rep, err := Diagnose(inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range rep.Findings {
		if f.Peer == nil {
			continue
		}
		want := defaultMetricsURL
		if strings.HasPrefix(f.Peer.Sources[0], "http://") {
			want = f.Peer.Sources[0]
		}
		if f.Peer.URL != want || slices.ContainsFunc(f.Peer.Sources, func(s string) bool { return s != f.Peer.Sources[0] }) {
			t.Errorf("%s (from %v): suggested URL %s, want %s", f.Subject, f.Peer.Sources, f.Peer.URL, want)
		}
		seen[f.Peer.URL]++
	}
	if len(seen) != 4 {
		t.Errorf("peer findings name %d URLs (%v), want each member's own 3 and the default for the file", len(seen), seen)
	}
}
