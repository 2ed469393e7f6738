package workload

import "testing"

func TestPairClient(t *testing.T) {
	puts := [][2]uint64{{100, 200}, {300, 420}, {500, 600}}
	writes := [][2]uint64{
		{120, 180}, // put 1: 40 outside
		{250, 290}, // between puts (a lease grant): unpaired
		{310, 400}, // put 2: 30 outside
		{590, 610}, // ends after put 3: unpaired
	}
	paired := PairClient(puts, writes)
	s := paired.Summary()
	if s.Count != 2 || s.Min != 30 || s.Max != 40 {
		t.Fatalf("paired %+v, want 2 pairs of 30 and 40 ns", s)
	}
}
