package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/cpulimit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestCommitCause runs `etcdscope commit --load` against a one-member
// etcd v3.6 held to 3% of a CPU by a cgroup quota (issue 28), and against
// the same etcd unthrottled, and checks that the verdict names the CPU,
// not the disk, only when it is throttled:
//
//   - throttled: the WAL fdatasyncs' top cause (joined per call with the
//     fsync tracer's split) is waiting for a CPU, a verdict says so and
//     none says the local disk; the cgroup was throttled; and etcd's own
//     request traces (traceutil logs the steps of every request over
//     100 ms: 'process raft request') are the oracle for the slow
//     writes: each one lies inside a traced write's bracket
//     (checkRequestTraces says which parts it may hold);
//   - unthrottled: neither the verdicts nor the top cause name the CPU
//     beyond what the kernel's run-queue record shows (checkRunDelay).
//
// In both, at least 90% of the writes' WAL fdatasyncs are joined to
// their call.
func TestCommitCause(t *testing.T) {
	testenv.RequireRoot(t)
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "no "+bin+" (run 'make etcd')")
	}
	t.Setenv("ETCDSCOPE_ETCD", bin)
	t.Run("throttled", func(t *testing.T) {
		// 3% of a CPU: 7.5 ms per 250 ms period, so that a write the
		// throttle catches waits up to ~240 ms, past the 100 ms over
		// which etcd logs a request's trace (with 3 of 100 ms the
		// stalls were ~100 ms and etcd logged only 2-3 of them). The
		// cgroup is made before etcd starts, so that its removal runs
		// after etcd has stopped.
		dir := cpuLimitedCgroup(t, 7500, 250000)
		c := etcdtest.Start(t, etcdtest.Options{})
		m := c.Members[0]
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(m.PID)), 0o644); err != nil {
			t.Fatal(err)
		}
		before, err := cpulimit.Throttled(dir)
		if err != nil {
			t.Fatal(err)
		}
		rdBefore := runDelayNs(t, m.PID)
		recs, sum, start, end := runCommitCause(t, m)
		checkRunDelay(t, runDelayNs(t, m.PID)-rdBefore, sum)
		after, _ := cpulimit.Throttled(dir)
		t.Logf("cgroup throttled in %d periods during the run", after-before)
		if after <= before {
			t.Errorf("the cgroup was never throttled (nr_throttled %d -> %d): the test did not starve etcd", before, after)
		}
		top, ok := sum.WALCause.Top()
		if !ok || top != commit.CauseCPUWait {
			t.Errorf("top cause of the WAL fdatasyncs %q (joined: %v), want %q", top, ok, commit.CauseCPUWait)
		}
		if !namesCPU(sum) || anyVerdict(sum, "local disk") {
			t.Errorf("verdicts %q (evidence %+v): want one naming the CPU, none the local disk", sum.Verdicts, sum.VerdictEvidence)
		}
		checkRequestTraces(t, m.LogFile(), start, end, recs)
	})
	t.Run("unthrottled", func(t *testing.T) {
		c := etcdtest.Start(t, etcdtest.Options{})
		pid := c.Members[0].PID
		before := runDelayNs(t, pid)
		_, sum, _, _ := runCommitCause(t, c.Members[0])
		delay := runDelayNs(t, pid) - before
		cpu := sum.WALCause.Ns[commit.CauseCPUWait]
		// On a quiet machine both are small and the verdict names the
		// disk; on one busy with other work etcd really waits for a CPU,
		// and the verdict may say so, if the kernel's record shows it (a
		// run beside three other builds on 2 cores: cpu_wait the top
		// cause, 173 ms over 600 writes).
		checkRunDelay(t, delay, sum)
		if top, ok := sum.WALCause.Top(); ok && top == commit.CauseCPUWait && cpu > delay+runDelaySlackNs {
			t.Errorf("top cause of the WAL fdatasyncs %q on an unthrottled etcd, not in the kernel's run-queue record", top)
		}
		if namesCPU(sum) && cpu > delay+runDelaySlackNs {
			t.Errorf("verdicts %q name the CPU on an unthrottled etcd, not in the kernel's run-queue record", sum.Verdicts)
		}
	})
}

