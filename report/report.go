// Package report renders a recording as one self-contained HTML page:
// inline SVG and CSS, no script, no fonts or images fetched at view time,
// so the file can be mailed, attached to a ticket or opened offline.
//
// The page opens with an overview (one row per group, WAL groups first,
// with the verdict and the layer that holds most of the time). Then, for
// every group of the fsync report (process, device, file kind), the
// kernel layer split as stacked bars at several levels (the mean call, the
// slowest 10%, the slowest 1%, the slowest call), each normalised to 100%
// with its absolute time beside it, so a 0.4 ms mean call reads as well
// as an 88 ms slowest one; and a latency heatmap over time with a colour
// legend. A recording on a stacked device (a filesystem on a loop device
// over a file) gets the per-level chart of the text report (upper,
// backing; or upper, dm, lower on a device-mapper device). When
// a peers recording is given: each link's traced RTTs beside what etcd's
// peer RTT metric would read for it (analysis/etcdmetric's model). All
// numbers come from package analysis, the same code as `etcdscope report`,
// so the page and the table agree.
package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/render"
)

// Input is what a page is made of.
type Input struct {
	// Title names the page, typically the recording's file name.
	Title string
	// Fsyncs, Writes and Summary: a recording read by
	// analysis.ReadJSONLWrites (Writes only from fsync --writes).
	Fsyncs  []analysis.FsyncRecord
	Writes  []analysis.WriteRecord
	Summary analysis.Report
	// Report and Calls, when the caller built them while the recording
	// streamed (a pipeline.ReportSink; CallSample.Add for each fsync),
	// stand for Fsyncs and Writes, which are then not read: what the page
	// keeps of a call is 80 bytes, not the record, for at most
	// MaxPageCalls calls. nil: built here from Fsyncs and Writes.
	Report *analysis.Report
	Calls  *CallSample
	// Peers: events of a peers/v1 recording (etcdmetric.ReadRecording);
	// nil when the recording has none, and the page says so.
	Peers []event.Peer
	// PeerEvents and PeerReport, when the caller assembled the recording
	// as it streamed (etcdmetric.ScanRecording into a peers.Assembler,
	// PeerEvents the events read, PeerOwner ones included), stand for
	// Peers, which is then not read: the page holds the connections, not
	// the events.
	PeerEvents int
	PeerReport *peers.Report
	// PeerMetric: what etcd's own etcd_network_peer_round_trip_time_seconds
	// measured over the recording (its etcd_peer_metric record, written by
	// etcdscope peers --record with --etcd-metrics); nil when it has none.
	PeerMetric []etcdmetric.PeerComparison
	// PeerNotMember: the links whose accepting end is no member's peer
	// address (etcdmetric.NotMemberLinks, from a capture's member list),
	// labelled so on the page as the table labels them.
	PeerNotMember []peers.Link
	// PeerMonoToWallNs: CLOCK_REALTIME − CLOCK_MONOTONIC of the peers run
	// (a capture's end line or a recording's header keeps it; 0: not
	// known), to set its span against the fsync recording's on the wall
	// clock.
	PeerMonoToWallNs int64
	// Merged: the guest fsyncs split across guest, virtualization and
	// host by etcdscope merge (ReadMerged: at most MaxPageCalls of them,
	// MergedCounts counting every one; zero: Merged is every call); nil
	// when not given.
	Merged       []MergedCall
	MergedCounts MergedCounts
}

// Call is what the page draws of one fsync: its times and layers (its
// group is the key it is filed under).
type Call struct {
	StartNs, EndNs uint64
	TotalNs        int64
	Layers         analysis.Layers
}

// CallOf returns the part of r the page draws, and r's group.
func CallOf(r *analysis.FsyncRecord) (analysis.GroupKey, Call) {
	return analysis.GroupKey{PID: r.PID, Comm: r.Comm, Dev: r.Dev, DevName: r.DevName, FS: r.FS, FileKind: r.FileKind},
		Call{StartNs: r.StartNs, EndNs: r.EndNs, TotalNs: r.TotalNs, Layers: r.Layers}
}

// callsOf is the page's sample of recs.
func callsOf(recs []analysis.FsyncRecord) *CallSample {
	s := NewCallSample()
	for i := range recs {
		s.Add(&recs[i])
	}
	return s
}

// LayerColors are the fill colours of the layers, in analysis.LayerNames
// order: the deepest layers in the warmest colours.
var LayerColors = map[string]string{
	analysis.LayerDataWriteback: "#1f77b4",
	analysis.LayerJournal:       "#9467bd",
	analysis.LayerDeviceFlush:   "#d62728",
	analysis.LayerBlockQueue:    "#ff7f0e",
	analysis.LayerDM:            "#8c564b",
	analysis.LayerOther:         "#9e9e9e",
}

// Geometry of the charts, in SVG user units (px).
const (
	chartWidth  = 760
	labelWidth  = 150
	barAreaW    = 500
	barHeight   = 22
	barGap      = 8
	heatCols    = 60
	heatRowH    = 14
	heatLeft    = 70
	heatBottom  = 28
	peerRowH    = 16
	peerGroupGp = 14
)

type rect struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type text struct {
	X, Y   float64
	Anchor string
	Text   string
}

type line struct {
	X1, Y1, X2, Y2 float64
	Stroke         string
}

type svgChart struct {
	Width, Height float64
	Label         string // aria-label
	Rects         []rect
	Texts         []text
	Lines         []line
	Labels        []text // white text drawn over the rects
}

type legendItem struct{ Name, Color string }

