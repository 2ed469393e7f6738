package diagnose

import (
	"fmt"
	"strings"
	"testing"
)

// walScrape is a one-member scrape of etcd's WAL fsync histogram with the
// given cumulative counts at le=1,2,4,8 ms and +Inf, no fetch time and no
// process_start_time_seconds (a hand-saved excerpt).
func walScrape(name string, sum float64, cum ...int) Input {
	var b strings.Builder
	for i, le := range []string{"0.001", "0.002", "0.004", "0.008", "+Inf"} {
		fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{instance=\"m1\",le=%q} %d\n", le, cum[i])
	}
	fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_sum{instance=\"m1\"} %g\netcd_disk_wal_fsync_duration_seconds_count{instance=\"m1\"} %d\n", sum, cum[4])
	return Input{Name: name, Data: []byte(b.String())}
}

// TestRestartWithoutTimes: two untimed scrapes of one member where etcd
// restarted between them. Ordered by count, the smaller looks first, but
// its delta's cumulative buckets fall (1000-10 at 1 ms > 999-30 at 4 ms
// is impossible forward): a restart, so the order given decides and the
// later scrape is taken whole. A reviewer saw "between scrapes 920".
func TestRestartWithoutTimes(t *testing.T) {
	before := walScrape("before.prom", 1.0, 900, 990, 999, 1000, 1000)
	after := walScrape("after.prom", 0.1, 10, 20, 30, 40, 80)
	grown := walScrape("grown.prom", 20, 1000, 1090, 1099, 1100, 1300)
	for _, c := range []struct {
		in     []Input
		window string
		n      int64
	}{
		{[]Input{before, after}, "since restart", 80},
		{[]Input{after, before}, "since restart", 1000},
		// No restart: the count order is forward, whatever the order given.
		{[]Input{grown, before}, "between scrapes", 300},
		{[]Input{before, grown}, "between scrapes", 300},
	} {
		rep, err := Diagnose(c.in, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Members) != 1 {
			t.Fatalf("%d members, want 1", len(rep.Members))
		}
		m := rep.Members[0]
		if !strings.HasPrefix(m.Window, c.window) || m.WAL.Observations != float64(c.n) {
			t.Errorf("%s then %s: window %q with %d fsyncs, want %q with %d", c.in[0].Name, c.in[1].Name, m.Window, int64(m.WAL.Observations), c.window, c.n)
		}
	}
}
