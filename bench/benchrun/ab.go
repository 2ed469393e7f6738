package main

import (
	"fmt"
	"math"
	"slices"
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
}

// abRound is one fio job under both binaries.
type abRound struct {
	NewFirst  bool  // the -etcdscope binary attached first
	Fsyncs    int64 // fio's fdatasync calls
	Base, New []progStat
}

// abSection runs o.rounds fio jobs, each traced by both binaries.
func abSection(o options, r *results) error {
	ab := &abRun{Base: o.abBase, New: o.etcdscope}
	for round := 0; round < o.rounds; round++ {
		rd := abRound{NewFirst: round%2 == 1}
		bins := []string{o.abBase, o.etcdscope}
		if rd.NewFirst {
			bins[0], bins[1] = bins[1], bins[0]
		}
		var ts []*tracerProc
		stopAll := func() {
			for _, t := range ts {
				t.stop()
			}
		}
		for _, b := range bins {
			t, err := startTracer("etcdscope+dev", "fio", b, o.btScript)
			if err != nil {
				stopAll()
				return fmt.Errorf("ab round %d, %s: %w", round+1, b, err)
			}
			ts = append(ts, t)
		}
		before := [][]progStat{progStats(ts[0].cmd.Process.Pid), progStats(ts[1].cmd.Process.Pid)}
		fr, err := runFio(o)
		after := [][]progStat{progStats(ts[0].cmd.Process.Pid), progStats(ts[1].cmd.Process.Pid)}
		stopAll()
		if err != nil {
			return fmt.Errorf("ab round %d: %w", round+1, err)
		}
		d := [][]progStat{progDelta(before[0], after[0]), progDelta(before[1], after[1])}
		rd.Fsyncs = fr.Fsyncs
		rd.Base, rd.New = d[0], d[1]
		if rd.NewFirst {
			rd.Base, rd.New = d[1], d[0]
		}
		ab.Rounds = append(ab.Rounds, rd)
		logf("ab round %d/%d (%s first): base %.0f, new %.0f ns of BPF per fio fsync", round+1, o.rounds,
			map[bool]string{true: "new", false: "base"}[rd.NewFirst], progNs(rd.Base)/float64(max(rd.Fsyncs, 1)), progNs(rd.New)/float64(max(rd.Fsyncs, 1)))
	}
	r.AB = ab
	return nil
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

func progNs(ps []progStat) float64 {
	var n uint64
	for _, p := range ps {
		n += p.RunTimeNs
	}
	return float64(n)
}

// markdown writes the A/B section: each round's ratio, their geometric
// mean (so that the two attach orders weigh alike), and the per-program
// runs and ns per fio fsync of both binaries over all rounds.
func (ab *abRun) markdown(w func(string, ...any)) {
	w("\n## A/B: two etcdscope binaries on the same fio job\n\n")
	w("`benchrun -only ab -ab-base BASE`: %d fio jobs as in the fio section, each traced at once by BASE (%s) and NEW\n", len(ab.Rounds), ab.Base)
	w("(%s), both `fsync --comm fio --dev %s`, the attach order alternated by round (the binary attached second runs\n", ab.New, benchDisk)
	w("its programs after the other's on each tracepoint and finds warm what the first touched). BPF time from each\n")
	w("process's program fds (bpf_stats) over the job, per fio fdatasync.\n\n")
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