// biasedText is the page's note on a group's holes (groupView.Biased), in
// the table's words (render.BiasCounts): those that can hide a call
// (analysis.Bias.Hiding), then the missed runs of programs (progs, the
// report's MissedPrograms) that can only leave layers short
// (render.LayerMissLine).
func biasedText(g *analysis.Group, progs []analysis.MissedRuns) string {
	b := g.Bias.Hiding()
	var t string
	switch {
	case b.IsZero():
	case !g.Verdict.Judged():
		t = "numbers biased: " + render.BiasCounts(b) // no verdict to bias (as the table says)
	case g.VerdictHolds:
		t = "holds though " + render.BiasCounts(b)
	default:
		t = "biased: " + render.BiasCounts(b)
	}
	if l := render.LayerMissLine(progs); g.Bias.MissedLayerRuns > 0 && l != "" {
		t = strings.TrimPrefix(t+"; "+l, "; ")
	}
	return t
}

type groupView struct {
	ID           string // anchor of the group's section
	Title        string
	Summary      string
	Verdict      string
	VerdictClass string // verdictClass: the CSS class that colours it
	// Biased words the group's analysis.Group.Bias ("biased: N lost
	// events, M missed probe runs"), or "holds though N lost events" when
	// the holes cannot change the verdict (VerdictHolds); "" for a
	// lossless trace; "numbers biased: ..." for a group with no verdict.
	Biased string
	// Disk is the group's disk verdict (render.DiskVerdictText), or
	// "none (why)" with analysis.Group.DiskWhy; "" when it has neither.
	// DiskNumbers: render.DiskVerdictNumbers with a verdict, else "".
	Disk, DiskNumbers string
	// Other splits the other layer by scheduler state (fsync --sched);
	// Writes summarises the write calls before the group's fsyncs (fsync
	// --writes). "" without them.
	Other, Writes string
	Bars          svgChart
	Heatmap       svgChart
}

// overviewRow is one line of the table at the top of the page.
type overviewRow struct {
	ID, Title     string
	Calls         string // "1 call", "171 calls"
	P50, P99, Max string // ms
	TopLayer      string // the layer with the largest share of the group's time
	TopShare      string // its share, "52%"
	TopColor      string
	Verdict       string
	VerdictClass  string // verdictClass: the CSS class that colours it
	Disk          string // analysis.DiskVerdict.Kind: floor, contention or ""; "none" with DiskWhy
	// DiskWhy is analysis.Group.DiskWhy in words: why a group near a threshold got
	// no disk verdict, printed under the overview table ("" otherwise).
	DiskWhy string
}

type page struct {
	Title       string
	Generated   string
	Fsyncs      int64
	Sampled     string // the charts draw a sample of the calls: which
	Lost        uint64
	LossUnknown string // analysis.Report.LossUnknown: Lost and Missed are not known
	Missed      uint64
	// Window: the recording's traced time (analysis.Report.WindowNs), the
	// length the user recorded; "" when the recording does not carry it.
	// Span: the calls' first to last, said where the window is not known
	// or the calls cover less of it than spanShareSaid.
	Window      string
	Span        string
	Unavailable []string // probes not attached whose layer is missing: a warning
	// Optional: probes not attached that are optional
	// (analysis.Unavailable.Optional), whose layer is measured another way:
	// a note, not a warning (the jbd2 wait on kernels without kprobes).
	Optional    []string
	Disks       []string // each disk's write cache (render.DiskCacheLine), where known
	Legend      []legendItem
	Overview    []overviewRow
	Groups      []groupView
	Levels      *svgChart // stacked device levels (upper, backing, dm, lower), when the recording has them
	LevelsNote  string
	Merge       *svgChart // guest | virtualization | host, when a merge was given
	MergeNote   string
	MergeLegend []legendItem
	NoFsyncs    bool
	Peers       *svgChart
	PeersNote   string
	PeersApart  string // the peers and fsync recordings are of different windows
	PeerLegend  []legendItem
}

//go:embed page.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("page").Parse(pageTemplate))

// Render writes the page for in to w.
func Render(w io.Writer, in Input) error {
	p := build(in)
	// Comms, paths and names come from other users' processes and
	// recordings: html/template escapes markup, not an ESC sequence or a
	// C1 control, which a terminal showing the file (cat, less -r) acts
	// on. Escaped as the terminal's output is (render.Escape).
	t := render.NewTerminal(w)
	if err := tmpl.Execute(t, p); err != nil {
		return fmt.Errorf("rendering the page: %w", err)
	}
	return t.Flush()
}

// spanShareSaid: the calls' first-to-last span is said beside the
// recording's window when it covers less than this share of it (a load
// that ran 20 s of a 40 s recording); a steady etcd's calls span nearly
// all of it, and saying so would only repeat the window.
const spanShareSaid = 0.9

// windowAndSpan words the page's length: the recording's window, and
// the calls' span (t0 to t1, CLOCK_MONOTONIC ns) where the window is not
// known or the calls cover less than spanShareSaid of it.
func windowAndSpan(window time.Duration, t0, t1 uint64) (string, string) {
	var w, s string
	if window > 0 {
		w = window.Round(time.Millisecond).String()
	}
	if t1 > t0 {
		span := time.Duration(t1 - t0)
		if window <= 0 || float64(span) < spanShareSaid*float64(window) {
			s = span.Round(time.Millisecond).String()
		}
	}
	return w, s
}

