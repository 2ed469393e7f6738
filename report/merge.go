package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
)

// ReadMerged reads the output of `etcdscope merge --output json`: its
// merged_fsync records (the merge_summary line is skipped: the page
// recomputes what it draws from the records).
func ReadMerged(r io.Reader) ([]merge.MergedFsync, error) {
	var out []merge.MergedFsync
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var typed struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &typed); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch typed.Type {
		case "merged_fsync":
			var m merge.MergedFsync
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			out = append(out, m)
		case "merge_summary":
		default:
			return nil, fmt.Errorf("line %d is a %q record, not etcdscope merge output (give the output of etcdscope merge --output json)", n, typed.Type)
		}
	}
	return out, sc.Err()
}

// mergeParts are the parts of merge.Split in drawing order, with colours:
// the guest's own layers in the layer colours, virtualization in teal, the
// host's layers in darker shades of the same colours.
var mergeParts = []struct {
	name, color string
	get         func(merge.Split) int64
}{
	{"guest data_writeback", LayerColors[analysis.LayerDataWriteback], func(s merge.Split) int64 { return s.GuestDataWritebackNs }},
	{"guest journal", LayerColors[analysis.LayerJournal], func(s merge.Split) int64 { return s.GuestFSJournalNs }},
	{"guest block_queue", LayerColors[analysis.LayerBlockQueue], func(s merge.Split) int64 { return s.GuestBlockQueueNs }},
	{"guest other", LayerColors[analysis.LayerOther], func(s merge.Split) int64 { return s.GuestOtherNs }},
	{"virtualization", "#17becf", func(s merge.Split) int64 { return s.VirtualizationNs }},
	{"host data_writeback", "#0b3c5d", func(s merge.Split) int64 { return s.HostDataWritebackNs }},
	{"host journal", "#4a2a63", func(s merge.Split) int64 { return s.HostFSJournalNs }},
	{"host block_queue", "#a35200", func(s merge.Split) int64 { return s.HostBlockQueueNs }},
	{"host device_flush", "#7f1416", func(s merge.Split) int64 { return s.HostDeviceFlushNs }},
	{"host other", "#555555", func(s merge.Split) int64 { return s.HostOtherNs }},
}

// mergeBars draws the guest | virtualization | host split of the merged
// guest fsyncs at the same levels as the layer bars (all calls, the
// slowest 10%, 1%, the slowest call), each normalised to 100% with its
// mean time beside it; the note counts matched and unmatched calls.
func mergeBars(ms []merge.MergedFsync) (*svgChart, []legendItem, string) {
	sorted := append([]merge.MergedFsync(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].TotalNs < sorted[j].TotalNs })
	matched := 0
	for _, m := range ms {
		if m.Matched {
			matched++
		}
	}
	tail := func(frac float64) []merge.MergedFsync {
		n := max(int(math.Ceil(float64(len(sorted))*frac)), 1)
		return sorted[len(sorted)-n:]
	}
	c := &svgChart{Width: chartWidth, Label: "guest, virtualization and host share of each guest fsync, by level (each bar 100%)"}
	y := 4.0
	for _, lv := range []struct {
		name string
		recs []merge.MergedFsync
	}{{"all calls", sorted}, {"slowest 10%", tail(0.10)}, {"slowest 1%", tail(0.01)}, {"slowest call", tail(0)}} {
		label := fmt.Sprintf("%s (%s)", lv.name, plural(int64(len(lv.recs)), "call"))
		if lv.name == "slowest call" {
			label = lv.name
		}
		parts := make([]float64, len(mergeParts))
		total := 0.0
		for _, m := range lv.recs {
			for i, p := range mergeParts {
				parts[i] += float64(p.get(m.Split))
			}
		}
		for i := range parts {
			parts[i] /= float64(len(lv.recs))
			total += parts[i]
		}
		c.Texts = append(c.Texts, text{X: labelWidth - 8, Y: y + barHeight*0.7, Anchor: "end", Text: label})
		x := float64(labelWidth)
		for i, p := range mergeParts {
			if total <= 0 || parts[i] <= 0 {
				continue
			}
			share := parts[i] / total
			w := share * barAreaW
			c.Rects = append(c.Rects, rect{X: x, Y: y, W: w, H: barHeight, Fill: p.color,
				Title: fmt.Sprintf("%s, %s: %s ms mean (%.1f%%)", label, p.name, analysis.Ms(int64(parts[i])), 100*share)})
			if w >= 30 {
				c.Labels = append(c.Labels, text{X: x + w/2, Y: y + barHeight*0.7, Anchor: "middle", Text: fmt.Sprintf("%.0f%%", 100*share)})
			}
			x += w
		}
		right := analysis.Ms(int64(total)) + " ms"
		if len(lv.recs) > 1 {
			right += " mean"
		}
		c.Texts = append(c.Texts, text{X: labelWidth + barAreaW + 6, Y: y + barHeight*0.7, Anchor: "start", Text: right})
		y += barHeight + barGap
	}
	c.Height = y
	var legend []legendItem
	for _, p := range mergeParts {
		legend = append(legend, legendItem{p.name, p.color})
	}
	note := fmt.Sprintf("%s merged with the hypervisor's recording (etcdscope merge), %d with every flush matched to the host's work. A guest fsync's device-flush time is split into the host's work for it (in the host's layers) and virtualization, the rest (docs/merge.md).",
		plural(int64(len(ms)), "guest fsync"), matched)
	return c, legend, note
}
