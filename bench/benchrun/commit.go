package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/internal/safefile"
)

// Commit section settings: sequential puts at a fixed rate (as
// `etcdscope commit --load` drives them), one member, its data on disk.
const (
	commitPuts    = 200
	commitRate    = 50 // puts per second
	commitClient  = "127.0.0.1:23790"
	commitPeerURL = "http://127.0.0.1:23800"
)

// commitRun is one variant of one round of the commit section.
type commitRun struct {
	Puts   int
	P50Ns  int64 // client-side put latency, median of the run
	MeanNs float64
	// BPFNs, BPFRuns: the tracer's programs (kernel.bpf_stats_enabled).
	BPFNs, BPFRuns uint64
	TracerCPUSec   float64
	// EtcdCPUSec: etcd's own CPU (all its threads) during the puts, the
	// uprobe traps included: they run in etcd's threads.
	EtcdCPUSec float64
}

// commitSection times puts to a one-member etcd, and etcd's CPU during
// them, untraced, with `etcdscope commit` attached, with `etcdscope serve`
// without and with --commit-pid, and with bench/commit.bt (uprobes at the
// same functions' entries), interleaved, o.microRounds rounds.
func commitSection(o options, r *results) error {
	if _, err := os.Stat(o.etcd); err != nil {
		r.CommitWhy = fmt.Sprintf("no etcd binary at %s (make etcd)", o.etcd)
		logf("commit: %s", r.CommitWhy)
		return nil
	}
	dir, err := mkScratch("/var/tmp", "etcdscope-bench-etcd-")
	if err != nil {
		return err
	}
	defer dropScratch(dir)
	etcd := exec.Command(o.etcd, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+commitClient, "--advertise-client-urls", "http://"+commitClient,
		"--listen-peer-urls", commitPeerURL, "--initial-advertise-peer-urls", commitPeerURL,
		"--initial-cluster", "bench="+commitPeerURL, "--log-level", "error")
	// dir is benchrun's own (MkdirTemp, mode 0700): O_EXCL|O_NOFOLLOW
	// only makes sure nothing was placed there.
	etcdLog, err := os.OpenFile(filepath.Join(dir, "etcd.log"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer etcdLog.Close()
	etcd.Stderr = etcdLog
	if err := startChild(etcd); err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer func() {
		etcd.Process.Signal(os.Interrupt)
		waitChild(etcd)
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{commitClient}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for {
		if _, err = cli.Put(ctx, "/etcdscope-bench/warmup", "x"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("etcd not answering: %w (%s)", err, tail(filepath.Join(dir, "etcd.log"), 3))
	}
	script := filepath.Join(dir, "commit.bt")
	bt, err := os.ReadFile(o.commitScript)
	if err != nil {
		return err
	}
	sf, err := safefile.WriteFile(script, []byte(strings.ReplaceAll(string(bt), "ETCD_BINARY", o.etcd)), 0o600)
	if err != nil {
		return err
	}
	sf.Close()
	pid := strconv.Itoa(etcd.Process.Pid)
	r.Commit = map[string][]commitRun{}
	for round := 0; round < o.microRounds; round++ {
		for k := range commitVariants {
			v := commitVariants[(k+round)%len(commitVariants)]
			var cr commitRun
			work := func() error {
				e0, err := sampleProc(etcd.Process.Pid)
				if err != nil {
					return err
				}
				lat, err := timePuts(cli, round)
				e1, serr := sampleProc(etcd.Process.Pid)
				if err == nil {
					err = serr
				}
				cr.Puts = len(lat)
				cr.P50Ns, cr.MeanNs = int64(median(lat)), mean(lat)
				cr.EtcdCPUSec = float64(e1.cpuNs-e0.cpuNs) / 1e9
				return err
			}
			if v == "untraced" {
				err = work()
			} else {
				err = tracedPID(o, v, pid, script, &cr, work)
			}
			if err != nil {
				return fmt.Errorf("commit round %d, %s: %w", round+1, v, err)
			}
			r.Commit[v] = append(r.Commit[v], cr)
			logf("commit round %d/%d %-27s put p50 %7.0f µs, etcd CPU %5.0f µs/put, BPF %d runs", round+1, o.microRounds, v,
				float64(cr.P50Ns)/1e3, cr.EtcdCPUSec*1e6/float64(max(cr.Puts, 1)), cr.BPFRuns)
		}
	}
	return nil
}

// tracedPID runs work with tracer kind attached to etcd process pid and
// fills cr with the tracer's BPF run time and CPU.
func tracedPID(o options, kind, pid, script string, cr *commitRun, work func() error) error {
	t, err := startTracer(kind, pid, o.etcdscope, script)
	if err != nil {
		return err
	}
	p := t.cmd.Process.Pid
	s0, _ := sampleProc(p)
	werr := work()
	s1, _ := sampleProc(p)
	cr.BPFNs, cr.BPFRuns = sumRunTime(progStats(p))
	cr.TracerCPUSec = float64(s1.cpuNs-s0.cpuNs) / 1e9
	_, serr := t.stop()
	if werr != nil {
		return werr
	}
	return serr
}

// timePuts makes commitPuts sequential puts at commitRate and returns each
// one's client-side latency, ns.
func timePuts(cli *clientv3.Client, round int) ([]float64, error) {
	tick := time.NewTicker(time.Second / commitRate)
	defer tick.Stop()
	lat := make([]float64, 0, commitPuts)
	for i := 0; i < commitPuts; i++ {
		<-tick.C
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		_, err := cli.Put(ctx, fmt.Sprintf("/etcdscope-bench/%d/%04d", round, i), "v")
		cancel()
		if err != nil {
			return lat, err
		}
		lat = append(lat, float64(time.Since(t0)))
	}
	return lat, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// commitVariants are the commit section's variants: untraced (the
// pairing base), etcdscope commit (records assembled in the kernel), with
// --raw-events (every firing sent and joined in Go too: the reference),
// etcdscope serve filtered to etcd (its fsync and peers tracers), the
// same with --commit-pid (the commit tracer's uprobes, its scheduler
// programs and a second fsync tracer on etcd alone: the agent of
// `etcdscope cluster`), and bench/commit.bt.
var commitVariants = []string{"untraced", "etcdscope-commit", "etcdscope-commit+raw-events", "etcdscope-serve", "etcdscope-serve-commit", "bpftrace-commit"}

// commitDeltas pairs variant v's put p50 with the untraced run of the same
// round: added µs per put.
func (r *results) commitDeltas(v string) []float64 { return r.commitDiffs(v, "untraced", putP50) }

// commitRatios pairs variant v with variant base of the same round:
// f(v) / f(base) per round, rounds where f(base) is 0 left out.
func (r *results) commitRatios(v, base string, f func(commitRun) float64) []float64 {
	var out []float64
	b := r.Commit[base]
	for i, cr := range r.Commit[v] {
		if i < len(b) && f(b[i]) != 0 {
			out = append(out, f(cr)/f(b[i]))
		}
	}
	return out
}

// commitDiffs pairs variant v with variant base of the same round: f(v)
// - f(base) per round.
func (r *results) commitDiffs(v, base string, f func(commitRun) float64) []float64 {
	var out []float64
	b := r.Commit[base]
	for i, cr := range r.Commit[v] {
		if i < len(b) {
			out = append(out, f(cr)-f(b[i]))
		}
	}
	return out
}

// deltaCell formats paired differences: median [95% CI] (min..max).
func deltaCell(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	s := summarize(xs)
	return fmt.Sprintf("%+.0f [%+.0f, %+.0f] (%+.0f..%+.0f)", s.Median, s.Lo, s.Hi, s.Min, s.Max)
}

// etcdCPUPerPut is etcd's CPU per put of a run, µs.
func etcdCPUPerPut(cr commitRun) float64 { return cr.EtcdCPUSec * 1e6 / float64(max(cr.Puts, 1)) }

// putP50 is a run's client-side put p50, µs.
func putP50(cr commitRun) float64 { return float64(cr.P50Ns) / 1e3 }

// ratioCell formats paired ratios: median [95% CI] (min..max).
func ratioCell(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	s := summarize(xs)
	return fmt.Sprintf("%.2fx [%.2f, %.2f] (%.2f..%.2f)", s.Median, s.Lo, s.Hi, s.Min, s.Max)
}

// commitMarkdown is the commit section of docs/performance.md.
func (r *results) commitMarkdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n## etcd writes under `etcdscope commit` (uprobes), interleaved\n\n")
	if r.CommitWhy != "" {
		w("Not measured: %s.\n", r.CommitWhy)
		return b.String()
	}
	if len(r.Commit) == 0 {
		w("Not measured in this run (`-only` left it out).\n")
		return b.String()
	}
	w("%d sequential puts at %d/s to a one-member etcd (`make etcd`, data under /var/tmp) per run, %d rounds, each\n", commitPuts, commitRate, len(r.Commit["untraced"]))
	w("round runs every variant once in a rotated order: untraced; `etcdscope commit --pid` (uprobes at the entry and\n")
	w("each RET of etcd's write-path functions, each write's firings assembled in the kernel into one record, the join);\n")
	w("the same with `--raw-events` (every firing also sent to userspace and assembled there); `etcdscope serve --pid`\n")
	w("(its fsync and peers tracers on etcd) and the same with `--commit-pid` (the commit tracer's uprobes and scheduler\n")
	w("programs, and a second fsync tracer on etcd alone: each member's agent of `etcdscope cluster`); `bpftrace -p` with\n")
	w("bench/commit.bt (uprobes at the same functions' entries, counting: the floor any uprobe tool pays). Added µs per put\n")
	w("is the client-side put p50 minus the untraced run's of the same round: median, 95%% bootstrap interval, min..max.\n")
	w("BPF runs and µs per put count every program the tracer process holds: since `commit` and `serve --commit-pid` run\n")
	w("the fsync tracer and the scheduler programs beside their uprobes, mostly sched_switch on every context switch of the\n")
	w("machine; the commit program itself runs 17 times per put (tracer.TestCommitTracer's in-kernel counters).\n\n")
	w("| variant | put p50 (median of runs) | added per put (µs) | BPF runs per put | BPF µs per put | tracer CPU per put (µs) |\n|---|---|---|---|---|---|\n")
	var etcdRows strings.Builder // the second table's rows, one per variant
	for _, v := range commitVariants {
		runs := r.Commit[v]
		if len(runs) == 0 {
			continue
		}
		var p50s, runsPer, bpfPer, cpuPer, etcdCPU []float64
		for _, cr := range runs {
			p50s = append(p50s, float64(cr.P50Ns)/1e3)
			n := float64(max(cr.Puts, 1))
			runsPer = append(runsPer, float64(cr.BPFRuns)/n)
			bpfPer = append(bpfPer, float64(cr.BPFNs)/n/1e3)
			cpuPer = append(cpuPer, cr.TracerCPUSec*1e6/n)
			etcdCPU = append(etcdCPU, etcdCPUPerPut(cr))
		}
		added := "—"
		paired := "— | — | —"
		if v != "untraced" {
			added = deltaCell(r.commitDeltas(v))
			paired = fmt.Sprintf("%s | %s | %s", deltaCell(r.commitDiffs(v, "untraced", etcdCPUPerPut)),
				ratioCell(r.commitRatios(v, "untraced", etcdCPUPerPut)), ratioCell(r.commitRatios(v, "untraced", putP50)))
		}
		w("| %s | %.0f µs | %s | %.1f | %.1f | %.0f |\n", v, median(p50s), added, median(runsPer), median(bpfPer), median(cpuPer))
		fmt.Fprintf(&etcdRows, "| %s | %.0f | %s |\n", v, median(etcdCPU), paired)
	}
	w("\netcd's own CPU per put (the sum of its threads' run time over the puts, the uprobe traps included, and its\n")
	w("idle work over the run's %.0f s) and the put p50, as ratios to the untraced run of the same round, and `serve\n", float64(commitPuts)/commitRate)
	w("--commit-pid` to `serve` alone (what the flag adds): median [95%% bootstrap interval] (min..max).\n\n")
	w("| variant | etcd CPU per put (µs, median of runs) | etcd CPU added per put (µs) | etcd CPU vs untraced | put p50 vs untraced |\n|---|---|---|---|---|\n")
	b.WriteString(etcdRows.String())
	if len(r.Commit["etcdscope-serve-commit"]) > 0 && len(r.Commit["etcdscope-serve"]) > 0 {
		const v, base = "etcdscope-serve-commit", "etcdscope-serve"
		w("| serve-commit vs serve | | %s | %s | %s |\n", deltaCell(r.commitDiffs(v, base, etcdCPUPerPut)),
			ratioCell(r.commitRatios(v, base, etcdCPUPerPut)), ratioCell(r.commitRatios(v, base, putP50)))
	}
	w("\nBPF time counts only the programs; the uprobe trap itself (breakpoint, single-step) is in the added latency,\n")
	w("not in run_time_ns. A firing on the write path delays that write; firings after it (the apply, the next Ready)\n")
	w("delay the next one only when they overlap it.\n")
	return b.String()
}