func build(in Input) page {
	rep, sample := in.Report, in.Calls
	if rep == nil {
		r := analysis.BuildReportWrites(in.Fsyncs, in.Writes, in.Summary.LostEvents, in.Summary.MissedEvents, in.Summary.Unavailable)
		rep, sample = &r, callsOf(in.Fsyncs)
	}
	if sample == nil {
		sample = NewCallSample()
	}
	calls, n := sample.byGroup(), sample.Seen()
	p := page{Title: in.Title, Generated: time.Now().UTC().Format(time.RFC3339), Fsyncs: n,
		Lost: rep.LostEvents, Missed: rep.MissedEvents, LossUnknown: render.LossUnknown(&in.Summary), NoFsyncs: n == 0}
	if kept := sample.Kept(); int64(kept) < n {
		p.Sampled = fmt.Sprintf("The charts below draw a uniform sample of %d of the %d calls (a page keeps at most %d calls to draw); the counts, percentiles and verdicts are of every call.", kept, n, MaxPageCalls)
	}
	for _, u := range rep.Unavailable {
		what, why := render.UnavailableWords(u)
		if why != "" {
			what += " (" + why + ")"
		}
		if u.Optional {
			p.Optional = append(p.Optional, what)
		} else {
			p.Unavailable = append(p.Unavailable, what)
		}
	}
	rep.SetDiskCaches(in.Summary.Disks)
	for _, d := range rep.Disks {
		if line := render.DiskCacheLine(d); line != "" {
			p.Disks = append(p.Disks, line)
		}
	}
	p.Legend = layerParts()
	t0, t1 := sample.t0, sample.t1
	p.Window, p.Span = windowAndSpan(time.Duration(in.Summary.WindowNs), t0, t1)
	groups := append([]analysis.Group(nil), rep.Groups...)
	sortGroups(groups)
	for i, g := range groups {
		recs := calls[sample.keyHash(g.Key)]
		dev := g.Key.DevName
		if dev == "" {
			dev = g.Key.Dev
		}
		id := fmt.Sprintf("group-%d", i+1)
		title := fmt.Sprintf("%s pid %d · %s on %s · %s files", g.Key.Comm, g.Key.PID, g.Key.FS, dev, g.Key.FileKind)
		if g.Folded > 0 {
			recs, title = foldedCalls(calls, groups, sample), render.FoldedTitle(g.Folded)
		}
		var diskNumbers string
		if g.Disk != nil {
			diskNumbers = render.DiskVerdictNumbers(g.Disk)
		}
		gv := groupView{
			ID:    id,
			Title: title,
			Summary: fmt.Sprintf("%s; p50 %s ms, p99 %s ms, max %s ms; %.2f flushes per call%s",
				plural(g.Total.Count, "call"), render.Ms(g.Total.P50), render.Ms(g.Total.P99), render.Ms(g.Total.Max), g.FlushesPerFsync, fuaPerCall(&g)),
			Verdict:      string(g.Verdict),
			VerdictClass: verdictClass(g.Verdict),
			Biased:       biasedText(&g, rep.MissedPrograms),
			Disk:         diskText(&g),
			DiskNumbers:  diskNumbers,
			Other:        otherLine(g.OtherSplit),
			Writes:       writesLine(rep.Writes, g.Key),
			Bars:         layerBars(recs),
			Heatmap:      heatmap(recs, t0, t1, g.Key.FileKind == analysis.KindWAL, in.Summary.MonoToWallNs),
		}
		p.Groups = append(p.Groups, gv)
		row := overviewRow{ID: id, Title: title, Calls: plural(g.Total.Count, "call"), P50: render.Ms(g.Total.P50),
			P99: render.Ms(g.Total.P99), Max: render.Ms(g.Total.Max), Verdict: string(g.Verdict), VerdictClass: verdictClass(g.Verdict)}
		if g.Disk != nil {
			row.Disk = g.Disk.Kind
		} else if g.DiskWhy != nil {
			row.Disk, row.DiskWhy = "none", render.DiskWhyText(g.DiskWhy)
		}
		top := -1.0
		for _, l := range g.Layers {
			if l.Share > top {
				top = l.Share
				row.TopLayer, row.TopShare, row.TopColor = l.Name, fmt.Sprintf("%.0f%%", 100*l.Share), LayerColors[l.Name]
			}
		}
		p.Overview = append(p.Overview, row)
	}
	if len(rep.Levels) > 0 {
		p.Levels = levelBars(rep.Levels)
		p.LevelsNote = levelsNote(rep.Levels)
	}
	if len(in.Merged) > 0 {
		p.Merge, p.MergeLegend, p.MergeNote = mergeBars(in.Merged, in.MergedCounts)
	}
	if in.PeerReport == nil {
		in.PeerEvents = len(in.Peers)
		if len(in.Peers) > 0 {
			rep := peers.Analyze(in.Peers, peers.Options{})
			in.PeerReport = &rep
		}
	}
	if in.PeerEvents == 0 && in.PeerReport != nil {
		// A recording was given and held no event: say so, not "pass it".
		p.PeersNote = "The peers recording given holds no connection event: no per-peer RTT. It records etcd's peer port while members talk (a one-member cluster has none; etcdscope peers --port P for another port)."
	} else if in.PeerEvents == 0 {
		p.PeersNote = "This page was made without peer data: no per-peer RTT. Record it with `etcdscope peers --record peers.jsonl` and pass it with `etcdscope report --html out.html --peers peers.jsonl trace.jsonl`."
	} else {
		c, legend, note := peerChart(in.PeerReport, in.PeerMetric, in.PeerNotMember)
		p.Peers, p.PeerLegend, p.PeersNote = c, legend, note
		p.PeersApart = peersApart(analysis.SpansApart(analysis.Span{StartNs: t0, EndNs: t1, MonoToWallNs: in.Summary.MonoToWallNs},
			analysis.Span{StartNs: in.PeerReport.FirstNs, EndNs: in.PeerReport.LastNs, MonoToWallNs: in.PeerMonoToWallNs}))
	}
	return p
}

