package report

import (
	"bytes"
	"encoding/json"
	"html/template"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/render"
)

// The testdata recordings were made with the real tool on a three-member
// etcd v3.6.16 cluster on 127.0.5.{1,2,3} (20 puts over 8 s):
//
//	etcdscope fsync --comm etcd --output json --interval 0 --duration 8s > etcd-fsync.jsonl
//	etcdscope peers --duration 8s --record peers.jsonl
func readTestdata(t *testing.T) Input {
	t.Helper()
	in := readRecording(t, "testdata/etcd-fsync.jsonl")
	p, err := os.Open("testdata/peers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	evs, err := peers.ReadEvents(p)
	if err != nil {
		t.Fatal(err)
	}
	in.Peers = evs
	return in
}

// readRecording reads an fsync recording (etcdscope fsync --output json).
// testdata/stacked-fsync.jsonl: the first 60 calls and the summary of
//
//	etcdscope fsync --output json --interval 0 --workload wal --dir MNT --duration 2s
//
// with MNT an ext4 on loop0 over a sparse file on the host's ext4 (vda).
func readRecording(t *testing.T, path string) Input {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, sum, err := analysis.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Title: filepath.Base(path), Fsyncs: recs, Summary: sum}
}

// walk calls fn on every element node.
func walk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// renderPage renders in and parses the result as HTML5.
func renderPage(t *testing.T, in Input) (string, *html.Node) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, in); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("not HTML: %v", err)
	}
	return b.String(), doc
}

