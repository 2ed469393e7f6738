package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// abRun is `-only ab`: two etcdscope binaries (-ab-base, and -etcdscope)
// tracing the same fio job at once, `fsync --comm fio --dev DISK`, so both
// see the same requests under the same load. The fio table's ratio to
// bpftrace cannot resolve a 10 % change on the shared machine; this pairs
// the two builds within each job. Attach order alternates by round: the
// binary attached second ran its programs after the other's on every
// tracepoint and paid 14-28 % less for the same programs (bench/findings.md).
type abRun struct {
	Base, New string // the binaries' paths
	Rounds    []abRound
	// GenRate, if set, is -ab-gen-rate: the rounds were fsyncgen at this
	// rate on /dev/shm, both binaries `fsync --output json` (no block
	// I/O: the userspace goal's load), not fio jobs.
	GenRate float64 `json:",omitempty"`
	// NewFlags are -ab-new-flags: fsync flags NEW alone was given.
	NewFlags string `json:",omitempty"`
}

// abGenComm is fsyncgen's name under -ab-gen-rate, so that other fsyncgen
// runs on a shared machine are not traced (15 bytes: a whole comm).
const abGenComm = "etcdscope-abgen"

// abRound is one fio job under both binaries.
type abRound struct {
	NewFirst  bool  // the -etcdscope binary attached first
	Fsyncs    int64 // fio's fdatasync calls
	Base, New []progStat
	// BaseCPUNs, NewCPUNs: each binary's own CPU (all its threads: the
	// reader, its JSON lines) over the job; 0 in results saved before.
	BaseCPUNs, NewCPUNs int64
	Seconds             float64 // the job's wall time
}

// abSection runs o.rounds fio jobs, each traced by both binaries.
func abSection(o options, r *results) error {
	ab := &abRun{Base: o.abBase, New: o.etcdscope, GenRate: o.abGenRate, NewFlags: o.abNewFlags}
	kind, comm := "etcdscope+dev", "fio"
	work := func() (int64, error) {
		fr, err := runFio(o)
		return fr.Fsyncs, err
	}
	if o.abGenRate > 0 {
		dir, err := mkScratch("/dev/shm", "etcdscope-bench-abgen-")
		if err != nil {
			return err
		}
		defer dropScratch(dir)
		gen := filepath.Join(dir, abGenComm)
		if err := copyFile(o.fsyncgen, gen); err != nil {
			return err
		}
		og := o
		og.fsyncgen = gen
		kind, comm = "etcdscope", abGenComm
		work = func() (int64, error) {
			g, err := runGen(og, "-threads", "2", "-rate", fmt.Sprint(o.abGenRate), "-duration", fmt.Sprintf("%gs", o.sweepSeconds))
			return int64(g.Fsyncs), err
		}
	}
	for round := 0; round < o.rounds; round++ {
		rd := abRound{NewFirst: round%2 == 1}
		bins := []string{o.abBase, o.etcdscope}
		kinds := []string{kind, kind}
		if o.abNewFlags != "" {
			kinds[1] += "+" + o.abNewFlags
		}
		if rd.NewFirst {
			bins[0], bins[1] = bins[1], bins[0]
			kinds[0], kinds[1] = kinds[1], kinds[0]
		}
		var ts []*tracerProc
		stopAll := func() {
			for _, t := range ts {
				t.stop()
			}
		}
		for i, b := range bins {
			t, err := startTracer(kinds[i], comm, b, o.btScript)
			if err != nil {
				stopAll()
				return fmt.Errorf("ab round %d, %s: %w", round+1, b, err)
			}
			ts = append(ts, t)
		}
		before := [][]progStat{progStats(ts[0].cmd.Process.Pid), progStats(ts[1].cmd.Process.Pid)}
		c0, c1 := cpuOf(ts[0]), cpuOf(ts[1])
		began := time.Now()
		fsyncs, err := work()
		rd.Seconds = time.Since(began).Seconds()
		after := [][]progStat{progStats(ts[0].cmd.Process.Pid), progStats(ts[1].cmd.Process.Pid)}
		time.Sleep(200 * time.Millisecond) // both readers drain the job's last records
		cpu := []int64{cpuOf(ts[0]) - c0, cpuOf(ts[1]) - c1}
		stopAll()
		if err != nil {
			return fmt.Errorf("ab round %d: %w", round+1, err)
		}
		d := [][]progStat{progDelta(before[0], after[0]), progDelta(before[1], after[1])}
		rd.Fsyncs = fsyncs
		rd.Base, rd.New = d[0], d[1]
		rd.BaseCPUNs, rd.NewCPUNs = cpu[0], cpu[1]
		if rd.NewFirst {
			rd.Base, rd.New = d[1], d[0]
			rd.BaseCPUNs, rd.NewCPUNs = cpu[1], cpu[0]
		}
		ab.Rounds = append(ab.Rounds, rd)
		logf("ab round %d/%d (%s first): base %.0f, new %.0f ns of BPF per fsync; own CPU base %.0f, new %.0f ns per fsync", round+1, o.rounds,
			map[bool]string{true: "new", false: "base"}[rd.NewFirst], progNs(rd.Base)/float64(max(rd.Fsyncs, 1)), progNs(rd.New)/float64(max(rd.Fsyncs, 1)),
			float64(rd.BaseCPUNs)/float64(max(rd.Fsyncs, 1)), float64(rd.NewCPUNs)/float64(max(rd.Fsyncs, 1)))
	}
	r.AB = ab
	return nil
}