// peersApart words two recordings whose windows do not overlap ("" when
// they do, or one has no event).
func peersApart(a analysis.Apart) string {
	if !a.Known || a.Gap <= 0 {
		return ""
	}
	clock := "by their wall clocks"
	if !a.Wall {
		clock = "by CLOCK_MONOTONIC, which only one boot of one host shares"
	}
	return fmt.Sprintf("The peers and fsync recordings are %s apart (%s): they are from different runs, the RTT below not these calls'. Record both at once.",
		a.Gap.Round(time.Millisecond), clock)
}

// fuaPerCall is ", N FUA writes per call" for a group with FUA writes.
func fuaPerCall(g *analysis.Group) string {
	if g.FUAWrites == 0 || g.Total.Count == 0 {
		return ""
	}
	return fmt.Sprintf(", %.2f FUA writes per call", float64(g.FUAWrites)/float64(g.Total.Count))
}

// verdictClass is the page's CSS class for a verdict: verdict-ok,
// verdict-over, or "" (n/a, none) for plain text.
func verdictClass(v analysis.Verdict) string {
	switch v {
	case analysis.VerdictOK:
		return "verdict-ok"
	case analysis.VerdictOverBudget:
		return "verdict-over"
	}
	return ""
}

// diskText is a group's disk verdict sentence, "none (why)" without one
// near a threshold, "" otherwise.
func diskText(g *analysis.Group) string {
	switch {
	case g.Disk != nil:
		return render.DiskVerdictText(g.Disk)
	case g.DiskWhy != nil:
		return "none (" + render.DiskWhyText(g.DiskWhy) + ")"
	}
	return ""
}

// otherLine says how the other layer splits by scheduler state, as shares
// of the group's time ("" without --sched).
func otherLine(parts []analysis.LayerStat) string {
	if len(parts) == 0 {
		return ""
	}
	var out []string
	for _, p := range parts {
		out = append(out, fmt.Sprintf("%s %.1f%%", p.Name, 100*p.Share))
	}
	return "other, by the thread's scheduler state: " + strings.Join(out, ", ")
}

// writesLine summarises the write calls with key k ("" without --writes).
func writesLine(ws []analysis.WriteGroup, k analysis.GroupKey) string {
	for _, w := range ws {
		if w.Key != k {
			continue
		}
		var parts []string
		for _, l := range w.Layers {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", l.Name, 100*l.Share))
		}
		return fmt.Sprintf("the write calls before them (%s): %s; p50 %s ms, p99 %s ms, max %s ms; %s; %d throttled sleeps, %d waits on a page under writeback",
			strings.Join(w.Syscalls, ", "), plural(w.Total.Count, "call"), render.Ms(w.Total.P50), render.Ms(w.Total.P99), render.Ms(w.Total.Max),
			strings.Join(parts, ", "), w.Throttles, w.WritebackWaits)
	}
	return ""
}

// kindRank orders file kinds on the page: the WAL first (the budgeted
// path of every commit), then the WAL directory, the backend, snapshots,
// anything else.
var kindRank = map[string]int{analysis.KindWAL: 0, analysis.KindWALDir: 1, analysis.KindBackend: 2, analysis.KindSnapshot: 3}

// foldedCalls are the calls of the groups the report folded (those of no
// group apart), in time order.
func foldedCalls(calls map[uint64][]Call, groups []analysis.Group, sample *CallSample) []Call {
	apart := map[uint64]bool{}
	for _, g := range groups {
		if g.Folded == 0 {
			apart[sample.keyHash(g.Key)] = true
		}
	}
	var out []Call
	for k, cs := range calls {
		if !apart[k] {
			out = append(out, cs...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartNs < out[j].StartNs })
	return out
}

// sortGroups puts WAL groups first, then by kind rank, then the groups
// with more calls first (stable: BuildReport's order breaks ties).
func sortGroups(gs []analysis.Group) {
	rank := func(k string) int {
		if r, ok := kindRank[k]; ok {
			return r
		}
		return len(kindRank)
	}
	sort.SliceStable(gs, func(i, j int) bool {
		if fi, fj := gs[i].Folded > 0, gs[j].Folded > 0; fi != fj {
			return fj // the folded groups last
		}
		if ri, rj := rank(gs[i].Key.FileKind), rank(gs[j].Key.FileKind); ri != rj {
			return ri < rj
		}
		return gs[i].Total.Count > gs[j].Total.Count
	})
}

// plural says "1 call", "2 calls".
func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// stackedBar is one bar of a normalised chart: the label on its left, the
// mean ns of each part (in the chart's parts order) and the text on its
// right.
type stackedBar struct {
	label string
	parts []float64
	right string
	// single: the bar is one call (the slowest), not a mean: its
	// segments' tooltips give times, not means.
	single bool
}

// layerParts are the kernel layers as chart parts: LayerNames order, with
// their colours.
func layerParts() []legendItem {
	var out []legendItem
	for _, l := range analysis.LayerNames {
		out = append(out, legendItem{l, LayerColors[l]})
	}
	return out
}

// meanBars returns one bar per level of sorted (calls in ascending order
// of total time): all calls, the slowest 10%, the slowest 1%, the slowest
// call. Part i of a bar is the mean over the level's calls of part(call,
// i), ns; the level's mean time is written on its right.
func meanBars[T any](sorted []T, nParts int, part func(r *T, i int) int64) []stackedBar {
	tail := func(frac float64) []T {
		return sorted[len(sorted)-max(int(math.Ceil(float64(len(sorted))*frac)), 1):]
	}
	if len(sorted) == 0 {
		return nil
	}
	var bars []stackedBar
	for _, lv := range []struct {
		name string
		recs []T
	}{{"all calls", sorted}, {"slowest 10%", tail(0.10)}, {"slowest 1%", tail(0.01)}, {"slowest call", tail(0)}} {
		b := stackedBar{label: fmt.Sprintf("%s (%s)", lv.name, plural(int64(len(lv.recs)), "call")), parts: make([]float64, nParts)}
		if lv.name == "slowest call" {
			b.label = lv.name
		}
		total := 0.0
		for j := range lv.recs {
			for i := range b.parts {
				b.parts[i] += float64(part(&lv.recs[j], i))
			}
		}
		for i := range b.parts {
			b.parts[i] /= float64(len(lv.recs))
			total += b.parts[i]
		}
		b.right = render.Ms(int64(total)) + " ms"
		b.single = len(lv.recs) == 1
		if !b.single {
			b.right += " mean"
		}
		bars = append(bars, b)
	}
	return bars
}

// layerBars draws one stacked bar per level: all calls, the slowest 10%,
// the slowest 1% and the slowest call, each the mean per call of each
// layer. Every bar is normalised to the full width (the layers' shares of
// that level's time) with the level's mean time written beside it: on one
// linear scale the mean call of a run with one slow outlier was a few
// pixels wide and its split unreadable.
func layerBars(recs []Call) svgChart {
	sorted := append([]Call(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].TotalNs < sorted[j].TotalNs })
	bars := meanBars(sorted, len(analysis.LayerNames), func(r *Call, i int) int64 { return r.Layers.Get(analysis.LayerNames[i]) })
	return normalisedBars(bars, layerParts(), "share of each kernel layer in the mean call, by level (each bar 100%)")
}