// TestPageStructure renders the recorded run and checks the page: one bar
// chart and one heatmap per report group, a peers chart with a row per
// link, stacked segments in the layer colours, and nothing that would be
// fetched at view time.
func TestPageStructure(t *testing.T) {
	in := readTestdata(t)
	out, doc := renderPage(t, in)
	groups := analysis.BuildReport(in.Fsyncs, 0, 0, nil).Groups
	if len(groups) == 0 {
		t.Fatal("testdata recording has no groups")
	}
	var svgs []*html.Node
	var rects, titles int
	layerFills := map[string]bool{}
	for _, c := range LayerColors {
		layerFills[c] = true
	}
	layerRects := 0
	walk(doc, func(n *html.Node) {
		switch n.Data {
		case "svg":
			svgs = append(svgs, n)
		case "rect":
			rects++
			if layerFills[attr(n, "fill")] {
				layerRects++
			}
		case "title":
			titles++
		case "script", "link", "img", "iframe", "object", "embed", "image", "use", "base", "form", "audio", "video", "source":
			t.Errorf("element <%s> in a self-contained page", n.Data)
		}
		for _, a := range n.Attr {
			k := strings.ToLower(a.Key)
			if k == "href" && strings.HasPrefix(a.Val, "#") {
				continue // a link inside the page (the overview's)
			}
			if k == "href" || k == "src" || k == "xlink:href" || k == "action" || k == "srcset" || strings.HasPrefix(k, "on") {
				t.Errorf("<%s %s=%q>: a reference or handler in a self-contained page", n.Data, a.Key, a.Val)
			}
		}
	})
	for _, bad := range []string{"http://", "https://", "url(", "@import", "//cdn"} {
		if strings.Contains(out, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if strings.Contains(out, "ZgotmplZ") {
		t.Error("html/template rejected a value (ZgotmplZ in output)")
	}
	if want := 2*len(groups) + 1; len(svgs) != want {
		t.Errorf("%d <svg> charts, want %d (bars and heatmap for %d groups, one peers chart)", len(svgs), want, len(groups))
	}
	for i, s := range svgs {
		n := 0
		walk(s, func(c *html.Node) {
			if c.Data == "rect" {
				n++
			}
		})
		if n == 0 {
			t.Errorf("svg %d (%s) has no rect", i, attr(s, "aria-label"))
		}
	}
	if layerRects < 4*len(groups) || titles < rects {
		t.Errorf("%d layer segments (want >= %d), %d tooltips for %d rects", layerRects, 4*len(groups), titles, rects)
	}
	last := svgs[len(svgs)-1]
	if attr(last, "aria-label") != "per-peer RTT against etcd's peer RTT metric" {
		t.Errorf("last chart is %q, want the peers chart", attr(last, "aria-label"))
	}
	if !strings.Contains(out, "10 ms budget") {
		t.Error("no 10 ms budget line on the WAL heatmaps")
	}
	t.Logf("%d bytes, %d groups, %d charts, %d rects", len(out), len(groups), len(svgs), rects)
}

func TestPageWithoutPeers(t *testing.T) {
	in := readTestdata(t)
	in.Peers = nil
	out, doc := renderPage(t, in)
	n := 0
	walk(doc, func(c *html.Node) {
		if c.Data == "svg" && strings.Contains(attr(c, "aria-label"), "peer") {
			n++
		}
	})
	if n != 0 || !strings.Contains(out, "made without peer data") {
		t.Errorf("%d peer charts; want none and a note saying the recording has no peer data", n)
	}
}

// TestPageWithEmptyPeersRecording: a peers recording given that holds no
// event is said as such; the page told a user who had passed --peers to
// pass it.
func TestPageWithEmptyPeersRecording(t *testing.T) {
	in := readTestdata(t)
	in.Peers, in.PeerEvents, in.PeerReport = nil, 0, &peers.Report{}
	out, _ := renderPage(t, in)
	if !strings.Contains(out, "The peers recording given holds no connection event") || strings.Contains(out, "made without peer data") {
		t.Errorf("page with an empty peers recording does not say it is empty")
	}
}

// TestLayerBars checks the geometry: each bar's segments are each layer's
// share of the mean call of its level, the bar normalised to the full bar
// area, and the level's mean time written beside it.
func TestLayerBars(t *testing.T) {
	rec := func(flush, other int64) analysis.FsyncRecord {
		return analysis.FsyncRecord{TotalNs: flush + other, Layers: analysis.Layers{DeviceFlushNs: flush, OtherNs: other}}
	}
	var recs []analysis.FsyncRecord
	for i := 0; i < 99; i++ {
		recs = append(recs, rec(1000, 1000)) // 2 µs
	}
	recs = append(recs, rec(150_000, 50_000)) // one 200 µs call
	c := layerBars(callList(recs))
	type seg struct {
		fill string
		w    float64
	}
	var bars [][]seg
	lastY := -1.0
	for _, r := range c.Rects {
		if r.Y != lastY {
			bars = append(bars, nil)
			lastY = r.Y
		}
		bars[len(bars)-1] = append(bars[len(bars)-1], seg{r.Fill, r.W})
	}
	if len(bars) != 4 {
		t.Fatalf("%d bars, want 4 (all, slowest 10%%, slowest 1%%, slowest call)", len(bars))
	}
	// all: mean flush (99*1000+150000)/100 = 2490, other 1490.
	// slowest 10%: 9 at 1000/1000 and the slow one: 15900 / 5900.
	// slowest 1% and slowest call: 150000 / 50000.
	want := [][2]float64{{2490, 1490}, {15900, 5900}, {150000, 50000}, {150000, 50000}}
	wantText := []string{"0.004 ms mean", "0.022 ms mean", "0.200 ms", "0.200 ms"}
	var right []string
	for _, tx := range c.Texts {
		if tx.Anchor == "start" {
			right = append(right, tx.Text)
		}
	}
	for i, b := range bars {
		if len(b) != 2 || b[0].fill != LayerColors[analysis.LayerDeviceFlush] || b[1].fill != LayerColors[analysis.LayerOther] {
			t.Fatalf("bar %d: %v, want device_flush then other", i, b)
		}
		total := want[i][0] + want[i][1]
		for j := range 2 {
			if w := want[i][j] / total * barAreaW; math.Abs(b[j].w-w) > 1e-9 {
				t.Errorf("bar %d segment %d: width %.4f, want %.4f", i, j, b[j].w, w)
			}
		}
		if b[0].w+b[1].w-barAreaW > 1e-9 || barAreaW-(b[0].w+b[1].w) > 1e-9 {
			t.Errorf("bar %d is %.4f wide, want the full %d", i, b[0].w+b[1].w, barAreaW)
		}
	}
	if strings.Join(right, "|") != strings.Join(wantText, "|") {
		t.Errorf("times beside the bars %q, want %q", right, wantText)
	}
	// Tooltips: a mean for the bars of several calls, a time for the
	// bars of one call (the slowest call; here also the slowest 1%): "ms
	// mean" there misread as an average.
	for _, r := range c.Rects {
		single := strings.HasPrefix(r.Title, "slowest call,") || strings.Contains(r.Title, "(1 call),")
		if single == strings.Contains(r.Title, " ms mean (") {
			t.Errorf("tooltip %q", r.Title)
		}
	}
}

func TestPlural(t *testing.T) {
	if plural(1, "call") != "1 call" || plural(0, "call") != "0 calls" || plural(171, "call") != "171 calls" {
		t.Error(plural(1, "call"), plural(0, "call"), plural(171, "call"))
	}
}

func TestHeatColor(t *testing.T) {
	for _, c := range []struct {
		n, max int
		want   string
	}{
		{1, 1, "rgb(189,0,38)"},
		{100, 100, "rgb(189,0,38)"},
		{1, 100, "rgb(228,140,110)"}, // f = 0.3 + 0.7·ln 2/ln 101 = 0.405,
	} {
		if got := heatColor(c.n, c.max); got != c.want {
			t.Errorf("heatColor(%d, %d) = %s, want %s", c.n, c.max, got, c.want)
		}
	}
}

// TestPeersChartMeasuredMetric: with the recording's etcd_peer_metric
// record, the links of the scraped member (a comparison's FromPID and
// Peer) get a sixth bar with etcd's mean (observation-weighted over
// probers) and the comparisons' model; another member's link to the same
// peer gets neither (the metric is scraped from one member). The legend
// and the note say so. Without it, five bars and a note on how to record
// it.
func TestPeersChartMeasuredMetric(t *testing.T) {
	in := readTestdata(t)
	links := peers.Analyze(in.Peers, peers.Options{}).Links
	var member uint32
	for _, l := range links {
		if l.Link.Direction == event.PeerActive && l.Link.FromPID != 0 {
			member = l.Link.FromPID
			break
		}
	}
	want := map[int]float64{}
	model := map[int]float64{}
	others := 0
	for i, l := range links {
		if l.Link.Direction != event.PeerActive {
			continue
		}
		if l.Link.FromPID != member {
			others++
			continue
		}
		p := l.Link.To.Unmap()
		// Two probers: 4 observations at m and 12 at 3m: weighted mean
		// 2.5m; their models 1.5m and 0.5m, 4 and 4 observations: 1m.
		m := 0.001 * float64(i+1)
		in.PeerMetric = append(in.PeerMetric,
			etcdmetric.PeerComparison{Peer: p, FromPID: member, Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "a", Prober: "ROUND_TRIPPER_SNAPSHOT"}, Observations: 4, Mean: m,
				Prediction: etcdmetric.Prediction{Mean: 1.5 * m, Observations: 4}}},
			etcdmetric.PeerComparison{Peer: p, FromPID: member, Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "a", Prober: "ROUND_TRIPPER_RAFT_MESSAGE"}, Observations: 12, Mean: 3 * m,
				Prediction: etcdmetric.Prediction{Mean: 0.5 * m, Observations: 4}}})
		want[i], model[i] = 2.5*m, m
	}
	if len(want) == 0 || others == 0 {
		t.Fatalf("testdata: %d links of pid %d, %d of other processes: want both", len(want), member, others)
	}
	// One series without a peer address (no member list).
	in.PeerMetric = append(in.PeerMetric, etcdmetric.PeerComparison{Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "b"}, Observations: 3, Mean: 0.2}})
	rep := peers.Analyze(in.Peers, peers.Options{})
	c, legend, note := peerChart(&rep, in.PeerMetric, nil)
	if len(legend) != 6 || !strings.Contains(note, "1 series could not be matched") || !strings.Contains(note, "drawn only on the links of the member") {
		t.Fatalf("legend %v, note %q", legend, note)
	}
	for i, l := range links {
		label := render.PeerLinkLabel(&l)
		got := barTitles(c, label)
		w, ok := want[i]
		if !ok {
			if got[5] != "" {
				t.Errorf("link %s (not the scraped member's): measured bar %q, want none", label, got[5])
			}
			continue
		}
		if m := "etcd metric mean (measured by etcd): " + fmtSeconds(w); got[5] != m {
			t.Errorf("link %s: %q, want %q", label, got[5], m)
		}
		if m := "etcd metric mean (model): " + fmtSeconds(model[i]); got[4] != m {
			t.Errorf("link %s: %q, want %q", label, got[4], m)
		}
	}
	_, legend, note = peerChart(&rep, nil, nil)
	if len(legend) != 5 || !strings.Contains(note, "--etcd-metrics URL") {
		t.Errorf("without the record: legend %v, note %q", legend, note)
	}
}

