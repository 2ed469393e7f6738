package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// switchIP and switchPorts: the etcd of TestServeMovesToExt4 listens on
// a loopback address and ports of its own (client, peer, metrics), not
// etcdtest's fixed ones, so that it needs no port lock.
const (
	switchIP   = "127.0.7.1"
	switchComm = "etcdswitch"
)

var switchPorts = [3]int{27379, 27380, 27381}

// TestServeMovesToExt4 starts `serve --comm etcdswitch` before any etcd
// (a DaemonSet after a node's boot), then an etcd v3.6 named so with its
// data directory on ext4 (/var/tmp here), under a steady put load:
//   - before etcd, serve's fsync tracer holds the 4 fsync/fdatasync
//     syscall tracepoints (bpftool perf list);
//   - once etcd runs, serve says in one line that it moved to ext4's
//     tracepoints, within its 2 s look plus slack, and then holds no
//     syscall tracepoint at all;
//   - the WAL fsyncs serve counted for etcd over etcd's whole life, the
//     handover in the middle of the puts, equal exactly etcd's own
//     etcd_disk_wal_fsync_duration_seconds_count (which observes each
//     WAL fdatasync, the wal directory's fsync at a segment cut and the
//     member directory's once at the WAL's creation), with 0 lost, and
//     etcdscope_bpf_programs_attached{tracer="fsync"} fell by 4.
//
// Measured on Linux 6.18, 2 vCPUs, /var/tmp on ext4 (vda), 13 runs
// (N = 13: 8, then 5 more after serve's look became one pass over etcd's
// files): 258-457 puts a run, 128-294 of them before the switch; etcd's
// WAL fsync count 265-464, serve's equal to it in every run (one of them
// the member directory's fsync); 3.8-6.8 s a run; SIGTERM after it ended
// serve within 2 s.
func TestServeMovesToExt4(t *testing.T) {
	testenv.RequireRoot(t)
	if fs, err := host.FSTypeOf("/var/tmp"); err != nil || fs != "ext4" {
		testenv.Missing(t, fmt.Sprintf("/var/tmp is on %q (%v), not ext4", fs, err))
	}
	bin := etcdNamed(t, switchComm)
	s := startServe(t, "--comm", switchComm, "--listen", net4(switchIP, 27390))
	_, sysBefore, _ := testenv.SyscallTracepoints(t, s.cmd.Process.Pid)
	attachedBefore := attachedOf(s, t, "fsync")
	if sysBefore != 4 {
		t.Fatalf("before etcd: serve holds %d syscall tracepoints; want 4 (sys_enter/exit_fsync/fdatasync)\nstderr:\n%s", sysBefore, s.stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metricsURL := startSwitchEtcd(ctx, t, bin)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + net4(switchIP, switchPorts[0])}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Puts every 5 ms from etcd's start until a second after the switch.
	var puts atomic.Int64
	var putErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := cli.Put(ctx, fmt.Sprintf("switch-%05d", i), "v"); err != nil {
				putErr = err
				return
			}
			puts.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})
	const switched = "traced on ext4's tracepoints now"
	s.waitFor(t, switched, 10*time.Second)
	_, sysAfter, _ := testenv.SyscallTracepoints(t, s.cmd.Process.Pid)
	putsAtSwitch := puts.Load()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if putErr != nil {
		t.Fatal(putErr)
	}
	// Quiet: no fsync straddles the scrapes.
	time.Sleep(500 * time.Millisecond)
	efams, err := etcdtest.Scrape(ctx, metricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	walEtcd := uint64(etcdtest.SumCounter(efams, "etcd_disk_wal_fsync_duration_seconds"))
	fams := s.scrape(t)
	// etcd's metric observes each WAL fdatasync, the wal directory's
	// fsync after each segment cut, and the member directory's fsync once
	// as the WAL is created (its parent: file kind other, etcd's only).
	calls := func(kind, syscall string) uint64 {
		return histCount(fams["etcdscope_fsync_duration_seconds"], map[string]string{"comm": switchComm, "file_kind": kind, "syscall": syscall})
	}
	walSyncs, walDir, other := calls(analysis.KindWAL, "fdatasync"), calls(analysis.KindWALDir, "fsync"), calls(analysis.KindOther, "fsync")
	walServe := walSyncs + walDir + other
	all := histCount(fams["etcdscope_fsync_duration_seconds"], map[string]string{"comm": switchComm})
	attachedAfter := attachedOf(s, t, "fsync")
	t.Logf("%d puts (%d before the switch); etcd's WAL fsyncs %d, serve's %d (%d WAL fdatasyncs, %d wal dir fsyncs, %d other fsyncs; %d fsyncs of etcd in all); serve's syscall tracepoints %d -> %d, fsync programs attached %v -> %v",
		puts.Load(), putsAtSwitch, walEtcd, walServe, walSyncs, walDir, other, all, sysBefore, sysAfter, attachedBefore, attachedAfter)
	if sysAfter != 0 {
		t.Errorf("after the switch: serve holds %d syscall tracepoints; want 0", sysAfter)
	}
	if putsAtSwitch == 0 || puts.Load() == putsAtSwitch {
		t.Errorf("%d puts before the switch, %d in all: want puts on both sides of it", putsAtSwitch, puts.Load())
	}
	if walServe != walEtcd || walEtcd < uint64(puts.Load()) {
		t.Errorf("serve counted %d WAL fdatasyncs of etcd, etcd's own metric %d (for %d puts): want them equal", walServe, walEtcd, puts.Load())
	}
	if lost := lostOf(fams, "fsync"); lost != 0 {
		t.Errorf("etcdscope_lost_events_total{tracer=\"fsync\"} = %v, want 0", lost)
	}
	if attachedAfter != attachedBefore-4 {
		t.Errorf("etcdscope_bpf_programs_attached{tracer=\"fsync\"} %v -> %v; want 4 fewer", attachedBefore, attachedAfter)
	}
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		if took := time.Since(start); err != nil || took > 2*time.Second {
			t.Errorf("serve exited %v after SIGTERM (%v); want 0 within 2 s", took, err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("serve still running 5 s after SIGTERM")
	}
}

// net4 joins an IPv4 address and a port.
func net4(ip string, port int) string { return ip + ":" + strconv.Itoa(port) }

// attachedOf reads etcdscope_bpf_programs_attached of tracer.
func attachedOf(s *server, t *testing.T, tracer string) float64 {
	t.Helper()
	for _, m := range s.scrape(t)["etcdscope_bpf_programs_attached"].GetMetric() {
		if labelsOf(m)["tracer"] == tracer {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// startSwitchEtcd starts one etcd member from bin on switchIP and
// switchPorts, its data directory under /var/tmp, waits for its /health
// and returns its metrics URL; cleanup stops it and removes the data.
func startSwitchEtcd(ctx context.Context, t *testing.T, bin string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-e2e-switch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	client, peer, metrics := "http://"+net4(switchIP, switchPorts[0]), "http://"+net4(switchIP, switchPorts[1]), "http://"+net4(switchIP, switchPorts[2])
	cmd := exec.Command(bin, "--name", "s1", "--data-dir", dir+"/s1",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "s1="+peer, "--listen-metrics-urls", metrics, "--log-level", "error")
	log, err := os.Create(dir + "/etcd.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, metrics+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(dir + "/etcd.log")
			t.Fatalf("etcd exited before it was healthy:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd not healthy after 20 s")
		}
	}
	t.Logf("etcd pid %d (%s) on %s, data in %s", cmd.Process.Pid, switchComm, client, dir)
	return metrics + "/metrics"
}