// normalisedBars draws bars that each fill the bar area: a segment's width
// is its part's share of the bar's total; a segment wide enough carries
// its percentage, and the bar's absolute time is written on its right.
func normalisedBars(bars []stackedBar, parts []legendItem, label string) svgChart {
	c := svgChart{Width: chartWidth, Label: label}
	y := 4.0
	for _, b := range bars {
		c.Texts = append(c.Texts, text{X: labelWidth - 8, Y: y + barHeight*0.7, Anchor: "end", Text: b.label})
		total := 0.0
		for _, v := range b.parts {
			total += v
		}
		x := float64(labelWidth)
		mean := " mean"
		if b.single {
			mean = ""
		}
		for i, p := range parts {
			if total <= 0 || b.parts[i] <= 0 {
				continue
			}
			share := b.parts[i] / total
			w := share * barAreaW
			c.Rects = append(c.Rects, rect{X: x, Y: y, W: w, H: barHeight, Fill: p.Color,
				Title: fmt.Sprintf("%s, %s: %s ms%s (%.1f%%)", b.label, p.Name, render.Ms(int64(b.parts[i])), mean, 100*share)})
			if w >= 30 {
				c.Labels = append(c.Labels, text{X: x + w/2, Y: y + barHeight*0.7, Anchor: "middle", Text: fmt.Sprintf("%.0f%%", 100*share)})
			}
			x += w
		}
		c.Texts = append(c.Texts, text{X: labelWidth + barAreaW + 6, Y: y + barHeight*0.7, Anchor: "start", Text: b.right})
		y += barHeight + barGap
	}
	c.Height = y
	return c
}

// levelBars draws the stacked-device table (analysis.BuildLevels) as
// normalised bars, one per level and device: upper the filesystem the
// application fsyncs on (on the loop device), backing the filesystem under
// it (or dm, the target of a device-mapper device, and lower, the disks
// beneath that), with the p50/p99 of each level beside the bar.
func levelBars(rows []analysis.LevelRow) *svgChart {
	var bars []stackedBar
	for _, r := range rows {
		if r.Untraced != "" || r.UntracedDropped > 0 {
			continue // no numbers to draw: levelsNote says why
		}
		b := stackedBar{label: r.Level + " " + render.LevelDevice(&r), parts: make([]float64, len(analysis.LayerNames))}
		for _, l := range r.Layers {
			for i, n := range analysis.LayerNames {
				if n == l.Name && r.Total.Count > 0 {
					b.parts[i] = float64(l.Stats.Sum) / float64(r.Total.Count)
				}
			}
		}
		b.right = fmt.Sprintf("p50 %s, p99 %s ms", render.Ms(r.Total.P50), render.Ms(r.Total.P99))
		bars = append(bars, b)
	}
	c := normalisedBars(bars, layerParts(), "share of each kernel layer at each stacked level (each bar 100%)")
	return &c
}

// levelsNote says in words what the levels chart shows.
func levelsNote(rows []analysis.LevelRow) string {
	var parts []string
	for _, r := range rows {
		if r.Untraced != "" {
			parts = append(parts, fmt.Sprintf("%s %s/%s: %s", r.Level, r.Device, r.FS, render.UntracedText(r.Untraced, r.FS)))
			continue
		}
		if r.UntracedDropped > 0 {
			parts = append(parts, r.Level+" "+render.UntracedDroppedText(r.UntracedDropped))
			continue
		}
		dev := r.Device + "/" + r.FS
		if r.Folded > 0 {
			dev = render.LevelDevice(&r)
		}
		s := fmt.Sprintf("%s %s: %s, %.2f flushes per upper fsync", r.Level, dev, plural(r.Total.Count, "fsync"), r.FlushesPerFsync)
		if r.NestedShare > 0 {
			s += fmt.Sprintf(", %.0f%% of upper's device-flush time", 100*r.NestedShare)
		}
		parts = append(parts, s)
	}
	var how []string
	if slices.ContainsFunc(rows, func(r analysis.LevelRow) bool { return r.Level == analysis.LevelBacking }) {
		how = append(how, "each flush of the loop device (upper) made the loop driver fsync its backing file on the filesystem under it (backing)")
	}
	if slices.ContainsFunc(rows, func(r analysis.LevelRow) bool { return r.Level == analysis.LevelDM }) {
		how = append(how, "a device-mapper target (dm) held the calls' bios before the disks beneath it (lower) took them")
	}
	return "The fsyncs above ran on a stacked device: " + strings.Join(how, "; ") + ". " + strings.Join(parts, "; ") + "."
}