// barTitles returns the titles of the bars drawn for the link labelled
// label, by series ("" where none is drawn).
func barTitles(c *svgChart, label string) [6]string {
	var out [6]string
	for _, tx := range c.Texts {
		if tx.Text != label || tx.Anchor != "end" {
			continue
		}
		top := tx.Y - 6*peerRowH/2
		for _, r := range c.Rects {
			if i := int((r.Y - top) / peerRowH); r.Y >= top && i < 6 && r.Y < top+6*peerRowH {
				out[i] = r.Title
			}
		}
	}
	return out
}

// mergedFsyncs makes n merged guest fsyncs of 1 ms (the slowest 10 ms):
// 20% guest other, 30% virtualization, 50% host device flush.
func mergedFsyncs(n int) []MergedCall {
	var out []MergedCall
	for i := range n {
		total := int64(1_000_000)
		if i == n-1 {
			total = 10_000_000
		}
		s := merge.Split{GuestOtherNs: total / 5, VirtualizationNs: total * 3 / 10, HostDeviceFlushNs: total / 2}
		out = append(out, MergedCall{TotalNs: total, Matched: i%2 == 0, Split: s})
	}
	return out
}

// TestMergeBars: the guest | virtualization | host chart has one bar per
// level, each 100% wide in the split's proportions; ReadMerged reads
// merge's JSON output and refuses another recording.
func TestMergeBars(t *testing.T) {
	c, legend, note := mergeBars(mergedFsyncs(20), MergedCounts{})
	// No call has a dm layer: the dm parts are left out of the legend.
	if len(legend) != len(mergeParts)-2 || !strings.Contains(note, "20 guest fsyncs") || !strings.Contains(note, "10 with every flush matched") {
		t.Errorf("legend %d items, note %q", len(legend), note)
	}
	// Guest and host on device-mapper: guest dm and host dm are drawn,
	// each in its own colour, in the split's proportions.
	dm := mergedFsyncs(20)
	for i := range dm {
		s := &dm[i].Split
		s.GuestDMNs, s.GuestOtherNs = s.GuestOtherNs/2, s.GuestOtherNs-s.GuestOtherNs/2
		s.HostDMNs, s.HostDeviceFlushNs = s.HostDeviceFlushNs/5, s.HostDeviceFlushNs-s.HostDeviceFlushNs/5
	}
	dc, dlegend, _ := mergeBars(dm, MergedCounts{})
	colors := map[string]string{}
	for _, l := range dlegend {
		colors[l.Name] = l.Color
	}
	if len(dlegend) != len(mergeParts) || colors["guest dm"] == "" || colors["host dm"] == "" {
		t.Errorf("with dm: legend %v, want every part", dlegend)
	}
	seen := map[string]bool{}
	for _, l := range dlegend {
		if seen[l.Color] {
			t.Errorf("legend colour %s used twice (%s)", l.Color, l.Name)
		}
		seen[l.Color] = true
	}
	dmRects := 0
	for _, r := range dc.Rects {
		want := map[string]float64{colors["guest dm"]: 0.1, colors["host dm"]: 0.1}[r.Fill]
		if want == 0 {
			continue
		}
		dmRects++
		if math.Abs(r.W-want*barAreaW) > 1e-9 {
			t.Errorf("dm segment %s at y=%v: %v px, want %v", r.Fill, r.Y, r.W, want*barAreaW)
		}
	}
	if dmRects != 8 {
		t.Errorf("%d dm segments drawn, want 8 (guest and host dm in each of 4 bars)", dmRects)
	}
	byY := map[float64][]float64{}
	for _, r := range c.Rects {
		byY[r.Y] = append(byY[r.Y], r.W)
	}
	if len(byY) != 4 {
		t.Fatalf("%d bars, want 4", len(byY))
	}
	for y, ws := range byY {
		if len(ws) != 3 || math.Abs(ws[0]-0.2*barAreaW) > 1e-9 || math.Abs(ws[1]-0.3*barAreaW) > 1e-9 || math.Abs(ws[2]-0.5*barAreaW) > 1e-9 {
			t.Errorf("bar at y=%v: %v, want 20/30/50%% of %d", y, ws, barAreaW)
		}
	}
	var b bytes.Buffer
	for _, m := range mergedFsyncs(3) {
		line, _ := json.Marshal(merge.MergedFsync{Type: "merged_fsync", V: 1, TotalNs: m.TotalNs, Matched: m.Matched, Split: m.Split})
		b.Write(append(line, '\n'))
	}
	b.WriteString(`{"type":"merge_summary","v":1}` + "\n")
	ms, _, err := ReadMerged(&b)
	if err != nil || len(ms) != 3 || ms[2].Split.VirtualizationNs != 3_000_000 {
		t.Errorf("ReadMerged: %d records, %v", len(ms), err)
	}
	if _, _, err := ReadMerged(strings.NewReader(`{"type":"fsync","v":1}`)); err == nil {
		t.Error("ReadMerged took an fsync recording")
	}
	in := readTestdata(t)
	in.Merged = mergedFsyncs(20)
	out, _ := renderPage(t, in)
	if !strings.Contains(out, `aria-label="guest, virtualization and host share`) || !strings.Contains(out, "virtualization") {
		t.Error("the page has no merge chart")
	}
}

