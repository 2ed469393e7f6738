package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/merge"
)

// ReadMerged reads the output of `etcdscope merge --output json`: its
// merged_fsync records (the merge_summary line is skipped: the page
// recomputes what it draws from the records). Of each it keeps what the
// page draws (MergedCall), not its pairs and names: MergedBytes per call,
// whatever its line holds, for at most MaxPageCalls calls; past that a
// uniform sample of them (seeded the same on every run), and the counts of
// every call. Before, every call was held: ~600 bytes each of minimal
// lines, 1.47 GB for 2.5 M.
func ReadMerged(r io.Reader) ([]MergedCall, MergedCounts, error) {
	var (
		out []MergedCall
		n   MergedCounts
		rng = rand.New(rand.NewPCG(1, 2))
	)
	err := jsonl.Scan(r, func(_ int, h jsonl.Head, line []byte) error {
		switch h.Type {
		case "merged_fsync":
			var m merge.MergedFsync
			if err := json.Unmarshal(line, &m); err != nil {
				return err
			}
			c := MergedCall{TotalNs: m.TotalNs, Matched: m.Matched, Split: m.Split}
			n.add(&c)
			if len(out) < MaxPageCalls {
				out = append(out, c)
			} else if j := rng.Int64N(n.Calls); j < MaxPageCalls {
				out[j] = c
			}
		case "merge_summary":
		default:
			return fmt.Errorf("a %q record, not etcdscope merge output (give the output of etcdscope merge --output json)", h.Type)
		}
		return nil
	})
	if err != nil {
		return nil, MergedCounts{}, err
	}
	return out, n, nil
}

// MergedCounts counts every merged call read, where the page keeps a
// sample of them: Calls, those with every flush Matched, and whether any
// had time in a guest or host dm layer.
type MergedCounts struct {
	Calls, Matched int64
	GuestDM        bool
	HostDM         bool
}

func (n *MergedCounts) add(c *MergedCall) {
	n.Calls++
	if c.Matched {
		n.Matched++
	}
	n.GuestDM = n.GuestDM || c.Split.GuestDMNs != 0
	n.HostDM = n.HostDM || c.Split.HostDMNs != 0
}

// countMerged is the counts of ms, every call (a page given no counts).
func countMerged(ms []MergedCall) MergedCounts {
	var n MergedCounts
	for i := range ms {
		n.add(&ms[i])
	}
	return n
}

// MergedCall is what the page draws of one merged guest fsync (a
// merge.MergedFsync): its wall time, ns, whether every flush matched, and
// its split.
type MergedCall struct {
	TotalNs int64       // the guest fsync's wall time
	Matched bool        // every guest flush request found its host flush
	Split   merge.Split // guest | virtualization | host, summing to TotalNs
}

// MergedBytes is what the page holds per merged call, bytes: its
// MergedCall (120), twice while ReadMerged's slice grows, and once more
// sorted by time when the chart is drawn; of at most MaxPageCalls calls.
const MergedBytes = 3 * 120

// mergePart is one part of merge.Split as the merge chart draws it.
type mergePart struct {
	name, color string
	get         func(merge.Split) int64
}

// mergeParts are the parts of merge.Split in drawing order, with colours:
// the guest's own layers in the layer colours, virtualization in teal, the
// host's layers in darker shades of the same colours, the host's image
// writes in olive. The dm parts are drawn only when a merged call has
// one (mergeBars), as the fsync report's dm column.
var mergeParts = []mergePart{
	{"guest data_writeback", LayerColors[analysis.LayerDataWriteback], func(s merge.Split) int64 { return s.GuestDataWritebackNs }},
	{"guest journal", LayerColors[analysis.LayerJournal], func(s merge.Split) int64 { return s.GuestFSJournalNs }},
	{"guest block_queue", LayerColors[analysis.LayerBlockQueue], func(s merge.Split) int64 { return s.GuestBlockQueueNs }},
	{"guest dm", LayerColors[analysis.LayerDM], func(s merge.Split) int64 { return s.GuestDMNs }},
	{"guest other", LayerColors[analysis.LayerOther], func(s merge.Split) int64 { return s.GuestOtherNs }},
	{"virtualization", "#17becf", func(s merge.Split) int64 { return s.VirtualizationNs }},
	{"host data_writeback", "#0b3c5d", func(s merge.Split) int64 { return s.HostDataWritebackNs }},
	{"host journal", "#4a2a63", func(s merge.Split) int64 { return s.HostFSJournalNs }},
	{"host block_queue", "#a35200", func(s merge.Split) int64 { return s.HostBlockQueueNs }},
	{"host dm", "#4f2f29", func(s merge.Split) int64 { return s.HostDMNs }},
	{"host device_flush", "#7f1416", func(s merge.Split) int64 { return s.HostDeviceFlushNs }},
	{"host other", "#555555", func(s merge.Split) int64 { return s.HostOtherNs }},
	{"host image writes", "#8a8b16", func(s merge.Split) int64 { return s.HostImageWritesNs }},
}

// mergeBars draws the guest | virtualization | host split of the merged
// guest fsyncs at the same levels as the layer bars (all calls, the
// slowest 10%, 1%, the slowest call), each normalised to 100% with its
// mean time beside it; the note counts matched and unmatched calls.
func mergeBars(ms []MergedCall, n MergedCounts) (*svgChart, []legendItem, string) {
	sorted := append([]MergedCall(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].TotalNs < sorted[j].TotalNs })
	if n.Calls == 0 {
		n = countMerged(ms)
	}
	var drawn []mergePart
	for _, p := range mergeParts {
		if (p.name == "guest dm" && !n.GuestDM) || (p.name == "host dm" && !n.HostDM) {
			continue
		}
		drawn = append(drawn, p)
	}
	var parts []legendItem
	for _, p := range drawn {
		parts = append(parts, legendItem{p.name, p.color})
	}
	bars := meanBars(sorted, len(drawn), func(m *MergedCall, i int) int64 { return drawn[i].get(m.Split) })
	c := normalisedBars(bars, parts, "guest, virtualization and host share of each guest fsync, by level (each bar 100%)")
	note := fmt.Sprintf("%s merged with the hypervisor's recording (etcdscope merge), %d with every flush matched to the host's work. Device flush = host work + virtualization, the rest (docs/merge.md#the-split).",
		plural(n.Calls, "guest fsync"), n.Matched)
	if int64(len(ms)) < n.Calls {
		note += fmt.Sprintf(" The bars draw a uniform sample of %d of them (a page keeps at most %d calls to draw).", len(ms), MaxPageCalls)
	}
	return &c, parts, note
}
