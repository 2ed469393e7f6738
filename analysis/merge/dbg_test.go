package merge

import (
	"os"
	"sort"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
)

func TestDbgReal(t *testing.T) {
	gf, _ := os.Open("/tmp/h7/g_vda.jsonl")
	guest, _, _ := analysis.ReadJSONL(gf)
	hf, _ := os.Open("/tmp/h7/host.jsonl")
	host, _ := ReadHost(hf)
	var gs []gflush
	for i, r := range guest {
		for _, q := range r.Requests {
			if q.Role == "flush" && !q.NotIssued && q.IssueNs > 0 {
				gs = append(gs, gflush{fsync: i, issue: q.IssueNs, complete: q.CompleteNs})
			}
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].issue < gs[j].issue })
	hs := hostFlushes(host, "/tmp/h7/img/raw.img")
	truth := int64(2991.572655e9)
	t.Logf("truth: chunk %d global %d", track(gs[:64], hs, truth), track(gs, hs, truth))
	c, _ := coarseOffset(gs, hs)
	t.Logf("coarse %d: chunk %d global %d", c, track(gs[:64], hs, c), track(gs, hs, c))
}
