package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// exitBound is how soon `etcdscope commit` must exit after a SIGINT or
// SIGTERM, or after the etcd it traces dies (issue 24), and how soon a
// SIGKILLed commit must be reaped.
//
// Measured on the 2-core build VM (Linux 6.18, etcd v3.6, other tests
// running), 2026-12-06, 3 runs of this test under ETCDSCOPE_REQUIRE_BPF=1,
// 48 exits: signalled before ready 0.00-0.26 s, healthy etcd 0.23-0.29 s,
// both cores busy 0.25-0.47 s, etcd SIGSTOPped 1.04-1.08 s (1.07-1.14 s
// with the cores busy: the finish's 1 s bound on the revoke and the end
// scrape), etcd SIGKILLed 1.07-1.14 s after its death, a second signal
// 0.10-0.13 s after the first, a SIGKILLed commit reaped in 0.04-0.11 s.
// Worst 1.14 s: a margin of 0.86 s. Before (eacfceb, the same etcd):
// healthy 3.9-4.9 s (all but 0.2 s of it detaching ~30 perf-event uprobes),
// etcd stopped 24.0-25.2 s (10 s revoke + 10 s end scrape + detach),
// reaped 4.1-4.9 s; issue 25: 59 s of a 30 s run when etcd died.
//
// Seen since at load 9-15: etcd-stopped-busy-cpu 2.119 s and etcd-killed
// 2.148 s, each once. The cause: the finish still asked the stopped or
// dead etcd of a one-member cluster (revoke, end scrape) and waited its
// 1 s for nothing; it no longer asks it (pipeline.RunCommit). Measured
// after, 2026-12-06, load 7-10 (three helpers and a node test beside
// it), 2 runs, 32 exits: worst 1.456 s (a second signal); etcd stopped
// 0.89-1.15 s, killed 1.04 s, healthy 0.86-0.91 s: under that load every
// exit takes ~0.6 s more than idle, and the margin is 0.54 s.
//
// A clean-clone CI run on 28596de (a QEMU TCG guest busy on one core
// beside it) had before-ready/SIGINT at 2.28 s (1.14-1.31 s the other two):
// a signal while the probes were made still made the fsync tracer, then
// detached both. The command now checks for the signal before each
// tracer it makes: before-ready 0.07-0.15 s after (one run, 16 exits,
// worst 1.42 s, a second signal).
const exitBound = 2 * time.Second

// TestCommitExitsPromptly signals `etcdscope commit --load 20/s` at random
// moments (before its probes are attached, while it is busy with the
// load), with SIGINT and SIGTERM, on a healthy one-member etcd, with both
// cores busy, and with that etcd SIGSTOPped; kills etcd under it; and
// sends a second signal. Each time commit must exit within exitBound,
// having printed the summary (the runs signalled before the ready file
// may instead say they were interrupted before the run started), and
// leave nothing behind: the BPF programs and links it held are gone from
// the kernel, no uprobe_multi link is left on etcd, tracefs's
// uprobe_events (when mounted) is as before, and the ready file is
// removed.
func TestCommitExitsPromptly(t *testing.T) {
	testenv.RequireRoot(t)
	bin := etcdscope(t)
	var cases []exitCase
	for i := range 3 {
		sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[i%2]
		cases = append(cases,
			exitCase{name: "before-ready", beforeReady: true, sig: sig},
			exitCase{name: "healthy", sig: sig},
			exitCase{name: "busy-cpu", busyCPU: true, sig: sig},
			exitCase{name: "etcd-stopped", stopEtcd: true, sig: sig},
		)
	}
	cases = append(cases,
		exitCase{name: "etcd-stopped-busy-cpu", stopEtcd: true, busyCPU: true, sig: syscall.SIGINT},
		exitCase{name: "second-signal", second: true, sig: syscall.SIGINT},
		exitCase{name: "etcd-killed", killEtcd: true},
		exitCase{name: "commit-killed", sig: syscall.SIGKILL}, // reaped as the kernel detaches
	)
	var took []string
	worst := time.Duration(0)
	for _, tc := range cases {
		name := tc.name
		if tc.sig != 0 {
			name += "/" + map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[tc.sig]
		}
		t.Run(name, func(t *testing.T) {
			d := runExitCase(t, bin, tc)
			took = append(took, fmt.Sprintf("%s %.2fs", name, d.Seconds()))
			worst = max(worst, d)
		})
	}
	t.Logf("%d exits, worst %v (bound %v): %s", len(took), worst.Round(time.Millisecond), exitBound, strings.Join(took, ", "))
}