// TestHeatmapWallClock: with the summary's mono_to_wall_ns the time axis
// is UTC wall-clock time; without it, seconds since the first call.
func TestHeatmapWallClock(t *testing.T) {
	recs := []analysis.FsyncRecord{{StartNs: 1e9, EndNs: 1e9 + 5e5, TotalNs: 5e5}, {StartNs: 9e9, EndNs: 9e9 + 5e5, TotalNs: 5e5}}
	// Unix time 1700000000 s (2023-11-14 22:13:20 UTC) at monotonic 1 s.
	off := int64(1_700_000_000e9) - 1e9
	texts := func(c svgChart) string {
		var s []string
		for _, tx := range c.Texts {
			s = append(s, tx.Text)
		}
		return strings.Join(s, "|")
	}
	wall := texts(heatmap(callList(recs), 1e9, 9e9+5e5, false, off))
	for _, want := range []string{"22:13:20", "22:13:28", "wall-clock time, UTC (2023-11-14)"} {
		if !strings.Contains(wall, want) {
			t.Errorf("wall-clock axis lacks %q: %s", want, wall)
		}
	}
	rel := texts(heatmap(callList(recs), 1e9, 9e9+5e5, false, 0))
	if !strings.Contains(rel, "+8 s") || !strings.Contains(rel, "no wall clock") {
		t.Errorf("relative axis: %s", rel)
	}
}

// TestHeatmapTicksRound: the time axis's ticks sit at round instants of
// the clock shown and are labelled exactly (a new user's 4.76 s run was
// labelled 14:22:49, :51, :52, :53, :54 at ticks 1.19 s apart, cut to
// whole seconds: a 2 s gap that was not there); the cells' tooltips give
// the same clock. Spans from 3 ms to 2 days, with and without the wall
// clock.
func TestHeatmapTicksRound(t *testing.T) {
	t0 := int64(1e9)
	user := time.Date(2026, 12, 2, 14, 22, 49, 310e6, time.UTC).UnixNano() - t0
	for _, c := range []struct {
		name       string
		span       int64 // ns
		monoToWall int64
		want       []string // the tick labels, when pinned
	}{
		{"new user's 5 s run", 4_760_000_000, user, []string{"14:22:50", "14:22:51", "14:22:52", "14:22:53", "14:22:54"}},
		{"new user's run, no wall clock", 4_760_000_000, 0, []string{"0", "+1 s", "+2 s", "+3 s", "+4 s"}},
		{"1.2 s", 1_200_000_000, user, []string{"14:22:49.4", "14:22:49.6", "14:22:49.8", "14:22:50.0", "14:22:50.2", "14:22:50.4"}},
		{"3 ms", 3_000_000, user, nil},
		{"90 s", 90e9, user, nil},
		{"47 min", 47 * 60e9, 0, []string{"0", "+10 min", "+20 min", "+30 min", "+40 min"}},
		{"2 days", 2 * 86400e9, user, []string{"12-03 00:00:00", "12-03 12:00:00", "12-04 00:00:00", "12-04 12:00:00"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := []analysis.FsyncRecord{{StartNs: uint64(t0), EndNs: uint64(t0) + 5e5, TotalNs: 5e5},
				{StartNs: uint64(t0 + c.span - 5e5), EndNs: uint64(t0 + c.span), TotalNs: 5e5}}
			h := heatmap(callList(recs), uint64(t0), uint64(t0+c.span), false, c.monoToWall)
			var labels []string
			var xs []float64
			for _, tx := range h.Texts {
				if tx.Y == h.Height-44-heatBottom+16 && tx.Anchor == "middle" {
					labels, xs = append(labels, tx.Text), append(xs, tx.X)
				}
			}
			if c.want != nil && !slices.Equal(labels, c.want) {
				t.Errorf("ticks %q, want %q", labels, c.want)
			}
			origin := time.Duration(0)
			if c.monoToWall != 0 {
				origin = time.Duration(t0 + c.monoToWall)
			}
			checkTicks(t, labels, xs, heatLeft, origin, float64(c.span)/float64(chartWidth-heatLeft-10), c.monoToWall != 0)
			// Each cell's tooltip: on the axis's clock, and since the first call.
			cell := h.Rects[0].Title
			want := " s since the first call: 1 call of "
			if c.monoToWall != 0 {
				want = wallClock(t0+c.monoToWall, 0, c.span > 86400e9)
			}
			if !strings.Contains(cell, want) {
				t.Errorf("first cell's tooltip %q lacks %q", cell, want)
			}
			t.Logf("ticks %q; first cell %q", labels, cell)
		})
	}
}

