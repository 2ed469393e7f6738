package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// stopBound is how long a long-running command may take to exit after
// SIGINT or SIGTERM: the product's promise (an operator's Ctrl-C, a pod
// deletion's SIGTERM before its SIGKILL), not a tolerance. serve
// --commit-pid, the slowest serve to stop (the kernel's detach of its
// commit run's tracepoints), measured with etcd taking puts, N = 10 each:
// median 0.69-0.73 s, worst 0.97 s at load 2.5-12 (at 37d63f7, before:
// median 0.77-0.93 s, worst 1.39 s); checked by
// TestServeCommitStopsWithin2s.
const stopBound = 2 * time.Second

// signalCase is one long-running command TestSignalStopsWithin2s stops.
type signalCase struct {
	name string
	args []string // after the subcommand's own --ready-file
	// scratch, if set, must be empty once the command has exited (the
	// workload's private directory is removed).
	scratch string
	// stderr, if set, is a phrase a run stopped while tracing must print.
	stderr string
	// wait, if set, is the wait after loaded, in place of a random one.
	wait func() time.Duration
	// stopEtcd stops (SIGSTOP) the traced etcd member once the run is
	// ready, and continues it after the run has exited.
	stopEtcd bool
}

// TestSignalStopsWithin2s signals each long-running subcommand at a
// random moment, before its probes are attached or while it traces, with
// SIGINT or SIGTERM, under what makes a stop slow: 20,000 sockets held by
// other processes (the peers owner look-up scans /proc/*/fd), connections
// opened to the traced peer port all along, 200 scrapers on serve, and
// for peers and serve --commit-pid a three-member etcd cluster whose
// local member is stopped (SIGSTOP) before the signal, so the end scrape
// of --etcd-metrics and the members' look-ups cannot answer. Each run must exit within
// stopBound of the signal; one signalled after ready must exit 0 with its
// report printed; and it must leave no BPF program or link, no uprobe
// entry, no tracefs mount and no scratch file behind. The exit times are
// logged per case (worst first): the margin to the bound.
//
// commit has a test of its own (it drives etcd and needs its cluster
// running): TestCommitSignal. netem's --hold needs sch_netem: the VM rig.
func TestSignalStopsWithin2s(t *testing.T) {
	testenv.RequireRoot(t)
	bin := etcdscope(t)
	runs := 6
	if testing.Short() {
		runs = 2
	}
	testenv.HoldSockets(t, 4, 5000)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	m := c.Members[0]
	stopped := false
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(m.PID, syscall.SIGCONT)
		}
	})

	// Churn on a port of the test's own, traced by its own peers runs:
	// a connection opened and closed every millisecond.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	churnPort := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			cn.Close()
		}
	}()
	churnDone := make(chan struct{})
	defer close(churnDone)
	go func() {
		for {
			select {
			case <-churnDone:
				return
			case <-time.After(time.Millisecond):
			}
			if cn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
				cn.Write([]byte("x"))
				cn.Close()
			}
		}
	}()

	wl := filepath.Join(t.TempDir(), "wl")
	if err := os.Mkdir(wl, 0o700); err != nil {
		t.Fatal(err)
	}
	endpoints := strings.Join(c.Endpoints(), ",")
	cases := []signalCase{
		{name: "fsync-workload", args: []string{"fsync", "--workload", "wal", "--dir", wl, "--interval", "0", "--duration", "0"}, scratch: wl},
		{name: "fsync-etcd", args: []string{"fsync", "--pid", strconv.Itoa(m.PID), "--interval", "1s"}},
		{name: "peers-churn", args: []string{"peers", "--port", strconv.Itoa(churnPort), "--duration", "0"}},
		{name: "peers-etcd", args: []string{"peers", "--duration", "0", "--etcd-endpoints", endpoints, "--etcd-metrics", m.MetricsURL}},
		{name: "peers-etcd-stopped", args: []string{"peers", "--duration", "0", "--etcd-endpoints", endpoints, "--etcd-metrics", m.MetricsURL},
			stderr: "end scrape: no answer within 1s of the stop signal", stopEtcd: true},
		{name: "serve-scraped", args: []string{"serve", "--listen", "127.0.0.1:0", "--comm", "etcd"}},
		// The DaemonSet's agent on a member that stopped answering: its
		// uprobes on the stopped process, its member look-ups unanswered
		// (serve asks again while etcd runs: pipeline.discoverCluster).
		// 2026-12-07, load 1.2-1.7: 18 runs with that wait 0.56-1.13 s, 12
		// without it 0.58-1.08 s (the same: the stop cancels the look-up).
		{name: "serve-commit-etcd-stopped", args: []string{"serve", "--listen", "127.0.0.1:0", "--pid", strconv.Itoa(m.PID),
			"--commit-pid", strconv.Itoa(m.PID), "--etcd-endpoints", endpoints}, stopEtcd: true},
		// hypervisor --pid takes QEMU's pid only (etcd's is refused): by
		// comm, which it waits for.
		{name: "hypervisor", args: []string{"hypervisor", "--comm", "qemu-system-x86"}},
	}
	traced0 := tracingState(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) {
			var times []time.Duration
			for i := range runs {
				sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[i%2]
				early := i%3 == 2 // one run in three before ready
				d := runSignalled(t, bin, sc, sig, early, rng, func(ready string) {
					if sc.name == "serve-scraped" {
						scrapeHard(t, ready, 200)
					}
					if sc.stopEtcd {
						if err := syscall.Kill(m.PID, syscall.SIGSTOP); err != nil {
							t.Fatal(err)
						}
						stopped = true
					}
				}, func() {
					if stopped {
						syscall.Kill(m.PID, syscall.SIGCONT)
						stopped = false
					}
				})
				times = append(times, d)
			}
			slices.Sort(times)
			slices.Reverse(times)
			t.Logf("%s: exit after the signal in %d runs, worst first: %v (bound %v)", sc.name, len(times), times, stopBound)
			t.Logf("flakehunt: margin signal-%s %v of %v", sc.name, times[0], stopBound)
		})
	}
	traced0.unchanged(t)
}

