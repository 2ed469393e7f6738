package diagnose

import (
	"fmt"
	"strings"
	"testing"
)

// walFederate is a federated scrape of three members' WAL fsync
// histograms of 1000 syncs each: c8[i] of member i's at most 8 ms, the
// rest in (8 ms, 16 ms], so each p99 is interpolated in that bucket
// (c8 981: ≈ 11.79 ms; 987: ≈ 9.85 ms; 1000: under 8 ms).
func walFederate(c8 ...int) Input {
	var b strings.Builder
	for i, c := range c8 {
		for _, le := range []string{"0.001", "0.002", "0.004", "0.008", "0.016", "+Inf"} {
			n := c
			if le == "0.016" || le == "+Inf" {
				n = 1000
			}
			fmt.Fprintf(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{instance=\"m%d\",le=%q} %d\n", i+1, le, n)
		}
	}
	return Input{Name: "federate.txt", Data: []byte(b.String())}
}

// TestSlowMemberCount: the walk's case, m1's p99 ≈ 11.7 ms over the
// 10 ms budget and m2's ≈ 9.8 ms under it, is one member over budget that
// does not stand apart (not "more than one member"); two over is shared,
// with the count; one over and far above the rest is the slow member.
func TestSlowMemberCount(t *testing.T) {
	for _, tc := range []struct {
		name       string
		c8         []int
		sev        Severity
		slow       SlowCase
		over, memb int
	}{
		{"one over, one close", []int{981, 987, 1000}, Warn, SlowOnlyOne, 1, 3},
		{"two over", []int{981, 983, 1000}, Bad, SlowShared, 2, 3},
		{"one over, apart", []int{981, 1000, 1000}, Bad, SlowOne, 1, 3},
		{"none over", []int{987, 1000, 1000}, OK, SlowNone, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Diagnose([]Input{walFederate(tc.c8...)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got *Finding
			for i := range rep.Findings {
				if f := &rep.Findings[i]; f.Topic == TopicSlowMember {
					got = f
				}
			}
			if got == nil || got.Slow == nil {
				t.Fatalf("no slow_member finding: %+v", rep.Findings)
			}
			if v := got.Slow; got.Severity != tc.sev || v.Case != tc.slow || v.Over != tc.over || v.Members != tc.memb {
				t.Errorf("%s, case %d, %d of %d over (%s at %.5f s, others at most %.5f s); want %s, case %d, %d of %d",
					got.Severity, v.Case, v.Over, v.Members, v.Member, v.P99, v.Others, tc.sev, tc.slow, tc.over, tc.memb)
			}
		})
	}
}
