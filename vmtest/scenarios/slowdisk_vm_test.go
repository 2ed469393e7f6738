//go:build vmtest

package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// slowFlush is the flush delay dm-delay adds in the slow phase.
const slowFlush = 20 * time.Millisecond

// TestVMScenarioSlowDisk is the slow device (issue 14): etcd's data dir,
// WAL included, on ext4 on a dm-delay device over a loop device (its
// backing file on the guest's tmpfs, so the loop's own flush is free).
// The delay table holds flushes (REQ_PREFLUSH) for 20 ms and passes reads
// and writes through; it changes between phases by dmsetup
// suspend/reload/resume, with etcd running.
//
//	baseline        flush delay 0
//	slow flush      flush delay 20 ms: WAL fsync rises by >= 20 ms (each
//	                fdatasync ends in at least one flush), writes by the
//	                same Δ, reads flat
//
// Checks: etcd's own WAL fsync histogram (etcd_disk_wal_fsync_duration_seconds)
// and etcdscope fsync's WAL group agree on the mean within 25% + 2 ms over
// the same window, both count at least one fsync per put, and the p99 is
// far over etcd's 10 ms budget, and etcdscope's dm layer (the time the
// dm-delay target held the WAL fsyncs' bios: its device-mapper level)
// carries the 20 ms flush delay: its mean per WAL fsync is at least 0.9 ×
// 20 ms, and it is the WAL group's largest layer.
func TestVMScenarioSlowDisk(t *testing.T) {
	selected(t)
	testenv.RequireRoot(t)
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope")

	// Registered before Start: cleanups run last-in first-out, so etcd
	// stops before the unmount.
	dir := filepath.Join(t.TempDir(), "data")
	setFlush := slowDir(t, dir, "esslow", 0)

	c := etcdtest.Start(t, etcdtest.Options{Members: 1, DataDir: dir, ExtraArgs: etcdArgs, HealthTimeout: healthWait})
	m := c.Members[0]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	warmUp(t, cli)
	scrape := func() map[string]*dto.MetricFamily {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		fams, err := c.Scrape(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	const walFsync = "etcd_disk_wal_fsync_duration_seconds"
	rep := &Report{Scenario: fmt.Sprintf("slow device (dm-delay: flushes held %v)", slowFlush), Delay: slowFlush}
	b0 := scrape()
	base := runPhase(t, cli, "baseline", nil)
	b1 := scrape()
	baseFsync, nb := histMean(b0, b1, walFsync, nil)
	rep.Again = runPhase(t, cli, "baseline again", nil)

	setFlush(slowFlush)
	s0 := scrape()
	tr := startTool(t, bin, "fsync", "--pid", strconv.Itoa(m.PID), "--duration", "0", "--interval", "0", "--output", "json")
	slow := runPhase(t, cli, "slow flush", nil)
	out := tr.stop(t)
	s1 := scrape()
	slowFsync, ns := histMean(s0, s1, walFsync, nil)
	// The same with etcdscope commit, a phase of its own (uprobes cost the
	// guest's one vCPU): every write waits on the local disk, its WAL
	// append at least the flush dm-delay holds (issue 15).
	cr := startTool(t, bin, "commit", "--pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL,
		"--duration", "0", "--output", "json")
	tracedSlow := runPhase(t, cli, "slow flush, etcdscope commit", nil)
	cout := cr.stop(t)
	setFlush(0)

	d := slowFsync - baseFsync
	slow.Expect = map[Op]Expect{
		Write:      {Delta: d, Lo: d*7/10 - 5*time.Millisecond, Hi: d*3/2 + 15*time.Millisecond, Why: fmt.Sprintf("Δ of etcd's mean WAL fsync (%s of %d -> %s of %d): one WAL fsync per sequential put", ms(baseFsync), nb, ms(slowFsync), ns)},
		ReadSerial: flat("0: reads do not fsync"),
		ReadLinear: flat("0: reads do not fsync (one member: ReadIndex is local)"),
	}
	rep.Phases = []Phase{base, slow, tracedSlow}

	wal, err := walGroup(out)
	if err != nil {
		t.Fatalf("etcdscope fsync: %v\n%s", err, out)
	}
	mean := time.Duration(0)
	if wal.Total.Count > 0 {
		mean = time.Duration(wal.Total.Sum / wal.Total.Count)
	}
	rep.Checks = append(rep.Checks,
		Within("etcd WAL fsync mean, slow phase", slowFsync, slowFlush, 4*slowFlush),
		RatioWithin("etcdscope WAL fsync mean / etcd's", mean, slowFsync, 0.75, 1.25),
		Check{Name: "fsyncs: etcdscope, etcd, puts", Got: fmt.Sprintf("%d, %d, %d", wal.Total.Count, ns, len(slow.Lat[Write])),
			Want: "each >= puts", Pass: wal.Total.Count >= int64(len(slow.Lat[Write])) && ns >= uint64(len(slow.Lat[Write]))},
		Within("etcdscope WAL fsync p99", time.Duration(wal.Total.P99), 10*time.Millisecond, 10*time.Second),
		Check{Name: "etcdscope lost events", Got: fmt.Sprint(wal.lost), Want: "0", Pass: wal.lost == 0},
		Within("etcdscope dm layer per WAL fsync, mean", wal.layerMean(analysis.LayerDM), slowFlush*9/10, 4*slowFlush),
		Check{Name: "etcdscope WAL group's largest layer", Got: wal.largest(), Want: analysis.LayerDM, Pass: wal.largest() == analysis.LayerDM},
		Check{Name: "etcdscope layers", Got: wal.layers(), Info: true},
		Check{Name: "etcdscope levels (mean per upper fsync)", Got: wal.levels, Info: true},
		Check{Name: "etcdscope verdict", Got: wal.Verdict, Info: true})
	rep.Checks = append(rep.Checks, commitDiskChecks(t, cout, tracedSlow, slowFlush)...)
	rep.Header = []string{
		fmt.Sprintf("etcd 1 member, data dir on ext4 on dm-delay over loop (tmpfs); %d sequential puts, serializable gets, linearizable gets per phase", opsPerPhase),
		"tolerances: Δfastest in the window and p50 - baseline fastest >= its low end, against this run's baseline (docs/scenarios.md)",
	}
	finish(t, rep)
}

// walSummary is the part of `etcdscope fsync --output json`'s summary
// record the slow-device scenario reads (docs/schema.md).
type walSummary struct {
	Key struct {
		Comm     string `json:"comm"`
		FileKind string `json:"file_kind"`
	} `json:"key"`
	Total struct {
		Count int64 `json:"count"`
		Sum   int64 `json:"sum"`
		P99   int64 `json:"p99"`
	} `json:"total_ns"`
	Layers []struct {
		Name  string `json:"name"`
		Stats struct {
			Count int64 `json:"count"`
			Sum   int64 `json:"sum"`
		} `json:"stats_ns"`
		Share float64 `json:"share"`
	} `json:"layers"`
	Verdict string `json:"verdict"`
	lost    uint64
	levels  string // the summary's stacked levels, "dm dm-0/dm 21.3ms, ..."
}

// layerMean returns the mean per call of layer name (0 when absent).
func (w *walSummary) layerMean(name string) time.Duration {
	for _, l := range w.Layers {
		if l.Name == name && l.Stats.Count > 0 {
			return time.Duration(l.Stats.Sum / l.Stats.Count)
		}
	}
	return 0
}

// largest names the layer with the largest share.
func (w *walSummary) largest() string {
	best, share := "", -1.0
	for _, l := range w.Layers {
		if l.Share > share {
			best, share = l.Name, l.Share
		}
	}
	return best
}

// layers lists the layers holding at least 1% of the WAL fsync time.
func (w *walSummary) layers() string {
	var parts []string
	for _, l := range w.Layers {
		if l.Share >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Name, 100*l.Share))
		}
	}
	return strings.Join(parts, ", ")
}