// runSignalled starts one run of sc, signals it with sig (before ready when
// early, at a random moment up to 0.2 s after start; else at a random
// moment up to 1.5 s after loaded ran), checks how it exited and what it
// left, and returns the time from the signal to its exit. after runs once
// the process has exited.
func runSignalled(t *testing.T, bin string, sc signalCase, sig syscall.Signal, early bool, rng *rand.Rand, loaded func(ready string), after func()) time.Duration {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(bin, append([]string{sc.args[0], "--ready-file", ready}, sc.args[1:]...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	var progs, links []uint32
	if early {
		time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
	} else {
		deadline := time.Now().Add(90 * time.Second)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready in 90 s; stderr:\n%s", sc.name, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		progs, links = bpfObjectIDs(t, cmd.Process.Pid)
		loaded(ready)
		wait := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
		if sc.wait != nil {
			wait = sc.wait()
		}
		time.Sleep(wait)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(cmd.Process.Pid, syscall.SIGQUIT) // the goroutines, on stderr
		err = <-exited
		after()
		t.Fatalf("%s (%v, early %v) still running 30 s after the signal; stderr (with the goroutine dump):\n%s", sc.name, sig, early, stderr.String())
	}
	took := time.Since(sent)
	after()
	what := fmt.Sprintf("%s with %v %s", sc.name, sig, map[bool]string{true: "before ready", false: "while tracing"}[early])
	if took > stopBound {
		t.Errorf("%s: exited %v after the signal, bound %v; stderr:\n%s", what, took, stopBound, stderr.String())
	}
	switch {
	case !early && err != nil:
		t.Errorf("%s: %v, want exit 0; stderr:\n%s", what, err, stderr.String())
	case !early && stdout.Len() == 0 && !strings.HasPrefix(sc.name, "serve"):
		t.Errorf("%s: printed no report; stderr:\n%s", what, stderr.String())
	case !early && !strings.Contains(stderr.String(), sc.stderr):
		t.Errorf("%s: stderr does not say %q:\n%s", what, sc.stderr, stderr.String())
	case early && err != nil && !signalledExit(err, sig):
		// Before the handler is installed the signal's default action
		// ends the process: that is a stop too. Anything else is not.
		t.Errorf("%s: %v; stderr:\n%s", what, err, stderr.String())
	}
	if _, err := os.Stat(ready); err == nil {
		t.Errorf("%s: --ready-file left behind", what)
	}
	if len(progs) > 0 {
		waitFreed(t, progs, links)
	}
	if sc.scratch != "" {
		if ents, _ := os.ReadDir(sc.scratch); len(ents) > 0 {
			t.Errorf("%s: scratch left in %s: %v", what, sc.scratch, ents)
		}
	}
	return took
}

// signalledExit reports whether err is the exit of a process ended by sig
// (its default action) or by the command's own 128+sig.
func signalledExit(err error, sig syscall.Signal) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws := ee.Sys().(syscall.WaitStatus)
	return (ws.Signaled() && ws.Signal() == sig) || ws.ExitStatus() == 128+int(sig)
}

// scrapeHard starts n scrapers of the serve whose address is in the ready
// file, each scraping in a loop until the serve is gone.
func scrapeHard(t *testing.T, ready string, n int) {
	t.Helper()
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + strings.TrimSpace(string(b)) + "/metrics"
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := client.Get(url)
				if err != nil {
					return
				}
				resp.Body.Close()
			}
		}()
	}
	t.Cleanup(wg.Wait)
}