// cpuOf is t's process's CPU time so far (ns; 0 if it cannot be read).
func cpuOf(t *tracerProc) int64 {
	s, err := sampleProc(t.cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return s.cpuNs
}

// progDelta is each program's run time and count in after less before
// (by program id; programs without a before sample count from zero).
func progDelta(before, after []progStat) []progStat {
	out := make([]progStat, 0, len(after))
	for _, a := range after {
		for _, b := range before {
			if b.ID == a.ID {
				a.RunTimeNs -= b.RunTimeNs
				a.RunCnt -= b.RunCnt
				a.RecursionMisses -= b.RecursionMisses
				break
			}
		}
		out = append(out, a)
	}
	return out
}

// cpuMarkdown writes each binary's own CPU per round (the userspace cost:
// the reader and its JSON lines), per fio fsync and as a share of a core
// over the job, and the paired NEW / BASE ratio.
func (ab *abRun) cpuMarkdown(w func(string, ...any)) {
	var ratios []float64
	rows := 0
	for _, rd := range ab.Rounds {
		if rd.BaseCPUNs > 0 && rd.NewCPUNs > 0 {
			rows++
		}
	}
	if rows == 0 {
		return
	}
	w("\nEach binary's own CPU over the job (all its threads, /proc/PID/task/*/schedstat; `--output json`, a line per call):\n\n")
	w("| round | fsyncs/s | BASE µs per fsync | BASE %% of a core | NEW µs per fsync | NEW %% of a core | NEW / BASE |\n|---|---|---|---|---|---|---|\n")
	for i, rd := range ab.Rounds {
		if rd.BaseCPUNs <= 0 || rd.NewCPUNs <= 0 || rd.Seconds <= 0 {
			continue
		}
		f := float64(max(rd.Fsyncs, 1))
		r := float64(rd.NewCPUNs) / float64(rd.BaseCPUNs)
		ratios = append(ratios, r)
		w("| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", i+1, f/rd.Seconds, float64(rd.BaseCPUNs)/f/1e3,
			100*float64(rd.BaseCPUNs)/1e9/rd.Seconds, float64(rd.NewCPUNs)/f/1e3, 100*float64(rd.NewCPUNs)/1e9/rd.Seconds, r)
	}
	sp := summarize(ratios)
	w("\nNEW / BASE own CPU, median of the rounds' ratios: **%.2f** [%.2f, %.2f] (95%% bootstrap interval).\n", sp.Median, sp.Lo, sp.Hi)
}

func progNs(ps []progStat) float64 {
	var n uint64
	for _, p := range ps {
		n += p.RunTimeNs
	}
	return float64(n)
}

// pairRatios returns the geometric mean of each pair of consecutive round
// ratios (rounds 1-2, 3-4, …; an odd last round is left out). The attach
// order alternates by round and moves a round's ratio by 15-30 % either
// way (bench/findings.md 14, 23), so the rounds' ratios are two clusters
// and their median's interval spans both; a pair holds one round of each
// order, and the pairs' spread is the noise left.
func pairRatios(ratios []float64) []float64 {
	var ps []float64
	for i := 0; i+1 < len(ratios); i += 2 {
		if ratios[i] > 0 && ratios[i+1] > 0 {
			ps = append(ps, math.Sqrt(ratios[i]*ratios[i+1]))
		}
	}
	return ps
}

// markdown writes the A/B section: each round's ratio, their geometric
// mean (so that the two attach orders weigh alike), and the per-program
// runs and ns per fio fsync of both binaries over all rounds.
func (ab *abRun) markdown(w func(string, ...any)) {
	if ab.GenRate > 0 {
		w("\n## A/B: two etcdscope binaries on the same fsyncgen run\n\n")
		w("`benchrun -only ab -ab-base BASE -ab-gen-rate %.0f`: %d runs of fsyncgen (2 threads, %.0f fdatasync/s on /dev/shm), each traced at once by BASE (%s) and NEW\n", ab.GenRate, len(ab.Rounds), ab.GenRate, ab.Base)
		w("(%s), both `fsync --comm %s --output json` (a line per call, to a file on tmpfs), the attach order alternated by round (the binary attached second runs\n", ab.New, abGenComm)
	} else {
		w("\n## A/B: two etcdscope binaries on the same fio job\n\n")
		w("`benchrun -only ab -ab-base BASE`: %d fio jobs as in the fio section, each traced at once by BASE (%s) and NEW\n", len(ab.Rounds), ab.Base)
		w("(%s), both `fsync --comm fio --dev %s`, the attach order alternated by round (the binary attached second runs\n", ab.New, benchDisk)
	}
	w("its programs after the other's on each tracepoint and finds warm what the first touched). BPF time from each\n")
	if ab.NewFlags != "" {
		w("NEW alone also had `--%s`. ", strings.ReplaceAll(ab.NewFlags, "+", " --"))
	}
	w("process's program fds (bpf_stats) over the job, per traced fdatasync.\n\n")
	w("| round | attached first | fsyncs | BASE ns per fsync | NEW ns per fsync | NEW / BASE |\n|---|---|---|---|---|---|\n")
	var logs []float64
	var fs int64
	for i, rd := range ab.Rounds {
		b, n := progNs(rd.Base)/float64(max(rd.Fsyncs, 1)), progNs(rd.New)/float64(max(rd.Fsyncs, 1))
		first := "BASE"
		if rd.NewFirst {
			first = "NEW"
		}
		w("| %d | %s | %d | %.0f | %.0f | %.2f |\n", i+1, first, rd.Fsyncs, b, n, n/b)
		if b > 0 && n > 0 {
			logs = append(logs, math.Log(n/b))
		}
		fs += rd.Fsyncs
	}
	var sum float64
	for _, l := range logs {
		sum += l
	}
	if len(logs) > 0 {
		w("\nNEW / BASE, geometric mean over the rounds: **%.2f**.\n", math.Exp(sum/float64(len(logs))))
	}
	var ratios []float64
	for _, rd := range ab.Rounds {
		ratios = append(ratios, progNs(rd.New)/max(progNs(rd.Base), 1))
	}
	if sp := summarize(ratios); sp.N > 0 {
		w("NEW / BASE BPF time per fsync, median of the rounds' ratios: %.2f [%.2f, %.2f] (95%% bootstrap interval).\n", sp.Median, sp.Lo, sp.Hi)
	}
	if sp := summarize(pairRatios(ratios)); sp.N > 0 {
		w("NEW / BASE per pair of rounds (rounds 1-2, 3-4, …: one of each attach order, their geometric mean), median of %d pairs: **%.3f** [%.3f, %.3f] (95%% bootstrap interval; pairs %.3f..%.3f).\n", sp.N, sp.Median, sp.Lo, sp.Hi, sp.Min, sp.Max)
	}
	ab.cpuMarkdown(w)
	w("\n| program | BASE runs per fsync | BASE ns per run | BASE ns per fsync | NEW runs per fsync | NEW ns per run | NEW ns per fsync |\n|---|---|---|---|---|---|---|\n")
	type acc struct{ ns, cnt [2]uint64 }
	per := map[string]*acc{}
	var names []string
	for _, rd := range ab.Rounds {
		for k, ps := range [][]progStat{rd.Base, rd.New} {
			for _, p := range ps {
				a := per[p.Name]
				if a == nil {
					a = &acc{}
					per[p.Name] = a
					names = append(names, p.Name)
				}
				a.ns[k] += p.RunTimeNs
				a.cnt[k] += p.RunCnt
			}
		}
	}
	slices.Sort(names)
	var tot acc
	cell := func(ns, cnt uint64) string {
		if cnt == 0 {
			return "0 | — | 0"
		}
		return fmt.Sprintf("%.2f | %.0f | %.0f", float64(cnt)/float64(max(fs, 1)), float64(ns)/float64(cnt), float64(ns)/float64(max(fs, 1)))
	}
	for _, n := range names {
		a := per[n]
		if a.cnt[0] == 0 && a.cnt[1] == 0 {
			continue
		}
		for k := range 2 {
			tot.ns[k] += a.ns[k]
			tot.cnt[k] += a.cnt[k]
		}
		w("| %s | %s | %s |\n", n, cell(a.ns[0], a.cnt[0]), cell(a.ns[1], a.cnt[1]))
	}
	w("| **all** | %s | %s |\n", cell(tot.ns[0], tot.cnt[0]), cell(tot.ns[1], tot.cnt[1]))
}

// copyFile copies the executable src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
