package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlatBinsAsFio checks the bin mapping against values worked out by
// hand from fio's stat.c (plat_val_to_idx / plat_idx_to_val): exact below
// 128, then 64 bins per power of two with the bin's midpoint as its value.
func TestPlatBinsAsFio(t *testing.T) {
	for _, tc := range []struct {
		v   uint64
		idx int
		val int64
	}{
		{0, 0, 0}, {1, 1, 1}, {127, 127, 127},
		// msb 7: error bits 1, first bin (1+1)<<6 = 128, offset (v>>1)&63;
		// bins two wide, value base 128 + (k+0.5)*2
		{128, 128, 129}, {129, 128, 129}, {130, 129, 131}, {255, 191, 255},
		// msb 8: error bits 2, first bin 192; four wide from 256
		{256, 192, 258}, {259, 192, 258}, {260, 193, 262},
		// 1 ms = 1e6 ns: msb 19, error bits 13, first bin 14<<6 = 896,
		// offset (1e6>>13)&63 = 122&63 = 58; value 2^19 + 58.5*2^13
		{1_000_000, 954, 1<<19 + 58<<13 + 1<<12},
		// past 2^34 ns: the last bin
		{1 << 40, platNR - 1, platValue(platNR - 1)},
	} {
		idx := platIndex(tc.v)
		if idx != tc.idx || platValue(idx) != tc.val {
			t.Errorf("v=%d: bin %d value %d, want bin %d value %d", tc.v, idx, platValue(idx), tc.idx, tc.val)
		}
	}
	// Every bin's value maps back to the bin, and bins are in value order.
	for i := 0; i < platNR-1; i++ {
		if platIndex(uint64(platValue(i))) != i {
			t.Fatalf("bin %d's value %d maps to bin %d", i, platValue(i), platIndex(uint64(platValue(i))))
		}
		if platValue(i+1) <= platValue(i) {
			t.Fatalf("bin %d value %d not above bin %d value %d", i+1, platValue(i+1), i, platValue(i))
		}
	}
}

// TestSeriesExactThenBinned feeds a log-normal fsync-like latency
// distribution (median ~200 µs, tail to tens of ms) and compares the
// series' quantiles with exact order statistics of the same values: equal
// while exact, within fio's half-bin (1/128) once binned; count, sum, min
// and max exact throughout.
func TestSeriesExactThenBinned(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s Series
	var all []int64
	check := func(n int) {
		got := s.Summary()
		want := Summarize(append([]int64(nil), all...))
		if got.Count != want.Count || got.Sum != want.Sum || got.Min != want.Min || got.Max != want.Max {
			t.Fatalf("n=%d: count/sum/min/max %+v, want %+v", n, got, want)
		}
		if n <= ExactLimit {
			if got != want {
				t.Fatalf("n=%d (exact): %+v, want %+v", n, got, want)
			}
			return
		}
		if !got.Binned {
			t.Fatalf("n=%d: past ExactLimit but not Binned", n)
		}
		for _, q := range []struct {
			name      string
			got, want int64
		}{{"p50", got.P50, want.P50}, {"p90", got.P90, want.P90}, {"p99", got.P99, want.P99}} {
			if rel := math.Abs(float64(q.got-q.want)) / float64(q.want); rel > 1.0/128 {
				t.Errorf("n=%d %s: binned %d, exact %d (%.2f%% off, fio's bins allow 0.78%%)", n, q.name, q.got, q.want, 100*rel)
			}
		}
	}
	for n := 1; n <= 3*ExactLimit; n++ {
		v := int64(math.Exp(rng.NormFloat64()*0.8 + math.Log(200e3)))
		s.Add(v)
		all = append(all, v)
		if n == 1 || n == 1000 || n == ExactLimit || n == ExactLimit+1 || n == 3*ExactLimit {
			check(n)
		}
	}
	if s.vals != nil || s.chunks != nil || len(s.bins) != platNR {
		t.Fatalf("binned series keeps %d values and %d bins, want none and %d", s.exact(), len(s.bins), platNR)
	}
}

// TestSeriesNegativeAndEmpty: an empty series is the zero Summary; a
// negative value (a clock step) counts as 0 rather than corrupting bins.
func TestSeriesNegativeAndEmpty(t *testing.T) {
	var s Series
	if got := s.Summary(); got != (Summary{}) {
		t.Fatalf("empty: %+v", got)
	}
	s.Add(-5)
	s.Add(10)
	if got := s.Summary(); got.Min != 0 || got.Max != 10 || got.Sum != 10 || got.Count != 2 {
		t.Fatalf("got %+v", got)
	}
}

