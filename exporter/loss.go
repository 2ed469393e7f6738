package exporter

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/render"
)

// LossLogEvery is how often serve writes one line per tracer that lost
// events or missed probe runs since the previous line: the loss of that
// interval, and the flag that fixes it.
const LossLogEvery = time.Minute

// logLoss writes, every interval until ctx ends, one line for each named
// source that lost events or missed probe runs in that interval, e.g.
// "etcdscope serve: fsync tracer lost 2210 events and missed 0 probe runs
// in the last 1m0s: raise --ring-size (now 2097152 bytes)", or that its
// loss is unknown when the count cannot be read. An interval that only
// missed runs gets missedLine's line instead. Nothing is written for an
// interval without loss.
func logLoss(ctx context.Context, w io.Writer, every time.Duration, ringBytes uint32, names []string, srcs []Source) {
	deltas := make([]analysis.LossDelta, len(srcs))
	misses := make([]analysis.MissDelta, len(srcs))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, s := range srcs {
			total, err := s.Lost()
			if err != nil {
				// Unknown is not 0: say so. The next readable total's
				// delta then covers the unreadable intervals too.
				fmt.Fprintf(w, "etcdscope serve: %s tracer's lost events unknown in the last %v: %v\n", names[i], every, err)
				continue
			}
			lost, missed := deltas[i].Since(total, s.Missed())
			progs := misses[i].Since(s.ProgramStats())
			if lost == 0 && missed == 0 {
				continue
			}
			if lost == 0 {
				fmt.Fprintln(w, missedLine(names[i], missed, every, progs))
				continue
			}
			fix := "raise --ring-size"
			if ringBytes != 0 {
				fix = fmt.Sprintf("raise --ring-size (now %d bytes)", ringBytes)
			}
			fmt.Fprintf(w, "etcdscope serve: %s tracer lost %d events and missed %d probe runs in the last %v: %s\n",
				names[i], lost, missed, every, fix)
		}
	}
}

// missedRunsDoc is where the loss line of missed runs sends the reader:
// both kinds of skip, what each program's skip leaves out, and the test
// host where they were measured.
const missedRunsDoc = "docs/metrics.md#missed-probe-runs"

// missedLine words an interval whose only loss is runs the kernel skipped
// (lost events 0): the number and the cause first, the program with the
// most of them (and how many others had some), what those runs can leave
// short, and the docs for the rest, e.g. "etcdscope serve: 20 fsync probe
// runs skipped in 1m0s (block_rq_complete): the kernel ran no BPF program
// for them; block layer times of calls may be short;
// docs/metrics.md#missed-probe-runs". No ring size brings them back, so no
// flag is named.
func missedLine(tracer string, missed uint64, every time.Duration, progs []analysis.MissedRuns) string {
	return fmt.Sprintf("etcdscope serve: %d %s probe runs skipped in %v%s: %s; %s; %s",
		missed, tracer, every, render.MissedWhich(progs), missedCause(progs), missedEffect(tracer, progs), missedRunsDoc)
}

// missedCause says why the kernel skipped the runs: a program already
// running on that CPU (recursion misses), or none run at all (completions
// no program saw: docs/metrics.md#missed-probe-runs), or how many of each
// (not run, nested: the two kinds of the docs).
func missedCause(progs []analysis.MissedRuns) string {
	var runs, unseen uint64
	for _, p := range progs {
		runs, unseen = runs+p.Runs, unseen+p.Unseen
	}
	switch {
	case runs == 0: // no program's share readable
		return "the kernel skipped them"
	case unseen == 0:
		return "another BPF program ran on that CPU"
	case unseen == runs:
		return "the kernel ran no BPF program for them"
	}
	return fmt.Sprintf("%d not run, %d nested", unseen, runs-unseen)
}

// missedEffect says what the skipped runs of a tracer's programs can
// leave short (docs/metrics.md#missed-probe-runs has the table).
func missedEffect(tracer string, progs []analysis.MissedRuns) string {
	switch tracer {
	case "fsync", "commit_fsync":
		return render.MissedEffect(analysis.MissEffectOf(progs))
	case "peers":
		return "RTT samples may be missing"
	case "commit":
		return "writes may lack steps"
	}
	return "events may be missing"
}
