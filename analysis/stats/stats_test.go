package stats

import "testing"

func TestQuantileNearestRank(t *testing.T) {
	// 1..100: nearest rank p50 = 50, p99 = 99, p90 = 90 (fio's definition).
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := Quantile(v, tc.q); got != tc.want {
			t.Errorf("Quantile(1..100, %v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("empty: %d", got)
	}
	if got := Quantile([]int64{7}, 0.99); got != 7 {
		t.Errorf("one sample: %d", got)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]int64{5, 1, 3, 2, 4})
	want := Summary{Count: 5, Sum: 15, Min: 1, P50: 3, P90: 5, P99: 5, Max: 5}
	if s != want {
		t.Fatalf("got %+v want %+v", s, want)
	}
	if s.Mean() != 3 {
		t.Fatalf("mean %v", s.Mean())
	}
}
