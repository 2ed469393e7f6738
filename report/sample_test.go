package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestCallSampleKeysBounded (issue 25): a sample of 20,000 one-call groups
// whose fs names are 3 KB each holds its calls, not the groups' strings:
// before, each kept call's group key was held (131,072 such groups, 673
// MiB for the page); the page still files each call under its group.
func TestCallSampleKeysBounded(t *testing.T) {
	const n = 20_000
	pad := strings.Repeat("f", 3000)
	s := NewCallSample()
	grew := testenv.HeapGrowth(func() any {
		for i := range n {
			r := analysis.FsyncRecord{PID: uint32(i + 1), Comm: "x", Dev: "8:0", FS: fmt.Sprintf("%s%d", pad, i), FileKind: "other",
				StartNs: uint64(i) * 10, EndNs: uint64(i)*10 + 5, TotalNs: 5}
			s.Add(&r)
		}
		return s
	})
	// The calls alone: n × 80 bytes (1.6 MB) and the slice's growth; the
	// keys' strings were 60 MB.
	if grew > 8<<20 {
		t.Errorf("the sample of %d calls grew the heap by %d MiB, want under 8", n, grew>>20)
	}
	k, _ := CallOf(&analysis.FsyncRecord{PID: 7, Comm: "x", Dev: "8:0", FS: fmt.Sprintf("%s%d", pad, 6), FileKind: "other"})
	if got := s.byGroup()[s.keyHash(k)]; len(got) != 1 || got[0].StartNs != 60 {
		t.Errorf("group of call 6: %+v, want its one call", got)
	}
}