// heatmap draws calls over time (columns: the recording's span cut in
// heatCols) against latency (rows: powers of two from 1 µs), shaded by the
// count of calls in each cell on a log scale, with a colour legend. The
// time axis is UTC wall-clock time when the recording's summary has
// mono_to_wall_ns (monoToWall), else seconds since its first call. WAL
// groups get a line at etcd's 10 ms budget.
func heatmap(recs []Call, t0, t1 uint64, budget bool, monoToWall int64) svgChart {
	c := svgChart{Width: chartWidth, Label: "heatmap of call latency over time"}
	if len(recs) == 0 || t1 <= t0 {
		return c
	}
	row := func(ns int64) int { // floor(log2(µs)), clamped to 1 µs .. 16 s
		us := float64(ns) / 1e3
		if us < 1 {
			return 0
		}
		return min(int(math.Log2(us)), 24)
	}
	lo, hi := 24, 0
	for _, r := range recs {
		lo, hi = min(lo, row(r.TotalNs)), max(hi, row(r.TotalNs))
	}
	if budget {
		lo, hi = min(lo, row(int64(analysis.WALFsyncBudget))), max(hi, row(int64(analysis.WALFsyncBudget)))
	}
	if hi-lo < 3 {
		hi = min(lo+3, 24)
	}
	rows := hi - lo + 1
	span := float64(t1 - t0)
	counts := make([][]int, heatCols)
	for i := range counts {
		counts[i] = make([]int, rows)
	}
	maxCount := 0
	for _, r := range recs {
		col := min(int(float64(r.EndNs-t0)/span*heatCols), heatCols-1)
		k := row(r.TotalNs) - lo
		counts[col][k]++
		maxCount = max(maxCount, counts[col][k])
	}
	plotW := float64(chartWidth - heatLeft - 10)
	cellW := plotW / heatCols
	plotH := float64(rows * heatRowH)
	colNs := span / heatCols
	// A span over UTC midnight: times say their date (month-day), or
	// 00:00:00 on two days reads the same.
	multiDay := monoToWall != 0 && time.Unix(0, int64(t0)+monoToWall).UTC().YearDay() != time.Unix(0, int64(t1)+monoToWall).UTC().YearDay()
	// A cell's time span, on the axis's clock: enough decimals to tell
	// a cell's edges apart (one more than a cell's width needs).
	cellDec := min(9, max(0, int(math.Ceil(-math.Log10(colNs/1e9))))+1)
	for col := range counts {
		for k, n := range counts[col] {
			if n == 0 {
				continue
			}
			y := plotH - float64(k+1)*heatRowH
			from, to := int64(t0)+int64(float64(col)*colNs), int64(t0)+int64(float64(col+1)*colNs)
			when := fmt.Sprintf("%.*f–%.*f s since the first call", cellDec, float64(col)*colNs/1e9, cellDec, float64(col+1)*colNs/1e9)
			if monoToWall != 0 {
				when = fmt.Sprintf("%s–%s UTC (%s)", wallClock(from+monoToWall, cellDec, multiDay), wallClock(to+monoToWall, cellDec, multiDay), when)
			}
			c.Rects = append(c.Rects, rect{X: heatLeft + float64(col)*cellW, Y: y, W: cellW, H: heatRowH, Fill: heatColor(n, maxCount),
				Title: fmt.Sprintf("%s: %s of %s–%s", when, plural(int64(n), "call"), fmtBound(lo+k), fmtBound(lo+k+1))})
		}
	}
	for k := 0; k <= rows; k += 2 {
		y := plotH - float64(k)*heatRowH
		c.Texts = append(c.Texts, text{X: heatLeft - 6, Y: y + 4, Anchor: "end", Text: fmtBound(lo + k)})
		c.Lines = append(c.Lines, line{X1: heatLeft - 3, Y1: y, X2: heatLeft, Y2: y, Stroke: "#444"})
	}
	c.Lines = append(c.Lines, line{X1: heatLeft, Y1: 0, X2: heatLeft, Y2: plotH, Stroke: "#444"},
		line{X1: heatLeft, Y1: plotH, X2: heatLeft + plotW, Y2: plotH, Stroke: "#444"})
	// Ticks at round instants of the clock the axis shows (multiples of
	// a round step since the Unix epoch, or since the first call), each
	// labelled exactly: a tick is where its label says.
	origin := int64(0) // the axis's clock at t0, ns
	if monoToWall != 0 {
		origin = int64(t0) + monoToWall
	}
	step := tickStep(int64(span), heatMaxTicks)
	dec := stepDecimals(step)
	for at := ceilMultiple(origin, step); at <= origin+int64(span); at += step {
		x := heatLeft + plotW*float64(at-origin)/span
		c.Lines = append(c.Lines, line{X1: x, Y1: plotH, X2: x, Y2: plotH + 3, Stroke: "#444"})
		tick := "0"
		switch {
		case monoToWall != 0:
			tick = wallClock(at, dec, multiDay)
		case at > 0:
			tick = sinceTick(at, step, dec)
		}
		c.Texts = append(c.Texts, text{X: x, Y: plotH + 16, Anchor: "middle", Text: tick})
	}
	axis := "time since the recording's first call (this recording has no mono_to_wall_ns: no wall clock)"
	if monoToWall != 0 {
		axis = "wall-clock time, UTC (" + time.Unix(0, int64(t0)+monoToWall).UTC().Format("2006-01-02") + ")"
	}
	c.Texts = append(c.Texts, text{X: heatLeft, Y: plotH + 32, Anchor: "start", Text: axis})
	// Colour legend: the shades of a few counts up to the busiest cell.
	lx := heatLeft + plotW
	steps := legendCounts(maxCount)
	const sw = 26.0
	ly := plotH + 42
	c.Texts = append(c.Texts, text{X: lx - float64(len(steps))*sw - 6, Y: ly + 10, Anchor: "end", Text: "calls per cell:"})
	for i, n := range steps {
		x := lx - float64(len(steps)-i)*sw
		c.Rects = append(c.Rects, rect{X: x, Y: ly, W: sw - 2, H: 12, Fill: heatColor(n, maxCount), Title: fmt.Sprintf("colour of a cell with %s", plural(int64(n), "call"))})
		c.Texts = append(c.Texts, text{X: x + (sw-2)/2, Y: ly + 24, Anchor: "middle", Text: fmt.Sprint(n)})
	}
	if budget {
		// log2 position of 10 ms inside its row.
		us := float64(analysis.WALFsyncBudget.Microseconds())
		y := plotH - (math.Log2(us)-float64(lo))*heatRowH
		c.Lines = append(c.Lines, line{X1: heatLeft, Y1: y, X2: heatLeft + plotW, Y2: y, Stroke: "#d62728"})
		c.Texts = append(c.Texts, text{X: heatLeft + plotW, Y: y - 3, Anchor: "end", Text: "10 ms budget"})
	}
	c.Height = plotH + heatBottom + 44
	return c
}

