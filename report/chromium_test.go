package report

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// measureScript is appended to a copy of the page (the page itself has no
// script): it reads the geometry Chromium laid out for every chart's
// rects and texts and writes it as JSON into the DOM, which --dump-dom
// prints.
const measureScript = `<script>
const charts = [];
for (const svg of document.querySelectorAll("svg")) {
  const r0 = svg.getBoundingClientRect();
  const c = {label: svg.getAttribute("aria-label"), width: r0.width, rects: [], texts: []};
  for (const r of svg.querySelectorAll("rect")) {
    const b = r.getBoundingClientRect();
    c.rects.push({x: b.x - r0.x, y: b.y - r0.y, w: b.width, h: b.height, fill: r.getAttribute("fill")});
  }
  for (const t of svg.querySelectorAll("text")) {
    const b = t.getBoundingClientRect();
    c.texts.push({text: t.textContent, w: b.width, x: b.x - r0.x + b.width / 2});
  }
  charts.push(c);
}
const ov = document.getElementById("overview");
const firstSVG = document.querySelector("svg");
const out = {
  charts: charts,
  overviewY: ov ? ov.getBoundingClientRect().y + window.scrollY : -1,
  overviewRows: Array.from(document.querySelectorAll("table.overview tr td:first-child")).map(td => td.textContent),
  firstChartY: firstSVG ? firstSVG.getBoundingClientRect().y + window.scrollY : -1,
  height: document.documentElement.scrollHeight,
};
const pre = document.createElement("pre");
pre.id = "geometry";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>`

// renderedPage is what measureScript reports: the charts' geometry, where
// the overview sits (its heading's y and its rows' group titles, in
// order), where the first chart starts, and the page's full height (px).
type renderedPage struct {
	Charts       []renderedChart `json:"charts"`
	OverviewY    float64         `json:"overviewY"`
	OverviewRows []string        `json:"overviewRows"`
	FirstChartY  float64         `json:"firstChartY"`
	Height       float64         `json:"height"`
}

type renderedChart struct {
	Label string  `json:"label"`
	Width float64 `json:"width"`
	Rects []struct {
		X, Y, W, H float64
		Fill       string `json:"fill"`
	} `json:"rects"`
	Texts []struct {
		Text string  `json:"text"`
		W    float64 `json:"w"`
		X    float64 `json:"x"` // the centre of the laid-out text, px from the chart's left
	} `json:"texts"`
}