// walGroup finds etcd's WAL group in the summary record.
func walGroup(out []byte) (*walSummary, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var rec struct {
			Type   string       `json:"type"`
			Lost   uint64       `json:"lost_events"`
			Groups []walSummary `json:"groups"`
			Levels []struct {
				Level  string `json:"level"`
				Device string `json:"device"`
				FS     string `json:"fs"`
				Total  struct {
					Count int64 `json:"count"`
					Sum   int64 `json:"sum"`
				} `json:"total_ns"`
			} `json:"levels"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Type != "summary" {
			continue
		}
		for i := range rec.Groups {
			if rec.Groups[i].Key.FileKind == "wal" {
				g := rec.Groups[i]
				g.lost = rec.Lost
				var lv []string
				for _, l := range rec.Levels {
					if l.Total.Count > 0 {
						lv = append(lv, fmt.Sprintf("%s %s/%s %s", l.Level, l.Device, l.FS, ms(time.Duration(l.Total.Sum/l.Total.Count))))
					}
				}
				g.levels = strings.Join(lv, ", ")
				return &g, nil
			}
		}
		return nil, fmt.Errorf("summary has no wal group")
	}
	return nil, fmt.Errorf("no summary record")
}

// commitDiskChecks judges `etcdscope commit` on the one member whose WAL
// flushes dm-delay holds: every put traced, none lost; the local WAL is
// the only vote; WAL append p50 at least the held flush; the verdict says
// the writes wait on the local disk.
func commitDiskChecks(t *testing.T, out []byte, ph Phase, flush time.Duration) []Check {
	t.Helper()
	recs, sum, err := commit.ReadRecords(bytes.NewReader(out))
	if err != nil || sum == nil {
		t.Errorf("etcdscope commit printed no summary: %v\n%s", err, out)
		return nil
	}
	puts := len(ph.Lat[Write])
	wal := time.Duration(sum.PartsNs[commit.PartWALAppend].P50)
	verdict := ""
	if len(sum.Verdicts) > 0 {
		verdict = sum.Verdicts[0]
	}
	t.Logf("etcdscope commit: %d writes, total p50 %v, parts p50 %v, deciders %v, verdicts %v", len(recs), time.Duration(sum.TotalNs.P50), partsP50(sum), sum.Deciders, sum.Verdicts)
	return append(modelChecks(sum, "local_wal", "the local WAL"), []Check{
		tracedCheck("etcdscope commit", len(recs), puts, sum),
		{Name: "etcdscope commit: WAL append p50 (the held flush)", Got: ms(wal), Want: ">= " + ms(flush*9/10), Pass: wal >= flush*9/10},
		{Name: "etcdscope commit: verdict", Got: verdict, Want: "writes wait on the local disk", Pass: strings.HasPrefix(verdict, "writes wait on the local disk")},
	}...)
}