// runCommitCause runs commit with a put load on member m and returns its
// records, its summary and the run's wall-clock bounds.
func runCommitCause(t *testing.T, m *etcdtest.Member) ([]commit.Record, *commit.SummaryRecord, time.Time, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, etcdscope(t), "commit", "--pid", strconv.Itoa(m.PID), "--etcd-endpoints", m.ClientURL,
		"--duration", "15s", "--load", "40/s", "--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope commit: %v\n%s", err, stderr.String())
	}
	end := time.Now()
	recs, sum, err := commit.ReadRecords(bytes.NewReader(stdout.Bytes()))
	if err != nil || sum == nil {
		t.Fatalf("reading the output: %v (summary %v)\n%s", err, sum, stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
	t.Logf("%d writes, total p50 %d ns p99 %d ns, WAL fdatasync p50 %d ns; fsync calls %d (lost %d, missed %d); cause %+v; verdicts:\n%s",
		len(recs), sum.TotalNs.P50, sum.TotalNs.P99, sum.WALSyncNs.P50, sum.FsyncCalls, sum.FsyncLost, sum.FsyncMissed, sum.WALCause, strings.Join(sum.Verdicts, "\n"))
	if sum.Source != commit.SourceUprobes || len(recs) < 10 {
		t.Fatalf("source %s, %d writes", sum.Source, len(recs))
	}
	if c := sum.WALCause; c == nil || c.Joined*10 < (c.Joined+c.Unjoined)*9 {
		t.Errorf("WAL fdatasyncs joined to the fsync tracer's call: %+v, want at least 90%%", c)
	}
	if sum.FsyncLost != 0 {
		t.Errorf("the fsync tracer lost %d events", sum.FsyncLost)
	}
	return recs, sum, start, end
}

// cpuVerdict is how a verdict that names the CPU as the cause begins
// ("writes wait for a CPU, not the disk", "etcd waits for a CPU").
var cpuVerdict = regexp.MustCompile(`^(writes|etcd) waits? for a CPU`)

// namesCPU says whether the verdicts name the CPU: a line that does, or,
// when the WAL append is named alike with another part (the throttle's
// waits fall on apply too, and a run's spread may not set the two apart:
// fresh-root on b5a0523, wal_append 51.7% and commit_to_apply 20.3%
// alike), the WAL verdict's own cause, which the table prints under that
// line ("the first alone: writes wait for a CPU ...") and the JSON keeps
// as its evidence's cause_lead.
func namesCPU(sum *commit.SummaryRecord) bool {
	return anyVerdict(sum, cpuVerdict) || slices.ContainsFunc(sum.VerdictEvidence, func(e commit.VerdictEvidence) bool {
		return e.Kind == commit.VerdictWAL && e.CauseLead != nil && e.CauseLead.Lead == string(commit.CauseCPUWait)
	})
}

func anyVerdict[M string | *regexp.Regexp](sum *commit.SummaryRecord, m M) bool {
	return slices.ContainsFunc(sum.Verdicts, func(v string) bool {
		switch m := any(m).(type) {
		case string:
			return strings.Contains(v, m)
		case *regexp.Regexp:
			return m.MatchString(v)
		}
		return false
	})
}

// raftStep is the duration of the 'process raft request' step in an
// etcd traceutil line (v3.5 and v3.6 log "(duration: 638.33ms)").
var raftStep = regexp.MustCompile(`'process raft request'\s+\(duration: ([0-9.]+(?:ns|µs|us|ms|s))\)`)

// checkRequestTraces reads etcd's zap log for the traces of requests that
// started during the run and checks each 'process raft request' step
// against the traced writes: one of them brackets it, to within 1 ms + 2%.
// In etcd v3.5/v3.6 the step starts in Put, a few calls before
// processInternalRaftRequestOnce (in the write's grpc part, by
// etcdscope's parts), and ends where the entry's apply begins (toApply,
// inside the apply part); so it lasts at least the write's total less its
// grpc, apply and return parts, and at most its total less return. It was
// compared with total less grpc alone, which held on an idle CPU, but a
// CI run on the throttled etcd (3% of a CPU) had a 241.9 ms step 24.4 ms
// from every write's total less grpc: the throttle had stalled a write's
// handler after its apply (the return part), which etcd's step ends
// before.
func checkRequestTraces(t *testing.T, logFile string, start, end time.Time, recs []commit.Record) {
	t.Helper()
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Start string   `json:"start"`
			Steps []string `json:"steps"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || len(l.Steps) == 0 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, l.Start)
		if err != nil || at.Before(start) || at.After(end) {
			continue
		}
		for _, s := range l.Steps {
			if m := raftStep.FindStringSubmatch(s); m != nil {
				if d, err := time.ParseDuration(strings.Replace(m[1], "us", "µs", 1)); err == nil {
					steps = append(steps, d)
				}
			}
		}
	}
	if len(steps) < 3 {
		t.Fatalf("etcd logged %d 'process raft request' traces during the run; want at least 3 slow writes to check", len(steps))
	}
	var worst time.Duration
	for _, d := range steps {
		best := time.Duration(1 << 62)
		for _, r := range recs {
			p := r.PartsNs
			lo := time.Duration(r.TotalNs - p[commit.PartGRPC] - p[commit.PartApply] - p[commit.PartReturn])
			hi := time.Duration(r.TotalNs - p[commit.PartReturn])
			best = min(best, max(lo-d, d-hi, 0))
		}
		worst = max(worst, best)
		if best > time.Millisecond+d/50 {
			t.Errorf("etcd's 'process raft request' of %v: the nearest traced write's bracket (total less grpc, apply and return; total less return) is %v away", d, best)
		}
	}
	t.Logf("%d of etcd's request traces ('process raft request' %v): each within %v of a traced write's bracket", len(steps), steps, worst)
}

// checkRunDelay holds the CPU wait etcdscope found inside the WAL
// fdatasyncs against the kernel's own record: it is part of what etcd's
// threads waited on a run queue during the run (delay ns, schedstat's
// run_delay, which counts a throttled cgroup's wait too). Measured
// beside three other builds on 2 cores, 3 runs each: cpu_wait was 3.4 to
// 4.4% of run_delay unthrottled (73-91 ms of 1.65-2.17 s) and 3.7 to 9.0%
// throttled (1.31-2.79 s of 30.9-37.3 s).
func checkRunDelay(t *testing.T, delay int64, sum *commit.SummaryRecord) {
	t.Helper()
	cpu := sum.WALCause.Ns[commit.CauseCPUWait]
	t.Logf("etcd's threads waited %d ns on a run queue during the run (schedstat run_delay); etcdscope's cpu_wait inside its WAL fdatasyncs %d ns", delay, cpu)
	if cpu > delay+runDelaySlackNs {
		t.Errorf("cpu_wait %d ns inside the WAL fdatasyncs, more than the %d ns etcd's threads waited on a run queue in all", cpu, delay)
	}
}

// runDelayNs sums run_delay (ns spent runnable, waiting on a run queue:
// the second field of /proc/PID/task/TID/schedstat) over pid's threads.
func runDelayNs(t *testing.T, pid int) int64 {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			sum += n
		}
	}
	return sum
}

// runDelaySlackNs: etcdscope's cpu_wait starts at the wakeup's tracepoint
// and the kernel's run_delay at the enqueue just before it, so cpu_wait
// exceeds its share of run_delay by no more than rounding; 1 ms also
// covers a thread that exited during the run (its run_delay is gone).
const runDelaySlackNs = 1_000_000