// chromium renders page in headless Chromium, saves a full-page
// screenshot to shot, and returns what it laid out.
func chromium(t *testing.T, page []byte, shot string) renderedPage {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		bin = testenv.LookPath(t, "chromium", "chromium") // skips, or fails in CI
	}
	dir := t.TempDir()
	measured := filepath.Join(dir, "measured.html")
	plain := filepath.Join(dir, "page.html")
	if err := os.WriteFile(plain, page, 0o644); err != nil {
		t.Fatal(err)
	}
	withScript := bytes.Replace(page, []byte("</body>"), []byte(measureScript+"</body>"), 1)
	if err := os.WriteFile(measured, withScript, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
			"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile")}
		cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	dom := run("--dump-dom", "file://"+measured)
	m := regexp.MustCompile(`(?s)<pre id="geometry">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no geometry in Chromium's DOM dump (%d bytes)", len(dom))
	}
	var rp renderedPage
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &rp); err != nil {
		t.Fatalf("geometry: %v", err)
	}
	// The screenshot is of the page as shipped (no script), as tall as
	// Chromium laid the page out at 900 px wide (measured before the
	// geometry's <pre> was added).
	run("--window-size=900,"+strconv.Itoa(int(math.Ceil(rp.Height))), "--screenshot="+shot, "file://"+plain)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot kept for review: %s (900x%.0f)", shot, rp.Height)
	return rp
}

// screenshotPath is where a test keeps its screenshot: the repository's
// bin/ (ignored by git), which outlives the test for a reviewer.
func screenshotPath(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(t), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// bars groups a chart's layer-coloured rects by row: one slice per bar.
func bars(c renderedChart) [][]float64 {
	layer := map[string]bool{}
	for _, col := range LayerColors {
		layer[col] = true
	}
	var out [][]float64
	lastY := -1.0
	for _, r := range c.Rects {
		if !layer[r.Fill] {
			continue
		}
		if r.Y != lastY {
			out = append(out, nil)
			lastY = r.Y
		}
		out[len(out)-1] = append(out[len(out)-1], r.W)
	}
	return out
}

// TestChromiumRendersPage renders the recorded etcd run (with its peers
// recording) and a real recording on a loop device over ext4 in headless
// Chromium and checks what it laid out: every level bar of every group
// fills the same 500 px (normalised), with its segments' widths in the
// proportions of the layer means; WAL groups come first in the overview and
// the sections; the heatmaps carry their colour legend; the stacked page
// draws one bar per level (upper loop0, backing vda: the recording's
// version 1 summary said L1 and L2) at full width; and text does
// not spill out of the chart. Screenshots go to bin/report-*.png.
func TestChromiumRendersPage(t *testing.T) {
	for _, c := range []struct {
		name     string
		in       func(t *testing.T) Input
		levels   bool
		shotName string
	}{
		{"etcd", readTestdata, false, "report-etcd.png"},
		// With the summary's mono_to_wall_ns (recordings made before it
		// existed have none): the heatmaps' time axis in UTC, the first
		// call at 2023-11-14 22:13:20.000.
		{"stacked", func(t *testing.T) Input {
			in := readStacked(t)
			t0 := in.Fsyncs[0].StartNs
			for _, r := range in.Fsyncs {
				t0 = min(t0, r.StartNs)
			}
			in.Summary.MonoToWallNs = wallT0.UnixNano() - int64(t0)
			return in
		}, true, "report-stacked.png"},
		// The recorded run with a synthetic merge (guest and host on
		// device-mapper: their dm parts drawn) and etcd metric record: the
		// layout of the merge chart and of the five-bar peers chart.
		{"merge-and-metric", func(t *testing.T) Input {
			in := readTestdata(t)
			in.Merged = mergedFsyncs(20)
			for i := range in.Merged {
				s := &in.Merged[i].Split
				s.GuestDMNs, s.GuestOtherNs = s.GuestOtherNs/2, s.GuestOtherNs-s.GuestOtherNs/2
				s.HostDMNs, s.HostDeviceFlushNs = s.HostDeviceFlushNs/5, s.HostDeviceFlushNs-s.HostDeviceFlushNs/5
			}
			for _, l := range peers.Analyze(in.Peers, peers.Options{}).Links {
				if l.Link.Direction != event.PeerActive {
					continue // a metric is the scraped member's: on its active links
				}
				in.PeerMetric = append(in.PeerMetric, etcdmetric.PeerComparison{Peer: l.Link.To.Unmap(), FromPID: l.Link.FromPID,
					Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "a"}, Observations: 4, Mean: 0.002}})
			}
			return in
		}, false, "report-merge-metric.png"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in(t)
			var page bytes.Buffer
			if err := Render(&page, in); err != nil {
				t.Fatal(err)
			}
			rp := chromium(t, page.Bytes(), screenshotPath(t, c.shotName))
			charts := rp.Charts
			rep := analysis.BuildReport(in.Fsyncs, 0, 0, nil)
			t0, t1 := in.Fsyncs[0].StartNs, in.Fsyncs[0].EndNs // the page's span, which the heatmaps' x axis spans
			for _, r := range in.Fsyncs {
				t0, t1 = min(t0, r.StartNs), max(t1, r.EndNs)
			}
			// The overview is on the first screen, above every chart, one
			// row per group, WAL groups first.
			if rp.OverviewY < 0 || rp.OverviewY > 900 || rp.OverviewY > rp.FirstChartY {
				t.Errorf("overview heading at y=%.0f, first chart at y=%.0f: want the overview on the first screen, above the charts", rp.OverviewY, rp.FirstChartY)
			}
			if len(rp.OverviewRows) != len(rep.Groups) {
				t.Errorf("overview: %d rows for %d groups", len(rp.OverviewRows), len(rep.Groups))
			}
			nonWAL := false
			for _, row := range rp.OverviewRows {
				isWAL := strings.HasSuffix(strings.TrimSpace(row), "· "+analysis.KindWAL+" files")
				if isWAL && nonWAL {
					t.Errorf("overview row %q after a non-WAL row: %q", row, rp.OverviewRows)
				}
				nonWAL = nonWAL || !isWAL
			}
			var barCharts, heatmaps, levelCharts, mergeCharts, measuredBars int
			for _, ch := range charts {
				if ch.Width != chartWidth {
					t.Errorf("chart %q laid out %.1f px wide, want %d", ch.Label, ch.Width, chartWidth)
				}
				for _, tx := range ch.Texts {
					if tx.W > chartWidth {
						t.Errorf("chart %q: text %q is %.0f px wide", ch.Label, tx.Text, tx.W)
					}
				}
				switch {
				case strings.HasPrefix(ch.Label, "share of each kernel layer in the mean call"):
					barCharts++
					bs := bars(ch)
					if len(bs) == 0 {
						t.Errorf("bar chart %d: no bars drawn", barCharts)
					}
					for i, b := range bs {
						sum := 0.0
						for _, w := range b {
							sum += w
						}
						if sum < barAreaW-0.5 || sum > barAreaW+0.5 {
							t.Errorf("bar chart %d, bar %d: segments %.2f px in all, want %d (normalised)", barCharts, i, sum, barAreaW)
						}
					}
				case strings.HasPrefix(ch.Label, "guest, virtualization and host"):
					mergeCharts++
					bs := map[float64]float64{}
					for _, r := range ch.Rects {
						bs[r.Y] += r.W
					}
					for y, w := range bs {
						if w < barAreaW-0.5 || w > barAreaW+0.5 {
							t.Errorf("merge bar at y=%.0f: %.2f px, want %d", y, w, barAreaW)
						}
					}
					if len(bs) != 4 {
						t.Errorf("merge chart: %d bars laid out, want 4", len(bs))
					}
					// Each bar: guest other, guest dm, virtualization,
					// host dm, host device_flush (10/10/30/10/40%).
					segs := map[float64]int{}
					for _, r := range ch.Rects {
						segs[r.Y]++
					}
					for y, n := range segs {
						if n != 5 {
							t.Errorf("merge bar at y=%.0f: %d segments, want 5 (with guest and host dm)", y, n)
						}
					}
				case ch.Label == "per-peer RTT against etcd's peer RTT metric":
					for _, r := range ch.Rects {
						if r.Fill == peerSeries[len(peerSeries)-1].Color && r.W > 0 {
							measuredBars++
						}
					}
				case strings.HasPrefix(ch.Label, "heatmap"):
					heatmaps++
					legend, axis := false, ""
					var ticks []string
					var tickXs []float64
					for _, tx := range ch.Texts {
						legend = legend || tx.Text == "calls per cell:"
						if strings.HasPrefix(tx.Text, "wall-clock time") || strings.HasPrefix(tx.Text, "time since") {
							axis = tx.Text
						}
						if tickLabel.MatchString(tx.Text) {
							ticks, tickXs = append(ticks, tx.Text), append(tickXs, tx.X)
						}
					}
					if !legend {
						t.Errorf("heatmap %d has no colour legend", heatmaps)
					}
					// The wall-clock axis when the summary has the clock
					// offset, seconds since the first call otherwise; the
					// ticks at round instants of it, each laid out where
					// its label's time falls on the page's span.
					wall := in.Summary.MonoToWallNs != 0
					if wall && axis != "wall-clock time, UTC ("+wallT0.Format("2006-01-02")+")" || !wall && !strings.Contains(axis, "no wall clock") {
						t.Errorf("heatmap %d: time axis %q (mono_to_wall_ns %d)", heatmaps, axis, in.Summary.MonoToWallNs)
					}
					origin := time.Duration(0)
					if wall {
						origin = time.Duration(wallT0.UnixNano())
					}
					checkTicks(t, ticks, tickXs, heatLeft, origin, float64(t1-t0)/float64(chartWidth-heatLeft-10), wall)
					if heatmaps == 1 {
						t.Logf("heatmap time ticks %q at x %.1f px", ticks, tickXs)
					}
				case strings.HasPrefix(ch.Label, "share of each kernel layer at each stacked level"):
					levelCharts++
					bs := bars(ch)
					if len(bs) != len(rep.Levels) {
						t.Errorf("levels chart: %d bars drawn, the report has %d levels", len(bs), len(rep.Levels))
					}
					for i, b := range bs {
						sum := 0.0
						for _, w := range b {
							sum += w
						}
						if sum < barAreaW-0.5 || sum > barAreaW+0.5 || len(b) < 2 {
							t.Errorf("level bar %d: %d segments, %.2f px, want >= 2 filling %d", i, len(b), sum, barAreaW)
						}
						// Segment widths in the level's layer proportions.
						row := rep.Levels[i]
						j := 0
						for _, l := range row.Layers {
							if l.Stats.Sum == 0 {
								continue
							}
							want := float64(l.Stats.Sum) / float64(row.Total.Sum) * barAreaW
							if j < len(b) && (b[j] < want-0.5 || b[j] > want+0.5) {
								t.Errorf("level %s %s, %s: %.2f px, want %.2f", row.Level, row.Device, l.Name, b[j], want)
							}
							j++
						}
					}
					var labels []string
					for _, tx := range ch.Texts {
						if strings.HasPrefix(tx.Text, analysis.LevelUpper+" ") || strings.HasPrefix(tx.Text, analysis.LevelBacking+" ") {
							labels = append(labels, tx.Text)
						}
					}
					t.Logf("levels drawn: %v", labels)
				}
			}
			if barCharts != len(rep.Groups) || heatmaps != len(rep.Groups) {
				t.Errorf("%d bar charts and %d heatmaps laid out for %d groups", barCharts, heatmaps, len(rep.Groups))
			}
			if (len(in.Merged) > 0) != (mergeCharts == 1) || (len(in.PeerMetric) > 0) != (measuredBars > 0) {
				t.Errorf("merge charts %d (merge given: %v), measured-metric bars %d (metric given: %v)", mergeCharts, len(in.Merged) > 0, measuredBars, len(in.PeerMetric) > 0)
			}
			if c.levels != (levelCharts == 1) {
				t.Errorf("%d levels charts, want levels drawn: %v", levelCharts, c.levels)
			}
			// WAL first: the first section is a WAL group whenever the run has one.
			first := regexp.MustCompile(`<section class="group" id="group-1">\s*<h3>[^<]*· (\S+) files</h3>`).FindSubmatch(page.Bytes())
			hasWAL := false
			for _, g := range rep.Groups {
				hasWAL = hasWAL || g.Key.FileKind == analysis.KindWAL
			}
			if first == nil || hasWAL && string(first[1]) != analysis.KindWAL {
				t.Errorf("first group section %q, want a WAL group first", first)
			}
			t.Logf("%d charts laid out: %d bar charts, %d heatmaps, %d levels charts, %d merge charts, %d bars of etcd's measured metric", len(charts), barCharts, heatmaps, levelCharts, mergeCharts, measuredBars)
		})
	}
}

// tickLabel matches a heatmap time-axis tick: UTC "15:04:05[.000]"
// (with "01-02 " over midnight), or "0", "+1.5 s", "+10 min", "+6 h".
var tickLabel = regexp.MustCompile(`^((\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?|0|\+[\d.]+ (s|min|h))$`)

// wallT0 is the wall-clock time the stacked case's first call is given.
var wallT0 = time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)

func readStacked(t *testing.T) Input {
	t.Helper()
	return readRecording(t, "testdata/stacked-fsync.jsonl")
}