// heatMaxTicks: at most this many intervals between the heatmap's time
// ticks (~97 px apart at the least on its 680 px plot: room for a label
// like 22:13:20.125).
const heatMaxTicks = 7

// tickStep returns the smallest round step (ns) that cuts span (ns) into
// at most maxIntervals: 1, 2, 5 times a power of ten below a second, then
// 1, 2, 5, 10, 15, 30 s, the same in minutes, 1, 2, 3, 6, 12 h, then 1,
// 2, 5 times a power of ten days.
func tickStep(span int64, maxIntervals int) int64 {
	fits := func(step int64) bool { return span/step <= int64(maxIntervals) }
	for p := int64(1); p < int64(time.Second); p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if fits(m * p) {
				return m * p
			}
		}
	}
	for _, unit := range []time.Duration{time.Second, time.Minute} {
		for _, m := range []int64{1, 2, 5, 10, 15, 30} {
			if fits(m * int64(unit)) {
				return m * int64(unit)
			}
		}
	}
	for _, m := range []int64{1, 2, 3, 6, 12} {
		if fits(m * int64(time.Hour)) {
			return m * int64(time.Hour)
		}
	}
	for p := int64(24 * time.Hour); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if fits(m * p) {
				return m * p
			}
		}
	}
}

// stepDecimals is how many decimals of a second label a tick step (ns)
// exactly: 0 for whole seconds, 1 for 500 ms, 2 for 20 ms, 3 for 1 ms.
func stepDecimals(step int64) int {
	d := 0
	for f := int64(time.Second); step%f != 0 && d < 9; f /= 10 {
		d++
	}
	return d
}

// ceilMultiple is the first multiple of step at or after t (ns, t >= 0).
func ceilMultiple(t, step int64) int64 {
	return (t + step - 1) / step * step
}

// wallClock prints a Unix time (ns) as UTC "15:04:05" with dec decimals
// of a second, truncated (a tick at a round instant prints exactly), and
// its date first ("01-02 15:04:05") when withDate.
func wallClock(ns int64, dec int, withDate bool) string {
	layout := "15:04:05"
	if dec > 0 {
		layout += "." + strings.Repeat("0", dec)
	}
	if withDate {
		layout = "01-02 " + layout
	}
	return time.Unix(0, ns).UTC().Format(layout)
}

// sinceTick labels a tick at ns since the first call, in the step's unit:
// "+1.5 s", "+10 min", "+6 h" (dec: the step's decimals of a second).
func sinceTick(ns, step int64, dec int) string {
	switch {
	case step%int64(time.Hour) == 0:
		return fmt.Sprintf("+%d h", ns/int64(time.Hour))
	case step%int64(time.Minute) == 0:
		return fmt.Sprintf("+%d min", ns/int64(time.Minute))
	}
	return fmt.Sprintf("+%.*f s", dec, float64(ns)/1e9)
}

// legendCounts picks up to five counts from 1 to maxN, spaced on the log
// scale heatColor shades by.
func legendCounts(maxN int) []int {
	maxN = max(maxN, 1)
	var out []int
	for i := 0; i < 5; i++ {
		n := int(math.Round(math.Expm1(math.Log1p(float64(maxN)) * float64(i) / 4)))
		if n < 1 {
			n = 1
		}
		if len(out) == 0 || n > out[len(out)-1] {
			out = append(out, n)
		}
	}
	return out
}

// fmtBound names the lower bound of latency row k (2^k µs).
func fmtBound(k int) string {
	return fmtSeconds(math.Exp2(float64(k)) / 1e6)
}

func fmtSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}

