package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/internal/cpulimit"
)

// The starved reader of issue 12's loss goal: the tracer in a cgroup of
// its own held to starvedQuotaUs of CPU time per starvedPeriodUs (10% of
// one CPU; e2e/starved_test.go's choice, the reasons there).
const (
	starvedQuotaUs  = 10000
	starvedPeriodUs = 100000
	// starvedConnsPerSec: fsyncgen -churn's rate for peers, ~30k events/s
	// (ten events a connection).
	starvedConnsPerSec = 3000
	// starvedWriters: fdatasync writers on ext4 over a loop device; one
	// does not keep the stack busy (each waits for its own flush).
	starvedWriters = 4
)

// starvedRun is one tracer's run with its reader starved.
type starvedRun struct {
	What    string  // "fsync" or "peers"
	Comm    string  `json:",omitempty"` // fsync: the writers' comm (-starved-comm); "": starvedgen
	Seconds float64 // of load
	// Oracle is the generator's own count: fdatasync calls or connections.
	Oracle float64
	// Traced is the tracer's count of the same: calls in its summary, or
	// connections opened, set up and closed (the least of the three).
	Traced       float64
	Events       int64 // peers: events; fsync: not counted (0)
	Lost, Missed uint64
	CPUNs        int64  // the tracer's CPU time during the load
	Throttled    int64  // periods its cgroup's quota throttled it
	RingPeak     uint64 // ring_peak_bytes
	RingBytes    uint64 // the ring's size (the default)
	Err          string `json:",omitempty"` // why the run could not be made
}

// starvedSection runs issue 12's loss goal: `etcdscope fsync` with stacked
// levels (ext4 over a loop device, its host fsyncs traced as the backing level) under
// starvedWriters unpaced fdatasync writers, and `etcdscope peers` under
// starvedConnsPerSec connections a second, each for o.starvedSeconds with
// its reader in a cgroup held to starvedQuotaUs per starvedPeriodUs.
func starvedSection(o options, r *results) error {
	for _, f := range []func(options) (starvedRun, error){starvedFsync, starvedPeers} {
		s, err := f(o)
		if err != nil {
			s.Err = err.Error()
			logf("starved %s: %v", s.What, err)
		} else {
			logf("starved %s: %.0f of %.0f traced (%.0f/s), lost %d, missed %d, reader %.1f%% of a CPU, throttled %d times, ring peak %d KiB of %d",
				s.What, s.Traced, s.Oracle, s.Oracle/s.Seconds, s.Lost, s.Missed, 100*float64(s.CPUNs)/1e9/s.Seconds, s.Throttled, s.RingPeak>>10, s.RingBytes>>10)
		}
		r.Starved = append(r.Starved, s)
	}
	return nil
}