// BenchmarkSeriesAdd is the per-value cost a report pays, binned.
func BenchmarkSeriesAdd(b *testing.B) {
	var s Series
	for i := 0; i <= ExactLimit; i++ {
		s.Add(int64(i))
	}
	b.ReportAllocs()
	v := int64(1)
	for b.Loop() {
		v = v*6364136223846793005 + 1442695040888963407
		s.Add(v >> 40)
	}
}

// TestSeriesMerge: a series merged from two is the series of all their
// values, exact or binned.
func TestSeriesMerge(t *testing.T) {
	for _, n := range []int{0, 1, 100, ExactLimit, ExactLimit + 7} {
		var a, b, all Series
		for i := range n {
			v := int64(i*7919%100003 + 1)
			all.Add(v)
			if i%3 == 0 {
				a.Add(v)
			} else {
				b.Add(v)
			}
		}
		for i := range ExactLimit + 3 { // b binned on its own when n is large
			if n < ExactLimit {
				break
			}
			v := int64(i%977 + 5)
			b.Add(v)
			all.Add(v)
		}
		a.Merge(&b)
		ga, ge := a.Summary(), all.Summary()
		if ga != ge {
			t.Errorf("n=%d: merged %+v, all %+v", n, ga, ge)
		}
	}
}

// TestSeriesBudget: series bound to one budget keep exact values until it
// is spent; the one that finds it spent bins (its values given back), its
// count, sum, min and max still exact; a folded series gives its values
// back before they are merged (Absorb).
func TestSeriesBudget(t *testing.T) {
	b := NewBudget(10)
	var a, c, d Series
	a.Bind(b)
	c.Bind(b)
	d.Bind(b)
	for v := range 8 {
		a.Add(int64(v))
	}
	for v := range 5 {
		c.Add(int64(100 + v))
	}
	if sa, sc := a.Summary(), c.Summary(); sa.Binned || !sc.Binned || sc.Count != 5 || sc.Min != 100 || sc.Max != 104 || sc.Sum != 510 {
		t.Errorf("a %+v, c %+v: want a exact, c binned with exact count, min, max and sum", sa, sc)
	}
	if b.Left() != 2 {
		t.Errorf("%d left, want 2 (c's given back)", b.Left())
	}
	d.Add(1)
	d.Add(2)
	a.Absorb(&d) // d's 2 come back first, then a takes them
	if s := a.Summary(); s.Binned || s.Count != 10 || b.Left() != 0 || d.Count() != 0 {
		t.Errorf("a after absorbing d: %+v, %d left, d %d: want 10 exact, 0 left, d empty", s, b.Left(), d.Count())
	}
	if cl := a.Clone(); cl.budget != nil {
		t.Errorf("a clone is bound to the budget")
	}
}

// TestSeriesChunks: around each edge of the arrays the exact values are
// kept in (seriesChunk), Summary is Summarize of the values added, a Clone
// shares no array with its series, Merge adds every value, and the budget
// gets back exactly what was taken.
func TestSeriesChunks(t *testing.T) {
	for _, n := range []int{seriesChunk - 1, seriesChunk, seriesChunk + 1, 2*seriesChunk - 1, 2 * seriesChunk, 2*seriesChunk + 1, ExactLimit - 1, ExactLimit} {
		budget := NewBudget(ExactLimit)
		var s Series
		s.Bind(budget)
		all := make([]int64, 0, n)
		for i := range n {
			v := int64(i*7919%100003 + 1)
			s.Add(v)
			all = append(all, v)
		}
		if got, want := s.Summary(), Summarize(slices.Clone(all)); got != want || got.Binned {
			t.Fatalf("n=%d: %+v, want %+v", n, got, want)
		}
		if got := s.appendExact(nil); !slices.Equal(got, all) {
			t.Fatalf("n=%d: the exact values differ from those added (or their order)", n)
		}
		if left := budget.Left(); left != int64(ExactLimit-n) {
			t.Fatalf("n=%d: budget %d left, want %d", n, left, ExactLimit-n)
		}
		c := s.Clone()
		c.Add(1 << 40)
		if len(c.chunks) > 0 && len(s.chunks) > 0 {
			c.chunks[0][0]++
			if s.chunks[0][0] == c.chunks[0][0] {
				t.Fatalf("n=%d: the clone shares its first array with the series", n)
			}
		}
		if got := s.Summary(); got != Summarize(slices.Clone(all)) {
			t.Fatalf("n=%d: the series changed with its clone: %+v", n, got)
		}
		var m Series
		m.Merge(&s)
		if got, want := m.Summary(), s.Summary(); got != want {
			t.Fatalf("n=%d: merged %+v, want %+v", n, got, want)
		}
		var sink Series
		sink.Absorb(&s)
		if left := budget.Left(); left != ExactLimit {
			t.Fatalf("n=%d: %d left after Absorb, want all %d back", n, left, ExactLimit)
		}
	}
}