// checkTicks checks a heatmap's time-axis tick labels (wall: UTC
// "15:04:05[.000]"; else "0", "+1.5 s") at their x (px, the plot starting
// at left): from 2 to 8 of them, all one round step apart, each at a
// multiple of the step since the Unix epoch (wall) or the first call,
// printed exactly, and placed where their time falls: the first at
// (label - origin) / nsPerPx from left, each next step / nsPerPx further
// (within 0.5 px). origin is the axis's time at the plot's left edge
// (wall: Unix time, ns).
func checkTicks(t *testing.T, labels []string, xs []float64, left float64, origin time.Duration, nsPerPx float64, wall bool) {
	t.Helper()
	if len(labels) < 2 || len(labels) > heatMaxTicks+1 || len(xs) != len(labels) {
		t.Fatalf("%d tick labels %q at %v, want 2 to %d", len(labels), labels, xs, heatMaxTicks+1)
	}
	at := make([]time.Duration, len(labels))
	for i, l := range labels {
		if wall {
			// "15:04:05[.0..]", or "01-02 15:04:05" over midnight, in the
			// origin's year.
			o := time.Unix(0, int64(origin)).UTC()
			layout := "2006-01-02 15:04:05.999999999"
			if len(l) > 5 && l[2] == '-' {
				l = o.Format("2006-") + l
			} else {
				l = o.Format("2006-01-02 ") + l
			}
			tm, err := time.Parse(layout, l)
			if err != nil {
				t.Fatalf("tick %q: %v", labels[i], err)
			}
			at[i] = time.Duration(tm.UnixNano())
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimPrefix(l, "+"), " ")
		v, err := strconv.ParseFloat(num, 64)
		mult, ok := map[string]float64{"s": 1e9, "min": 60e9, "h": 3600e9}[unit]
		if err != nil || (i == 0) != (l == "0") || i > 0 && !ok {
			t.Fatalf("tick %q: want 0 first, then +N s, min or h (%v)", l, err)
		}
		at[i] = time.Duration(math.Round(v * mult))
	}
	step := at[1] - at[0]
	plotW := float64(chartWidth - heatLeft - 10)
	if at[0] < origin || at[len(at)-1] > origin+time.Duration(nsPerPx*plotW) {
		t.Errorf("ticks %q outside the plotted span, %v from %v", labels, time.Duration(nsPerPx*plotW), origin)
	}
	o := origin
	for i := range labels {
		if i > 0 && at[i]-at[i-1] != step {
			t.Errorf("ticks %q: %v apart, then %v", labels, step, at[i]-at[i-1])
		}
		if at[i]%step != 0 {
			t.Errorf("tick %q not at a multiple of the step %v", labels[i], step)
		}
		var want float64
		if i == 0 {
			want = left + float64(at[0]-o)/nsPerPx
		} else {
			want = xs[i-1] + float64(step)/nsPerPx
		}
		if math.Abs(xs[i]-want) > 0.5 {
			t.Errorf("tick %q at x %.1f px, want %.1f (%v a px)", labels[i], xs[i], want, time.Duration(nsPerPx))
		}
	}
	if !slices.Contains(roundSteps(), step) {
		t.Errorf("ticks %q: step %v is not a round step", labels, step)
	}
}

// roundSteps lists the tick steps a reader calls round, written out
// apart from tickStep: 1, 2, 5 ms .. 500 ms, 1, 2, 5, 10, 15, 30 s and min,
// 1, 2, 3, 6, 12 h, 1, 2, 5 days.
func roundSteps() []time.Duration {
	var out []time.Duration
	for _, p := range []time.Duration{time.Microsecond, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		out = append(out, p, 2*p, 5*p)
	}
	for _, u := range []time.Duration{time.Second, time.Minute} {
		for _, m := range []time.Duration{1, 2, 5, 10, 15, 30} {
			out = append(out, m*u)
		}
	}
	for _, m := range []time.Duration{1, 2, 3, 6, 12, 24, 48, 120} {
		out = append(out, m*time.Hour)
	}
	return out
}