func starvedFsync(o options) (starvedRun, error) {
	s := starvedRun{What: "fsync", Comm: o.starvedComm, Seconds: o.starvedSeconds, RingBytes: 2 << 20}
	dir, err := mkScratch("/var/tmp", fmt.Sprintf("%s%d-", starvedScratchPrefix, os.Getpid()))
	if err != nil {
		return s, err
	}
	defer dropScratch(dir)
	fs, err := newLoopFS(dir, 1<<30, "ext4")
	if err != nil {
		return s, err
	}
	defer fs.close()
	mnt := fs.mnt
	// A comm of its own (fsyncgen is also make bench's other sections'
	// and maybe another tenant's).
	gen := filepath.Join(dir, o.starvedComm)
	if err := os.Link(o.fsyncgen, gen); err != nil {
		if b, rerr := os.ReadFile(o.fsyncgen); rerr != nil || os.WriteFile(gen, b, 0o700) != nil {
			return s, fmt.Errorf("copying fsyncgen: %v", err)
		}
	}
	cg, done, err := starvedCgroup()
	if err != nil {
		return s, err
	}
	defer done()
	t, err := startTracerIn(cg, "etcdscope", o.starvedComm, o.etcdscope, "")
	if err != nil {
		return s, err
	}
	var g struct {
		Fsyncs float64 `json:"fsyncs"`
	}
	cpu, thr, gerr := underStarvation(t, cg, &g, gen, "-dir", mnt, "-threads", strconv.Itoa(starvedWriters),
		"-duration", fmt.Sprintf("%gs", o.starvedSeconds))
	sum, serr := t.stop()
	if err := errors.Join(gerr, serr); err != nil {
		return s, err
	}
	var rep struct {
		Type          string `json:"type"`
		Fsyncs        float64
		LostEvents    uint64 `json:"lost_events"`
		MissedEvents  uint64 `json:"missed_events"`
		RingPeakBytes uint64 `json:"ring_peak_bytes"`
		Levels        []struct{ Level string }
	}
	lines := bytes.Split(bytes.TrimSpace(sum), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil || rep.Type != "summary" {
		return s, fmt.Errorf("etcdscope fsync's last line is not its summary: %.200s", lines[len(lines)-1])
	}
	if len(rep.Levels) < 2 {
		return s, fmt.Errorf("no stacked level in the report (%d levels): the loop device's host fsyncs were not traced", len(rep.Levels))
	}
	s.Oracle, s.Traced, s.Lost, s.Missed, s.RingPeak, s.CPUNs, s.Throttled = g.Fsyncs, rep.Fsyncs, rep.LostEvents, rep.MissedEvents, rep.RingPeakBytes, cpu, thr
	return s, nil
}

func starvedPeers(o options) (starvedRun, error) {
	s := starvedRun{What: "peers", Seconds: o.starvedSeconds, RingBytes: 2 << 20}
	port, err := freePort()
	if err != nil {
		return s, err
	}
	cg, done, err := starvedCgroup()
	if err != nil {
		return s, err
	}
	defer done()
	t, err := startTracerIn(cg, "etcdscope-peers-json", port, o.etcdscope, "")
	if err != nil {
		return s, err
	}
	var g struct {
		Conns float64 `json:"conns"`
	}
	cpu, thr, gerr := underStarvation(t, cg, &g, o.fsyncgen, "-churn", port, "-threads", "8",
		"-rate", strconv.Itoa(starvedConnsPerSec), "-duration", fmt.Sprintf("%gs", o.starvedSeconds))
	time.Sleep(300 * time.Millisecond) // the listener's closes
	sum, serr := t.stop()
	if err := errors.Join(gerr, serr); err != nil {
		return s, err
	}
	var rep struct {
		Events        int64  `json:"events"`
		LostEvents    uint64 `json:"lost_events"`
		MissedEvents  uint64 `json:"missed_events"`
		RingPeakBytes uint64 `json:"ring_peak_bytes"`
		Links         []struct {
			Opened, Closed float64
			Setup          struct{ Count float64 } `json:"setup_ns"`
			Link           struct{ Direction string }
		} `json:"links"`
	}
	if err := json.Unmarshal(sum, &rep); err != nil {
		return s, fmt.Errorf("etcdscope peers' report: %w", err)
	}
	var opened, closed, setup float64
	// The generator's connections as its end saw them: a loopback
	// connection's accepting end is folded into the opening end's link
	// when both close together, else it has a passive link of its own.
	for _, l := range rep.Links {
		if l.Link.Direction == "active" {
			opened, closed, setup = opened+l.Opened, closed+l.Closed, setup+l.Setup.Count
		}
	}
	s.Oracle, s.Traced, s.Events, s.Lost, s.Missed, s.RingPeak, s.CPUNs, s.Throttled = g.Conns, min(opened, closed, setup), rep.Events, rep.LostEvents, rep.MissedEvents, rep.RingPeakBytes, cpu, thr
	return s, nil
}

// underStarvation runs the generator gen with args while tracer t runs in
// cgroup cg, decodes the generator's JSON into res, and returns the
// tracer's CPU time and the cgroup's throttled periods over the run.
func underStarvation(t *tracerProc, cg string, res any, gen string, args ...string) (cpuNs, throttled int64, err error) {
	pid := t.cmd.Process.Pid
	s0, err := sampleProc(pid)
	if err != nil {
		return 0, 0, err
	}
	thr0, err := cpulimit.Throttled(cg)
	if err != nil {
		return 0, 0, err
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(gen, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := startChild(cmd); err != nil {
		return 0, 0, err
	}
	if err := waitChild(cmd); err != nil {
		return 0, 0, fmt.Errorf("%s: %w: %s", filepath.Base(gen), err, stderr.String())
	}
	s1, err := sampleProc(pid)
	if err != nil {
		return 0, 0, err
	}
	thr1, err := cpulimit.Throttled(cg)
	if err != nil {
		return 0, 0, err
	}
	if err := json.Unmarshal(out.Bytes(), res); err != nil {
		return 0, 0, fmt.Errorf("%s's output %q: %w", filepath.Base(gen), out.String(), err)
	}
	return s1.cpuNs - s0.cpuNs, thr1 - thr0, nil
}

// starvedCgroup makes the cgroup the starved runs put the tracer in
// (starvedQuotaUs per starvedPeriodUs) and returns its directory and a
// function that removes it, once, on a return or an interrupt
// (onInterrupt).
func starvedCgroup() (string, func(), error) {
	dir, remove, err := cpulimit.Make(fmt.Sprintf("%s%d", starvedCgroupPrefix, os.Getpid()), starvedQuotaUs, starvedPeriodUs)
	if err != nil {
		return "", nil, err
	}
	return dir, onInterrupt(remove), nil
}

// starvedMarkdown is the section's table.
func (r *results) starvedMarkdown() string {
	if len(r.Starved) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	w("\n## Starved reader: lost and unaccounted events (issue 12's loss goal)\n\n")
	w("The tracer in a cgroup of its own held to %d µs of CPU per %d µs (%d%% of one CPU; cpu.max, or cgroup v1's cfs quota),\n",
		starvedQuotaUs, starvedPeriodUs, 100*starvedQuotaUs/starvedPeriodUs)
	comm := r.Starved[0].Comm
	if comm == "" {
		comm = "starvedgen"
	}
	w("default ring, for %.0f s each. fsync: `etcdscope fsync --comm %s --output json` with stacked levels (ext4 over a\n", r.Starved[0].Seconds, comm)
	w("loop device on %s, its host fsyncs traced as the backing level) while %d fsyncgen writers fdatasync as fast as the stack goes; the oracle\n", r.Disk, starvedWriters)
	w("is their own call count. peers: `etcdscope peers --output json` while `fsyncgen -churn -rate %d` opens, uses and closes\n", starvedConnsPerSec)
	w("loopback connections; the oracle is its connection count, against the connections its active links have opened, set up and closed.\n")
	w("Reader CPU: its threads' schedstat over the load. Ring peak: `ring_peak_bytes`, the most unread data the reader saw.\n\n")
	w("| tracer | rate /s | oracle | traced | lost | missed | reader CPU | per unit | throttled | ring peak / size |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Starved {
		if s.Err != "" {
			w("| %s | not run: %s |||||||||\n", s.What, s.Err)
			continue
		}
		unit, n := "µs per call", s.Oracle
		if s.What == "peers" {
			unit, n = "µs per event", float64(s.Events)
		}
		w("| %s | %.0f | %.0f | %.0f | %d | %d | %.1f%% | %.2f %s | %d | %d / %d KiB |\n", s.What, s.Oracle/s.Seconds, s.Oracle, s.Traced, s.Lost, s.Missed,
			100*float64(s.CPUNs)/1e9/s.Seconds, float64(s.CPUNs)/1e3/max(n, 1), unit, s.Throttled, s.RingPeak>>10, s.RingBytes>>10)
	}
	return b.String()
}

// starvedGoals checks "0 lost and 0 unaccounted for 60 s at the highest
// rate the stack sustains while the reader is starved on purpose".
func (r *results) starvedGoals() [][3]string {
	var g [][3]string
	for _, s := range r.Starved {
		goal := fmt.Sprintf("0 lost, 0 unaccounted, reader starved to %d%% of a CPU, %.0f s: `%s`", 100*starvedQuotaUs/starvedPeriodUs, s.Seconds, s.What)
		if s.What == "fsync" {
			goal += " with stacked levels, ext4 over a loop device (the stack's rate)"
		} else {
			goal += " at 30k events/s"
		}
		if s.Err != "" {
			g = append(g, [3]string{goal, "not run: " + s.Err, "**not measured**"})
			continue
		}
		got := fmt.Sprintf("%.0f of %.0f traced at %.0f/s, lost %d, missed %d; throttled %d times; ring peak %d of %d KiB",
			s.Traced, s.Oracle, s.Oracle/s.Seconds, s.Lost, s.Missed, s.Throttled, s.RingPeak>>10, s.RingBytes>>10)
		if s.What == "peers" {
			got += fmt.Sprintf(" (%.0f events/s)", float64(s.Events)/s.Seconds)
		}
		v := verdict(s.Lost == 0 && s.Traced == s.Oracle && s.Throttled > 0)
		if s.What == "peers" && float64(s.Events)/s.Seconds < 25e3 {
			v = "inconclusive: the generator did not reach 30k events/s"
		}
		g = append(g, [3]string{goal, got, v})
	}
	return g
}