// exitCase is one run of TestCommitExitsPromptly.
type exitCase struct {
	name        string
	beforeReady bool // signal 0-150 ms after start, without waiting for the ready file
	stopEtcd    bool // SIGSTOP etcd 0.2-1 s before the signal
	busyCPU     bool // spin every core meanwhile
	killEtcd    bool // no signal: SIGKILL etcd
	second      bool // a second signal 150 ms after the first (past cmd's repeatGap, 100 ms)
	sig         syscall.Signal
}

// runExitCase runs commit on a one-member etcd of its own, ends it as tc
// says, checks the exit and returns how long it took.
func runExitCase(t *testing.T, bin string, tc exitCase) time.Duration {
	etcd := etcdtest.Start(t, etcdtest.Options{}).Members[0]
	t.Cleanup(func() { syscall.Kill(etcd.PID, syscall.SIGCONT) }) // before the cluster's stop
	ready := filepath.Join(t.TempDir(), "ready")
	uprobeEvents := readUprobeEvents()
	cmd := exec.Command(bin, "commit", "--pid", strconv.Itoa(etcd.PID), "--etcd-endpoints", etcd.ClientURL,
		"--load", "20/s", "--duration", "60s", "--output", "json", "--ready-file", ready)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var stopSpin atomic.Bool
	defer stopSpin.Store(true)
	if tc.busyCPU {
		for range runtime.NumCPU() {
			go func() {
				for !stopSpin.Load() {
				}
			}()
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	var progs, links []uint32
	if tc.beforeReady {
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
	} else {
		waitReady(t, ready, exited, &stderr)
		progs, links = bpfObjectIDs(t, cmd.Process.Pid)
		if len(progs) == 0 || len(links) == 0 {
			t.Errorf("commit holds %d programs and %d links once ready", len(progs), len(links))
		}
		time.Sleep(500*time.Millisecond + time.Duration(rand.IntN(2500))*time.Millisecond)
	}
	if tc.stopEtcd {
		syscall.Kill(etcd.PID, syscall.SIGSTOP)
		time.Sleep(200*time.Millisecond + time.Duration(rand.IntN(800))*time.Millisecond)
	}
	start := time.Now()
	if tc.killEtcd {
		syscall.Kill(etcd.PID, syscall.SIGKILL)
	} else {
		cmd.Process.Signal(tc.sig)
		if tc.second {
			time.Sleep(150 * time.Millisecond)
			// Under load the sleep can overrun a prompt first-signal exit
			// (a run at load 9 got exit 0 and the report): a process gone,
			// or a zombie, never got the second signal, and its exit is the
			// first signal's to judge.
			if exitedOrZombie(exited, cmd.Process.Pid) {
				t.Logf("commit had exited %v after the first SIGINT, before the second was sent: judged as one signal", time.Since(start).Round(time.Millisecond))
				tc.second = false
			} else {
				cmd.Process.Signal(tc.sig)
			}
		}
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
	}
	took := time.Since(start)
	stopSpin.Store(true)
	if took > exitBound {
		t.Errorf("commit exited %v after the %s (bound %v); stderr:\n%s", took.Round(time.Millisecond), cause(tc.killEtcd), exitBound, stderr.String())
	}
	select {
	case <-exited:
		checkExit(t, tc, waitErr, stdout.Bytes(), stderr.String())
		if tc.sig == syscall.SIGKILL {
			ready = "" // nothing removes it
		}
		checkNothingLeft(t, etcd.PID, progs, links, uprobeEvents, ready)
	default:
		t.Errorf("commit still running 30 s after the %s", cause(tc.killEtcd))
	}
	return took
}

// exitedOrZombie reports whether the process has exited: waited for, or
// a zombie not yet waited for (a signal to it is lost).
func exitedOrZombie(exited chan struct{}, pid int) bool {
	select {
	case <-exited:
		return true
	default:
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the comm's closing parenthesis.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

func cause(killedEtcd bool) string {
	if killedEtcd {
		return "SIGKILL of etcd"
	}
	return "signal"
}

// waitReady waits for commit's ready file (or its early exit).
func waitReady(t *testing.T, ready string, exited chan struct{}, stderr *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return
		}
		select {
		case <-exited:
			t.Fatalf("commit exited before it was ready:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("commit not ready after 30 s:\n%s", stderr.String())
		}
	}
}

// checkExit checks commit's exit status and what it printed.
func checkExit(t *testing.T, tc exitCase, waitErr error, stdout []byte, stderr string) {
	t.Helper()
	code := 0
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		code = ee.ExitCode()
	} else if waitErr != nil {
		t.Errorf("%v", waitErr)
		return
	}
	_, sum, err := commit.ReadRecords(bytes.NewReader(stdout))
	switch {
	case tc.sig == syscall.SIGKILL:
		if code != -1 {
			t.Errorf("exit %d after SIGKILL", code)
		}
		return
	case tc.second:
		if code != 128+int(syscall.SIGINT) || !strings.Contains(stderr, "second SIGINT") {
			t.Errorf("exit %d after a second SIGINT (want 130, saying so); stderr:\n%s", code, stderr)
		}
		return
	case tc.beforeReady && sum == nil:
		// Interrupted before the run started: it says so, or the signal
		// came before Go's handler was installed.
		if !(code == 1 && strings.Contains(stderr, "interrupted before the run started")) && code != -1 {
			t.Errorf("exit %d without a summary; stderr:\n%s", code, stderr)
		}
		return
	}
	if err != nil || sum == nil {
		t.Errorf("no summary (%v), exit %d; stderr:\n%s", err, code, stderr)
		return
	}
	want := 0
	if tc.killEtcd {
		want = 1
	}
	if code != want {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, want, stderr)
	}
	switch tg := sum.Target; {
	case tg == nil:
		t.Errorf("the summary has no target")
	case tc.killEtcd && !tg.Exited:
		t.Errorf("etcd was killed; target %+v", *tg)
	case !tc.killEtcd && tg.Exited:
		t.Errorf("etcd lived; target %+v", *tg)
	case tc.stopEtcd && (len(tg.Stops) != 1 || !tg.Stops[0].Ongoing || tg.Stops[0].Ns < 100e6):
		t.Errorf("etcd stopped 0.2-1 s before the signal; target %+v", *tg)
	case !tc.stopEtcd && len(tg.Stops) > 0:
		t.Errorf("etcd never stopped; target %+v", *tg)
	}
}

// checkNothingLeft checks that commit left no BPF object, uprobe or
// ready file behind.
func checkNothingLeft(t *testing.T, etcdPID int, progs, links []uint32, uprobeEvents []string, ready string) {
	t.Helper()
	// The kernel frees a program after its last link's release, which
	// can trail the process's exit by an RCU grace period: give it 2 s.
	for _, id := range slices.Compact(slices.Sorted(slices.Values(progs))) {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				break
			}
			p.Close()
			if time.Now().After(deadline) {
				t.Errorf("program %d outlived commit by 2 s", id)
				break
			}
		}
	}
	for _, id := range links {
		if l, err := link.NewFromID(link.ID(id)); err == nil {
			l.Close()
			t.Errorf("link %d outlived commit", id)
		}
	}
	it := new(link.Iterator)
	for it.Next() {
		if info, err := it.Link.Info(); err == nil {
			if um := info.UprobeMulti(); um != nil {
				if pid, ok := um.Pid(); ok && int(pid) == etcdPID {
					t.Errorf("uprobe_multi link %d on etcd pid %d outlived commit", it.ID, etcdPID)
				}
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Logf("iterating links: %v", err)
	}
	if now := readUprobeEvents(); !slices.Equal(now, uprobeEvents) {
		t.Errorf("tracefs uprobe_events changed: %q, was %q", now, uprobeEvents)
	}
	if _, err := os.Stat(ready); ready != "" && err == nil {
		t.Errorf("the ready file outlived commit")
	}
}

// readUprobeEvents returns tracefs's uprobe_events lines (nil when
// tracefs is not mounted: perf-event and multi uprobes need no entry).
func readUprobeEvents() []string {
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if b, err := os.ReadFile(filepath.Join(dir, "uprobe_events")); err == nil {
			return strings.Fields(string(b))
		}
	}
	return nil
}