// TestPageWritesAndSched: a group's section says how its other layer
// splits by scheduler state (--sched) and summarises the write calls
// before its fsyncs (--writes); without them it says neither.
func TestPageWritesAndSched(t *testing.T) {
	rec := analysis.FsyncRecord{Type: "fsync", PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
		Syscall: "fdatasync", StartNs: 1e9, EndNs: 1e9 + 4e6, TotalNs: 4e6, Layers: analysis.Layers{DeviceFlushNs: 2e6, OtherNs: 2e6},
		Sched: &analysis.Sched{Call: analysis.SchedSplit{RunnableNs: 1e6, RunningNs: 1e6, BlockedNs: 2e6},
			Other: analysis.SchedSplit{RunnableNs: 1e6, RunningNs: 5e5, BlockedNs: 5e5}}}
	w := analysis.WriteRecord{Type: "write", PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
		Syscall: "write", TotalNs: 8e6, Layers: analysis.WriteLayers{ThrottledNs: 6e6, OtherNs: 2e6}, Throttles: 1}
	p := build(Input{Title: "t", Fsyncs: []analysis.FsyncRecord{rec}, Writes: []analysis.WriteRecord{w}})
	if len(p.Groups) != 1 {
		t.Fatalf("%d groups", len(p.Groups))
	}
	g := p.Groups[0]
	if want := "other, by the thread's scheduler state: runnable 25.0%, running 12.5%, blocked 12.5%"; g.Other != want {
		t.Errorf("other line %q, want %q", g.Other, want)
	}
	if !strings.Contains(g.Writes, "(write): 1 call") || !strings.Contains(g.Writes, "throttled 75.0%") || !strings.Contains(g.Writes, "1 throttled sleeps") {
		t.Errorf("writes line %q", g.Writes)
	}
	rec.Sched = nil
	if g := build(Input{Title: "t", Fsyncs: []analysis.FsyncRecord{rec}}).Groups[0]; g.Other != "" || g.Writes != "" {
		t.Errorf("without --sched and --writes: %q, %q", g.Other, g.Writes)
	}
}

// TestPeersChartSetup: a link whose connections were traced from SYN to
// the peer's first data byte (event.PeerSetup) gets a setup bar with its
// p50: 2.05 s here, a peer stalling after accept (issue 14).
func TestPeersChartSetup(t *testing.T) {
	const ms = uint64(1e6)
	local, remote := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddrPort("10.0.0.2:2380")
	var evs []event.Peer
	for i := uint64(0); i < 5; i++ {
		t0, sk, lp := 1000*ms+i*4000*ms, 100+i, netip.AddrPortFrom(local, uint16(40000+i))
		for _, e := range []event.Peer{
			{Kind: event.PeerOpen, TimeNs: t0 + 50*ms, DurationNs: 50 * ms, SRTTus: 50_000, MinRTTus: 50_000},
			{Kind: event.PeerSetup, TimeNs: t0 + 2050*ms, DurationNs: 2050 * ms},
			{Kind: event.PeerCloseStart, TimeNs: t0 + 2100*ms, DurationNs: 2100 * ms},
			{Kind: event.PeerClose, TimeNs: t0 + 2150*ms, DurationNs: 2100 * ms},
		} {
			e.Direction, e.PID, e.Comm, e.Remote, e.Local, e.Socket = event.PeerActive, 7, "etcd", remote, lp, sk
			evs = append(evs, e)
		}
	}
	rep := peers.Analyze(evs, peers.Options{})
	c, legend, _ := peerChart(&rep, nil, nil)
	if c == nil || legend[1].Name != "connection setup p50 (SYN to first data)" {
		t.Fatalf("chart %v, legend %v", c, legend)
	}
	var titles []string
	for _, r := range c.Rects {
		if r.Fill == legend[1].Color {
			titles = append(titles, r.Title)
		}
	}
	if want := "connection setup p50 (SYN to first data): " + fmtSeconds(2.05); len(titles) != 1 || titles[0] != want {
		t.Errorf("setup bars %q, want [%q]", titles, want)
	}
}