// hostTracing is what a run could leave in the host's tracing: the
// uprobe_events entries and the tracefs mounts.
type hostTracing struct{ uprobes, mounts string }

// tracingState reads the host's tracing now.
func tracingState(t *testing.T) hostTracing {
	t.Helper()
	return hostTracing{readOrEmpty("/sys/kernel/tracing/uprobe_events"), tracefsMounts(t)}
}

// unchanged fails t if the host's tracing is not as it was at h.
func (h hostTracing) unchanged(t *testing.T) {
	t.Helper()
	now := tracingState(t)
	if now.uprobes != h.uprobes {
		t.Errorf("uprobe_events changed:\nbefore %q\nafter  %q", h.uprobes, now.uprobes)
	}
	if now.mounts != h.mounts {
		t.Errorf("tracefs mounts changed:\nbefore %q\nafter  %q", h.mounts, now.mounts)
	}
}

// readOrEmpty returns the file's contents, or "" if it cannot be read.
func readOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// tracefsMounts returns the lines of /proc/self/mounts that mount tracefs.
func tracefsMounts(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " tracefs ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSecondSignalExitsAtOnce: a second signal while a command stops
// ends it at once with 128+signal, as a shell reports it. peers whose
// etcd is stopped (SIGSTOP) waits up to 1 s on its end scrape after the
// first SIGINT; a SIGTERM 200 ms into that wait must end it within
// 200 ms more, exit code 143, and the kernel still frees its programs and
// links (their only reference was the process).
func TestSecondSignalExitsAtOnce(t *testing.T) {
	testenv.RequireRoot(t)
	bin := etcdscope(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(bin, "peers", "--ready-file", ready, "--duration", "0", "--etcd-metrics", m.MetricsURL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready in 90 s; stderr:\n%s", stderr.String())
		}
	}
	progs, links := bpfObjectIDs(t, cmd.Process.Pid)
	if err := syscall.Kill(m.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(m.PID, syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	took := time.Since(sent)
	syscall.Kill(m.PID, syscall.SIGCONT)
	if !signalledExit(err, syscall.SIGTERM) {
		t.Fatalf("after a second signal: %v, want exit code 143; stderr:\n%s", err, stderr.String())
	}
	if took > 200*time.Millisecond {
		t.Errorf("exited %v after the second signal, want within 200 ms", took)
	}
	if !strings.Contains(stderr.String(), "second SIGTERM") {
		t.Errorf("stderr does not name the second signal:\n%s", stderr.String())
	}
	waitFreed(t, progs, links)
	t.Logf("exit %v after the second signal", took)
}