// heatColor shades from yellow (1 call) to dark red (the busiest cell),
// on a log scale so a single slow call stays visible; a cell never gets
// paler than 30% of the way, so one call still reads on white.
func heatColor(n, maxN int) string {
	f := math.Log1p(float64(n)) / math.Log1p(float64(max(maxN, 1)))
	f = 0.3 + 0.7*f
	from := [3]float64{255, 237, 160}
	to := [3]float64{189, 0, 38}
	var rgb [3]int
	for i := range rgb {
		rgb[i] = int(from[i] + (to[i]-from[i])*f)
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", rgb[0], rgb[1], rgb[2])
}

// peerSeries are the bars drawn per link, with their colours; the last
// is drawn only when the recording carries etcd's measured metric.
var peerSeries = []legendItem{
	{"handshake RTT p50", "#2ca02c"},
	{"connection setup p50 (SYN to first data)", "#17becf"},
	{"srtt p50 (kept-alive)", "#1f77b4"},
	{"new-connection probe mean", "#ff7f0e"},
	{"etcd metric mean (model)", "#d62728"},
	{"etcd metric mean (measured by etcd)", "#7b1fa2"},
}

// peerChart draws, per link, the traced RTTs, the mean etcd's peer RTT
// metric would read for it and, when the recording has it, what etcd's
// metric measured on that link, on one linear scale. Both come from
// etcdmetric.LinkModels: on the scraped member's links, the numbers the
// live run printed.
func peerChart(rep *peers.Report, metric []etcdmetric.PeerComparison, notMember []peers.Link) (*svgChart, []legendItem, string) {
	outside := map[netip.Addr]bool{} // accepting ends of no member: a stream's merged link keeps its To
	for _, l := range notMember {
		outside[l.To] = true
	}
	window := time.Duration(rep.WindowNs)
	models, unmatched := etcdmetric.LinkModels(rep.Links, window, metric)
	compared := 0
	series := peerSeries[:5]
	if len(metric) > 0 {
		series = peerSeries
	}
	type row struct {
		label string
		vals  []float64 // seconds, series order
	}
	var rows []row
	maxV := 0.0
	for _, m := range models {
		l := m.Link
		label := render.PeerLinkLabel(&l)
		model := m.Model
		if l.Link.NotEtcd() {
			// A client that is not etcd (curl, a probe): no etcd prober
			// dials there, so no metric to model (the new-user walk saw
			// curl's links drawn with one).
			label += " (not etcd)"
			model = math.NaN()
		}
		if l.Folded == 0 && outside[l.Link.To] {
			label += " (not a member)"
		}
		r := row{label: label, vals: []float64{
			float64(l.HandshakeRTT.P50) / 1e9, float64(l.Setup.P50) / 1e9, float64(l.SRTT.P50) / 1e9, l.PerRequest.Mean() / 1e9, model}}
		if m.Compared {
			compared++
		}
		if len(metric) > 0 {
			r.vals = append(r.vals, m.Measured)
		}
		for _, v := range r.vals {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				maxV = math.Max(maxV, v)
			}
		}
		rows = append(rows, r)
	}
	note := fmt.Sprintf("%d peer events over %s, %d links. One of etcd's probers dials per probe: where a dial costs more than a kept-alive round trip, the metric is above the RTT (docs/peers.md#etcds-metric-and-the-model).",
		rep.Events, window.Round(time.Millisecond), len(rows))
	if rep.Unassembled > 0 {
		note += " " + render.UnassembledLine(rep.Unassembled) + "."
	}
	if rep.FoldedEarly > 0 {
		note += " " + render.FoldedEarlyLine(rep.FoldedEarly) + "."
	}
	if len(metric) > 0 {
		note += fmt.Sprintf(" The purple bar is etcd's own etcd_network_peer_round_trip_time_seconds over the recording (mean of every prober's observations; %d series), drawn only on the links of the member it was scraped from.", len(metric))
		if compared > 0 {
			note += fmt.Sprintf(" On those %d links the model is the one the live run printed (its scrape window, etcdscope's kept-alive probe, the EWMA replayed); on the others it is predicted from the link's traced numbers alone.", compared)
		}
		if unmatched > 0 {
			note += fmt.Sprintf(" %d series could not be matched to one link (record with --etcd-endpoints for the member list).", unmatched)
		}
	} else {
		note += " The recording carries no etcd metric: record with etcdscope peers --record FILE --etcd-metrics URL to draw what etcd measured beside the model."
	}
	if len(rows) == 0 {
		return nil, nil, note + " No link had a connection to draw."
	}
	c := &svgChart{Width: chartWidth, Label: "per-peer RTT against etcd's peer RTT metric"}
	y := 4.0
	left := 260.0
	area := chartWidth - left - 90
	for _, r := range rows {
		c.Texts = append(c.Texts, text{X: left - 8, Y: y + float64(len(series))/2*peerRowH, Anchor: "end", Text: r.label})
		for i, v := range r.vals {
			w := 0.0
			if maxV > 0 && v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
				w = v / maxV * area
			}
			ry := y + float64(i)*peerRowH
			if w > 0 {
				c.Rects = append(c.Rects, rect{X: left, Y: ry, W: w, H: peerRowH - 3, Fill: series[i].Color,
					Title: fmt.Sprintf("%s: %s", series[i].Name, fmtSeconds(v))})
				c.Texts = append(c.Texts, text{X: left + w + 4, Y: ry + peerRowH - 5, Anchor: "start", Text: fmtSeconds(v)})
			} else {
				c.Texts = append(c.Texts, text{X: left + 4, Y: ry + peerRowH - 5, Anchor: "start", Text: series[i].Name + ": none seen"})
			}
		}
		y += float64(len(series))*peerRowH + peerGroupGp
	}
	c.Height = y
	return c, series, note
}