// TestPageDiskVerdict: a group whose calls queue behind other I/O shows
// "contention" in the overview's disk column and the sentence with its
// numbers under the group's title, the recording's disk its write cache;
// a group with no disk verdict shows neither.
func TestPageDiskVerdict(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 20; i++ {
		recs = append(recs, analysis.FsyncRecord{Type: "fsync", PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
			Syscall: "fdatasync", StartNs: uint64(1e9 + i*1e7), EndNs: uint64(1e9 + i*1e7 + 4e6), TotalNs: 4e6, Flushes: 1, FUAWrites: 1,
			Layers: analysis.Layers{DeviceFlushNs: 1e6, BlockQueueNs: 2e6, OtherNs: 1e6}})
	}
	var html bytes.Buffer
	for i := range recs {
		recs[i].Disks = []string{"252:0"}
	}
	sum := analysis.Report{Disks: []analysis.DiskCache{{Dev: "252:0", Name: "nullb0", WriteCache: "write back", FUA: true}}}
	if err := Render(&html, Input{Title: "t", Fsyncs: recs, Summary: sum}); err != nil {
		t.Fatal(err)
	}
	s := html.String()
	for _, want := range []string{"<th>disk</th>", "<td>contention</td>", "1.00 flushes per call, 1.00 FUA writes per call",
		"disk nullb0 (252:0): write cache write back, FUA (a journal commit is a flush and a FUA write)",
		"disk verdict: contention: block_queue 50% of the time: other I/O on this disk delays etcd&#39;s (device_flush 25% of the time, 0.500 ms per flush or FUA write)<br>device_flush p50 1.000 ms a call (the fixed price a floor shows); block_queue p99 2.000 ms a call, 50% of the time (the queue contention shows)"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for i := range recs {
		recs[i].Layers = analysis.Layers{DeviceFlushNs: 1e6, OtherNs: 3e6}
	}
	html.Reset()
	if err := Render(&html, Input{Title: "t", Fsyncs: recs}); err != nil {
		t.Fatal(err)
	}
	if s := html.String(); strings.Contains(s, "disk verdict:") || strings.Contains(s, "<td>contention</td>") || strings.Contains(s, "disk: no verdict") {
		t.Error("a group without a disk verdict, far from its thresholds, shows one or a why")
	}
	// A new user's run: device_flush 39.98% of the time, which the page
	// rounds to 40%, the floor's threshold: the overview and the group
	// say which condition was missed, with the exact share.
	for i := range recs {
		recs[i].Layers = analysis.Layers{DeviceFlushNs: 1_599_200, OtherNs: 1_200_000, DataWritebackNs: 1_200_800}
	}
	html.Reset()
	if err := Render(&html, Input{Title: "t", Fsyncs: recs}); err != nil {
		t.Fatal(err)
	}
	s = html.String()
	why := "device_flush 39.98%, under the 40% the floor verdict needs"
	for _, want := range []string{`device_flush 40%</td>`, `<a href="#group-1-disk" title="` + why + `">none</a>`,
		`<p class="note" id="group-1-disk">etcd pid 1 · ext4 on 254:1 · wal files: disk: no verdict (` + why + `)</p>`,
		`disk verdict: none (` + why + `)`} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestPageLossNamed: lost events and missed probe runs are named apart, as
// in the summary and the table: the page's warning says which a bigger
// ring helps, and each group's verdict carries analysis.Group.Bias.
func TestPageLossNamed(t *testing.T) {
	recs := []analysis.FsyncRecord{{Type: "fsync", PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
		Syscall: "fdatasync", StartNs: 1e9, EndNs: 1e9 + 1e6, TotalNs: 1e6, Layers: analysis.Layers{OtherNs: 1e6}}}
	for _, tc := range []struct {
		lost, missed uint64
		want, not    []string
	}{
		{0, 4, []string{"4 missed probe runs (the kernel skipped them: --ring-size does not help): the numbers below undercount.", "(biased: 4 missed probe runs)"},
			[]string{"lost events (", "lost event,", "raise --ring-size"}},
		{3, 0, []string{"3 lost events (the ring buffer overflowed: raise --ring-size): the numbers below undercount.", "(biased: 3 lost events)"},
			[]string{"missed probe runs (", "lost events, 0 missed probe runs)"}},
		{3, 4, []string{"3 lost events (the ring buffer overflowed: raise --ring-size); 4 missed probe runs", "(biased: 3 lost events, 4 missed probe runs)"}, nil},
		{0, 0, nil, []string{"biased", "undercount"}},
	} {
		var html bytes.Buffer
		if err := Render(&html, Input{Title: "t", Fsyncs: recs, Summary: analysis.Report{LostEvents: tc.lost, MissedEvents: tc.missed}}); err != nil {
			t.Fatal(err)
		}
		s := html.String()
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("lost %d missed %d: page lacks %q", tc.lost, tc.missed, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(s, n) {
				t.Errorf("lost %d missed %d: page has %q", tc.lost, tc.missed, n)
			}
		}
	}
	// 200 calls at 1 ms: one hidden call over the budget cannot move p99
	// (analysis.Group.VerdictHolds); the WAL directory's fsyncs have no
	// verdict, only biased numbers (as the table says).
	many := make([]analysis.FsyncRecord, 200)
	for i := range many {
		many[i] = recs[0]
	}
	dir := slices.Clone(many[:3])
	for i := range dir {
		dir[i].FileKind = analysis.KindWALDir
	}
	for _, tc := range []struct {
		recs []analysis.FsyncRecord
		want string
	}{{many, "<span class=\"verdict-ok\">ok</span> (holds though 1 missed probe run)"}, {dir, "verdict: n/a (numbers biased: 1 missed probe run)"}} {
		var html bytes.Buffer
		if err := Render(&html, Input{Title: "t", Fsyncs: tc.recs, Summary: analysis.Report{MissedEvents: 1}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(html.String(), tc.want) {
			t.Errorf("page lacks %q", tc.want)
		}
	}
}

// TestOptionalProbeIsANote: a probe the tracer marks optional (the jbd2
// wait on a kernel without kprobes or fentry: "name: optional, ...", as
// tracer's fsync probes say it and etcdscope fsync records it) is a note
// on the page, not the orange warning a missing layer gets.
func TestOptionalProbeIsANote(t *testing.T) {
	const optional = "fentry|kprobe/jbd2_log_wait_commit: optional, nothing is wrong: the journal layer is measured by overlap with the jbd2 commit tracepoints instead of by the exact wait (fentry: EPERM; kprobe: no PMU)"
	const missing = "tp_btf/block_rq_complete: attach: permission denied"
	var b strings.Builder
	if err := Render(&b, Input{Title: "t", Summary: analysis.Report{Unavailable: []analysis.Unavailable{unavailable(optional), unavailable(missing)}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `<p class="note">Optional probe not attached: `+template.HTMLEscapeString(optional)) {
		t.Errorf("optional probe not shown as a note")
	}
	if !strings.Contains(page, `<p class="warn">Not attached: `+template.HTMLEscapeString(missing)) {
		t.Errorf("missing probe not shown as a warning")
	}
	if strings.Contains(page, `class="warn">Not attached: fentry|kprobe`) {
		t.Errorf("optional probe shown as a warning")
	}
}

// unavailable reads s as an older summary's unavailable entry.
func unavailable(s string) analysis.Unavailable {
	var u analysis.Unavailable
	if err := json.Unmarshal([]byte(strconv.Quote(s)), &u); err != nil {
		panic(err)
	}
	return u
}

// callList is recs as the page draws them (CallOf), in order.
func callList(recs []analysis.FsyncRecord) []Call {
	out := make([]Call, len(recs))
	for i := range recs {
		_, out[i] = CallOf(&recs[i])
	}
	return out
}

// TestPeerChartMarksNotMembers: a link to an address of no member (a
// capture's member list, etcdmetric.NotMemberLinks) is labelled on the
// page as the table labels it; a member's link is not.
func TestPeerChartMarksNotMembers(t *testing.T) {
	a, b, other := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:2380"), netip.MustParseAddrPort("10.9.9.9:2380")
	evs := []event.Peer{
		{Kind: event.PeerOpen, TimeNs: 1e9, Socket: 1, Direction: event.PeerActive, PID: 7, Comm: "etcd", Local: a, Remote: b, DurationNs: 100_000},
		{Kind: event.PeerOpen, TimeNs: 2e9, Socket: 2, Direction: event.PeerActive, PID: 8, Comm: "curl", Local: netip.MustParseAddrPort("10.0.0.1:40001"), Remote: other, DurationNs: 100_000},
	}
	rep := peers.Analyze(evs, peers.Options{})
	members := []etcdmetric.Member{{ID: 1, Name: "m1", PeerIPs: []netip.Addr{a.Addr()}}, {ID: 2, Name: "m2", PeerIPs: []netip.Addr{b.Addr()}}}
	c, _, _ := peerChart(&rep, nil, etcdmetric.NotMemberLinks(rep.Links, members))
	var marked, plain int
	for _, x := range c.Texts {
		switch {
		case strings.Contains(x.Text, "10.9.9.9") && strings.HasSuffix(x.Text, " (not a member)"):
			marked++
		case strings.Contains(x.Text, "10.0.0.2") && !strings.Contains(x.Text, "not a member"):
			plain++
		}
	}
	if marked != 1 || plain != 1 {
		t.Errorf("chart texts %+v: want the link to 10.9.9.9 marked and the one to member m2 not", c.Texts)
	}
	// curl's link is no etcd's: marked so, and no model bar drawn for it
	// (etcd's link has one).
	models, notEtcd := 0, 0
	for _, r := range c.Rects {
		if r.Fill == "#d62728" {
			models++
		}
	}
	for _, x := range c.Texts {
		if strings.Contains(x.Text, "curl") && strings.Contains(x.Text, " (not etcd)") {
			notEtcd++
		}
	}
	if models != 1 || notEtcd != 1 {
		t.Errorf("%d model bars, %d links marked (not etcd); want 1 and 1 (etcd's bar only, curl's link marked)", models, notEtcd)
	}
}

// TestPageStatesRecordingWindow: the page states the length recorded
// (the summary's window_ns), not the calls' first-to-last span (the
// new-user walk: a 40 s recording whose load ran 20 s said "over
// 19.969s"); the calls' span only where it is worth saying: they cover
// less of the window than spanShareSaid, or the recording (an older one)
// carries no window.
func TestPageStatesRecordingWindow(t *testing.T) {
	calls := func(spanNs uint64) []analysis.FsyncRecord {
		var recs []analysis.FsyncRecord
		for _, start := range []uint64{1e9, 1e9 + spanNs - 1e6} {
			recs = append(recs, analysis.FsyncRecord{Type: "fsync", PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
				Syscall: "fdatasync", StartNs: start, EndNs: start + 1e6, TotalNs: 1e6, Layers: analysis.Layers{OtherNs: 1e6}})
		}
		return recs
	}
	for _, tc := range []struct {
		name     string
		windowNs int64
		spanNs   uint64
		want     string
		not      string
	}{
		{"load for half the recording", 40e9, 19_969e6, "2 fsync/fdatasync calls in 40s traced (first to last call: 19.969s); ", "over 19.969s"},
		{"calls all along", 40e9, 39_500e6, "2 fsync/fdatasync calls in 40s traced; ", "first to last"},
		{"an older recording: no window", 0, 19_969e6, "2 fsync/fdatasync calls (first to last call: 19.969s); ", "traced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var html bytes.Buffer
			if err := Render(&html, Input{Title: "t", Fsyncs: calls(tc.spanNs), Summary: analysis.Report{WindowNs: tc.windowNs}}); err != nil {
				t.Fatal(err)
			}
			meta := html.String()
			if i := strings.Index(meta, `<p class="meta">`); i >= 0 {
				meta = meta[i:]
				meta = meta[:strings.Index(meta, "</p>")]
			}
			if !strings.Contains(meta, tc.want) || strings.Contains(meta, tc.not) {
				t.Errorf("page's first line %q: want %q, not %q", meta, tc.want, tc.not)
			}
		})
	}
}

// TestPageSaysPeersApart: a peers recording from another run (its events
// a minute after the fsync recording's last call) is said on the page as
// a warning with the gap; the testdata's two recordings, of one run, are
// not (the new-user walk of 2026-12-07 combined two runs unwarned).
func TestPageSaysPeersApart(t *testing.T) {
	in := readTestdata(t)
	out, _ := renderPage(t, in)
	if strings.Contains(out, "they are from different runs") {
		t.Errorf("recordings of one run said apart")
	}
	var last uint64
	for _, f := range in.Fsyncs {
		last = max(last, f.EndNs)
	}
	first := in.Peers[0].TimeNs
	for _, e := range in.Peers {
		first = min(first, e.TimeNs)
	}
	shift := last + uint64(time.Minute) - first
	for i := range in.Peers {
		in.Peers[i].TimeNs += shift
	}
	out, _ = renderPage(t, in)
	if !strings.Contains(out, "are 1m0s apart (by CLOCK_MONOTONIC") || !strings.Contains(out, "they are from different runs") {
		t.Errorf("peers recording a minute after the fsync one: no warning on the page")
	}
}
