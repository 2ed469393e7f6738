//go:build nodetest

package node

// make node-test (scripts/node-test.sh) builds the kubelet, the images and
// the archives this test imports, then runs it as root:
//
//	go test -tags nodetest -count=1 -v ./node
//
// It brings up a node as kubeadm lays out a control-plane node's etcd: a
// containerd of its own (config, root, state and socket in a temp dir; the
// CRI plugin on runc), a standalone kubelet (no API server) whose static
// pod directory holds kubeadm's etcd manifest and deploy/daemonset.yaml's
// pod as a static pod (StaticPod), and checks that etcdscope's /metrics
// counts etcd's WAL fdatasyncs as etcd does, labelled with etcd's pod UID
// and container ID; that `etcdscope commit` run in the etcdscope container
// follows every put made to etcd in the other; that a pod restart
// (SIGTERM, SIGKILL) leaves no BPF program or link and the new container
// counts again; and that deploy/daemonset-netem.yaml's pod applies and
// clears netem (SKIPPED on a kernel without sch_netem). Everything is torn
// down at the end, pass or fail.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"
)

const (
	ns         = "k8s.io" // containerd namespace of the CRI plugin
	cgroupRoot = "etcdscope-node"
)

type env struct {
	kubelet, images, pause, etcdImage string
	// nodeIP: the node's address (scripts/node-test.sh gives it to
	// node0), the kubelet's --node-ip.
	nodeIP string
}

func getenv(t *testing.T) env {
	e := env{
		kubelet:   os.Getenv("ETCDSCOPE_NODE_KUBELET"),
		images:    os.Getenv("ETCDSCOPE_NODE_IMAGES"),
		pause:     os.Getenv("ETCDSCOPE_NODE_PAUSE"),
		etcdImage: os.Getenv("ETCDSCOPE_NODE_ETCD_IMAGE"),
		nodeIP:    os.Getenv("ETCDSCOPE_NODE_IP"),
	}
	if e.kubelet == "" || e.images == "" || e.pause == "" || e.etcdImage == "" || e.nodeIP == "" {
		t.Fatal("run through make node-test (scripts/node-test.sh): ETCDSCOPE_NODE_{KUBELET,IMAGES,PAUSE,ETCD_IMAGE,IP} unset")
	}
	if os.Geteuid() != 0 {
		t.Fatal("node test needs root")
	}
	return e
}

func TestNode(t *testing.T) {
	e := getenv(t)
	for _, port := range []int{2379, 2380, 2381, 10250, 10380} {
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err != nil {
			t.Fatalf("port %d is taken (etcd, the kubelet and etcdscope need it on the host network): %v", port, err)
		} else {
			l.Close()
		}
	}
	w := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"containerd", "cni", "manifests", "kubelet", "etcd", "logs"} {
		dirs[d] = filepath.Join(w, d)
		must(t, os.MkdirAll(dirs[d], 0o755))
	}
	sock := filepath.Join(w, "containerd.sock")

	// Teardown runs last, whatever failed.
	td := &teardown{t: t, work: w, sock: sock, manifests: dirs["manifests"]}
	td.netnsBefore = netnsList()
	_, err := os.Stat("/run/etcdscope")
	td.runDirBefore = err == nil
	t.Cleanup(td.run)

	td.containerd = startContainerd(t, e, dirs, sock)
	for _, img := range []string{"pause.tar", "etcd.tar", "etcdscope.tar"} {
		out, err := ctr(sock, "images", "import", filepath.Join(e.images, img))
		if err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", img, err, out)
		}
		t.Logf("imported %s: %s", img, strings.TrimSpace(out))
	}

	// etcd's data on a filesystem of its own (as on many control-plane
	// nodes: /var/lib/etcd on its own disk), here ext4 on a loop device:
	// etcdscope counts every process named etcd on the host, and this
	// machine runs other etcds (other tests) on its root disk; the device
	// label tells ours apart.
	td.loop = etcdDisk(t, w, dirs["etcd"])
	device := filepath.Base(td.loop)
	// kubeadm's etcd: TLS on the client and peer ports with its own CA
	// (/etc/kubernetes/pki/etcd, here a directory of the test's), the
	// metrics on plain http on 127.0.0.1:2381.
	etcdTLS := etcdPKI(t, filepath.Join(w, "pki", "etcd"), e.nodeIP)
	etcdManifest := kubeadmEtcd(e.etcdImage, dirs["etcd"], filepath.Join(w, "pki", "etcd"), e.nodeIP)
	must(t, os.WriteFile(filepath.Join(dirs["manifests"], "etcd.yaml"), etcdManifest, 0o644))
	pod := writeStaticPod(t, "../deploy/daemonset.yaml", filepath.Join(dirs["manifests"], "etcdscope.yaml"), filepath.Join(w, "pki", "etcd"))

	start := time.Now()
	td.kubelet = startKubelet(t, e, dirs, sock)

	etcdID := waitRunning(t, td, sock, "etcd", 3*time.Minute)
	t.Logf("etcd container %.12s running after %v", etcdID, time.Since(start).Round(time.Second))
	waitHTTP(t, td, "http://127.0.0.1:2381/readyz", 2*time.Minute)

	scopeID := waitRunning(t, td, sock, "etcdscope", 3*time.Minute)
	t.Logf("etcdscope container %.12s running after %v", scopeID, time.Since(start).Round(time.Second))
	listen := expandListen(t, sock, scopeID, pod)
	probeProxy(t, listen)
	metricsURL := "http://" + listen + "/metrics"
	waitHTTP(t, td, "http://"+listen+"/healthz", 2*time.Minute)
	t.Logf("etcdscope serves %s", metricsURL)

	// The oracle: etcd's own WAL fsync count, before and after a put load.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://127.0.0.1:2379"}, TLS: etcdTLS, DialTimeout: 5 * time.Second})
	must(t, err)
	defer cli.Close()
	// The etcd pod's identity as the runtime reports it: etcdscope's
	// --pod-labels must name the same pod and container.
	want := map[string]string{"comm": "etcd", "file_kind": "wal", "device": device,
		"pod_uid": containerLabel(t, sock, etcdID, "io.kubernetes.pod.uid"), "container_id": etcdID}
	n := &node{t: t, td: td, sock: sock, cli: cli, want: want}
	n.countsMatch(metricsURL, 300)

	etcdPID := tasks(sock)[etcdID].pid
	n.commitInPod(scopeID, etcdPID, 100)

	// A pod restart, as `kubectl delete pod` (SIGTERM) and as an OOM kill
	// or a node agent's kill (SIGKILL) end one: the old process leaves no
	// BPF program or link behind, and the container the kubelet starts in
	// its place serves and counts again.
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		from := time.Now()
		scopeID = n.restart(scopeID, sig)
		listen = expandListen(t, sock, scopeID, pod)
		metricsURL = "http://" + listen + "/metrics"
		waitHTTP(t, td, "http://"+listen+"/healthz", 2*time.Minute)
		n.killed = append(n.killed, [2]time.Time{from, time.Now()})
		n.countsMatch(metricsURL, 100)
	}

	n.netemInPod(dirs["manifests"])

	// The kubelet's own verdict on the pods it ran: a liveness probe that
	// failed would have restarted a healthy etcdscope (every ~2 minutes).
	klog, err := os.ReadFile(filepath.Join(dirs["logs"], "kubelet.log"))
	must(t, err)
	for _, l := range strings.Split(string(klog), "\n") {
		if !strings.Contains(l, `"Probe failed" probeType="Liveness"`) {
			continue
		}
		if at, ok := klogTime(l); ok && n.inKillWindow(at) {
			t.Logf("a liveness probe failed while the test had etcdscope killed (expected on any node): %s", l)
			continue
		}
		t.Errorf("the kubelet's liveness probe failed (the test killed etcdscope in %v): %s", n.killed, l)
	}
}

// klogTime reads the time of a klog line ("I1206 11:36:04.087018 ..."):
// month, day and local time, in this year.
func klogTime(line string) (time.Time, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", f[0][1:]+" "+f[1], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return at.AddDate(time.Now().Year(), 0, 0), true
}

// inKillWindow reports whether at falls in one of n.killed.
func (n *node) inKillWindow(at time.Time) bool {
	for _, w := range n.killed {
		if !at.Before(w[0]) && !at.After(w[1]) {
			return true
		}
	}
	return false
}

// node is the running node's handles for the checks after start.
type node struct {
	t    *testing.T
	td   *teardown
	sock string
	cli  *clientv3.Client
	// want: the labels of etcd's WAL fdatasync series in etcdscope's
	// /metrics (comm, file_kind, device, pod_uid, container_id).
	want map[string]string
	// key numbers the puts, so no two checks write the same key.
	key int
	// killed: from each kill of etcdscope by the test (restart) to its
	// next container serving. The kubelet's liveness probe can land
	// there, on a process the test killed behind its back, and fail as
	// it would on any node: not a verdict on a healthy etcdscope.
	killed [][2]time.Time
}

// put writes n 2 KiB values through etcd's client API.
func (n *node) put(count int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < count; i++ {
		n.key++
		if _, err := n.cli.Put(ctx, fmt.Sprintf("/node-test/%d", n.key), strings.Repeat("x", 2048)); err != nil {
			n.t.Fatalf("put %d: %v", n.key, err)
		}
	}
}

// countsMatch makes puts and checks that the increase of etcdscope's
// etcdscope_fsync_duration_seconds_count for etcd's WAL on etcd's disk,
// labelled with etcd's pod UID and container ID, equals the increase of
// etcd's own etcd_disk_wal_fsync_duration_seconds_count.
func (n *node) countsMatch(metricsURL string, puts int) {
	t := n.t
	t.Helper()
	settle := func() (etcd, scope float64) {
		// Wait until both counts stop moving (bbolt's and the WAL's
		// background syncs, etcdscope's ring buffer drained).
		var le, ls float64 = -1, -1
		for i := 0; i < 30; i++ {
			etcd = scrapeSum(t, "http://127.0.0.1:2381/metrics", "etcd_disk_wal_fsync_duration_seconds_count", nil)
			scope = scrapeSum(t, metricsURL, "etcdscope_fsync_duration_seconds_count", n.want)
			if etcd == le && scope == ls && scope == etcd {
				return
			}
			le, ls = etcd, scope
			time.Sleep(time.Second)
		}
		return
	}
	e0, s0 := settle()
	n.put(puts)
	e1, s1 := settle()
	de, ds := e1-e0, s1-s0
	t.Logf("after %d puts: etcd_disk_wal_fsync_duration_seconds_count +%v, etcdscope_fsync_duration_seconds_count %v +%v", puts, de, n.want, ds)
	if de < float64(puts)/2 {
		t.Errorf("etcd counted %v WAL fsyncs for %d puts", de, puts)
	}
	if ds != de {
		t.Errorf("etcdscope counted %v WAL fdatasyncs of etcd with labels %v, etcd counted %v; etcd's series in %s:\n%s",
			ds, n.want, de, metricsURL, seriesOf(t, metricsURL, "etcdscope_fsync_duration_seconds_count", `comm="etcd"`))
	}
}

// commitInPod runs `etcdscope commit` in the etcdscope container (as
// `kubectl exec` would) on the etcd container's process, makes puts, stops
// it with SIGINT, and checks that it followed every put (etcd's own
// etcd_mvcc_put_total) and exited within 2 s of the signal.
func (n *node) commitInPod(scopeID string, etcdPID, puts int) {
	t := n.t
	scopePID := tasks(n.sock)[scopeID].pid
	ready := fmt.Sprintf("/proc/%d/root/dev/etcdscope-commit-ready", scopePID)
	var stdout, stderr strings.Builder
	cmd := exec.Command("ctr", "--address", n.sock, "-n", ns, "tasks", "exec", "--exec-id", "commit", scopeID,
		"/etcdscope", "commit", "--pid", strconv.Itoa(etcdPID), "--duration", "0", "--output", "json",
		"--ready-file", "/dev/etcdscope-commit-ready")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			ctr(n.sock, "tasks", "kill", "--exec-id", "commit", "-s", "SIGKILL", scopeID)
			<-exited
		}
	}()
	start := time.Now()
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("etcdscope commit in the pod exited before it was ready: %v\n%s%s", err, stdout.String(), stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("etcdscope commit in the pod not ready after a minute:\n%s", stderr.String())
		}
	}
	t.Logf("etcdscope commit --pid %d in the etcdscope container: probes attached after %v", etcdPID, time.Since(start).Round(time.Millisecond))
	p0 := scrapeSum(t, "http://127.0.0.1:2381/metrics", "etcd_mvcc_put_total", nil)
	n.put(puts)
	p1 := scrapeSum(t, "http://127.0.0.1:2381/metrics", "etcd_mvcc_put_total", nil)
	time.Sleep(time.Second) // the last writes' apply and return probes
	if out, err := ctr(n.sock, "tasks", "kill", "--exec-id", "commit", "-s", "SIGINT", scopeID); err != nil {
		t.Fatalf("ctr tasks kill --exec-id commit -s SIGINT: %v %s", err, out)
	}
	sig := time.Now()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("etcdscope commit in the pod: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("etcdscope commit in the pod still running 10 s after SIGINT:\n%s", stderr.String())
	}
	took := time.Since(sig)
	// The 2 s is the product's promise (every command exits within 2 s
	// of SIGINT); the time includes ctr's relay of the exit.
	t.Logf("flakehunt: margin commit-in-pod-sigint-exit %v of 2s", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("etcdscope commit in the pod exited %v after SIGINT, want within 2 s", took)
	}
	writes, summary := 0, ""
	for _, l := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.HasPrefix(l, `{"type":"commit",`):
			writes++
		case strings.HasPrefix(l, `{"type":"commit_summary",`):
			summary = l
		}
	}
	var sum struct {
		Writes     int    `json:"writes"`
		Lost       uint64 `json:"lost_events"`
		Incomplete int    `json:"incomplete"`
	}
	if err := json.Unmarshal([]byte(summary), &sum); err != nil {
		t.Fatalf("no commit_summary in commit's output (%v):\n%s", err, stderr.String())
	}
	t.Logf("etcdscope commit in the pod: %d commit records (summary: %d writes, %d incomplete, %d lost events); etcd_mvcc_put_total +%v for %d puts",
		writes, sum.Writes, sum.Incomplete, sum.Lost, p1-p0, puts)
	if p1-p0 != float64(puts) || writes != puts || sum.Writes != puts {
		t.Errorf("etcdscope commit in the pod followed %d writes (summary %d), etcd counted %v puts, the test made %d", writes, sum.Writes, p1-p0, puts)
	}
}

// restart signals the etcdscope container's process (sig SIGTERM or
// SIGKILL, as ctr delivers them), checks that it exits within 2 s
// (SIGTERM), that every BPF program and link it held is gone, and waits
// for the kubelet's next container; it returns that container's id.
func (n *node) restart(scopeID, sig string) string {
	t := n.t
	pid := tasks(n.sock)[scopeID].pid
	progs, links := bpfObjects(t, pid)
	if len(progs) == 0 || len(links) == 0 {
		t.Fatalf("etcdscope (pid %d) holds %d BPF programs and %d links, want some of each", pid, len(progs), len(links))
	}
	if out, err := ctr(n.sock, "tasks", "kill", "-s", sig, scopeID); err != nil {
		t.Fatalf("ctr tasks kill -s %s: %v %s", sig, err, out)
	}
	start := time.Now()
	for syscall.Kill(pid, 0) == nil && time.Since(start) < 30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("flakehunt: margin pod-%s-exit %v of 2s", strings.ToLower(sig), took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("etcdscope in its pod exited %v after %s, want within 2 s", took.Round(time.Millisecond), sig)
	}
	// The kernel frees a program or link once its last reference (the
	// dead process's fds) is gone; give it the 2 s too.
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for _, id := range progs {
			if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("prog %d", id))
			}
		}
		for _, id := range links {
			if l, err := link.NewFromID(link.ID(id)); err == nil {
				l.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("after %s of etcdscope (pid %d): BPF objects left: %v", sig, pid, left)
	}
	t.Logf("%s: etcdscope pid %d exited after %v; its %d BPF programs and %d links are gone", sig, pid, took.Round(time.Millisecond), len(progs), len(links))
	var next string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && next == ""; time.Sleep(time.Second) {
		if id := runningContainer(n.sock, "etcdscope"); id != "" && id != scopeID {
			next = id
		}
	}
	if next == "" {
		n.td.dumpLogs()
		t.Fatalf("no new etcdscope container 3 min after %s", sig)
	}
	t.Logf("the kubelet restarted etcdscope: container %.12s", next)
	return next
}

// netemInPod replaces the etcdscope static pod with the one of
// deploy/daemonset-netem.yaml and, in its container, applies a delay on
// :2380 to a peer address and clears it, checking the node's qdiscs with
// iproute2. On a kernel without sch_netem the apply must fail with exit
// code 2 and change nothing: the apply/clear check then says SKIPPED.
func (n *node) netemInPod(manifests string) {
	t := n.t
	must(t, os.Remove(filepath.Join(manifests, "etcdscope.yaml")))
	pod := writeStaticPod(t, "../deploy/daemonset-netem.yaml", filepath.Join(manifests, "etcdscope-netem.yaml"), "")
	id := waitRunning(t, n.td, n.sock, "etcdscope-netem", 3*time.Minute)
	listen := expandListen(t, n.sock, id, pod)
	waitHTTP(t, n.td, "http://"+listen+"/healthz", 2*time.Minute)
	t.Logf("etcdscope-netem container %.12s serves %s", id, listen)

	before := qdiscs(t, "node0")
	run := func(args ...string) (string, int) {
		cmd := exec.Command("ctr", append([]string{"--address", n.sock, "-n", ns, "tasks", "exec", "--exec-id", "netem-" + args[0], id, "/etcdscope", "netem"}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ctr tasks exec etcdscope netem %v: %v", args, err)
		}
		return strings.TrimSpace(string(out)), code
	}
	out, code := run("apply", "--dev", "node0", "--peer", "10.250.1.2", "--delay", "25ms", "--for", "5m")
	if hasNetem, why := kernelHasNetem(); !hasNetem {
		// The pod cannot tell beforehand (no CAP_SYS_ADMIN for a
		// throwaway namespace, no /lib/modules): it tries, and must roll
		// back and say what the kernel lacks.
		if code != 2 || !strings.Contains(out, "sch_netem") {
			t.Errorf("netem apply in the pod on a kernel without netem (%s): exit %d, want 2 naming sch_netem: %s", why, code, out)
		}
		// What the pod can still show: NET_ADMIN reached it through
		// containerd and runc (the kernel answered "no such qdisc kind",
		// ENOENT, not EPERM).
		if strings.Contains(out, "not permitted") || strings.Contains(out, "NET_ADMIN") {
			t.Errorf("netem apply in the pod was refused for want of a capability, not for the kernel's missing qdisc: %s", out)
		}
		if after := qdiscs(t, "node0"); after != before {
			t.Errorf("netem apply failed but changed node0's qdiscs:\nbefore %s\nafter %s", before, after)
		}
		t.Logf("SKIPPED: netem apply and clear in the etcdscope-netem pod: this kernel has no netem qdisc (%s); the pod's apply reached the kernel with NET_ADMIN, exited 2 naming what it lacks and changed nothing: %s", why, out)
		return
	}
	if code != 0 {
		t.Fatalf("etcdscope netem apply in the pod: exit %d: %s", code, out)
	}
	if q := qdiscs(t, "node0"); !strings.Contains(q, "netem") || !strings.Contains(q, "delay 25") {
		t.Errorf("after netem apply in the pod, node0's qdiscs have no 25 ms netem: %s", q)
	}
	if out, code := run("clear", "--dev", "node0"); code != 0 {
		t.Fatalf("etcdscope netem clear in the pod: exit %d: %s", code, out)
	}
	if after := qdiscs(t, "node0"); after != before {
		t.Errorf("netem clear in the pod left node0's qdiscs changed:\nbefore %s\nafter %s", before, after)
	}
	t.Log("netem apply and clear in the etcdscope-netem pod: node0's qdiscs restored")
}

// writeStaticPod writes the static pod of the DaemonSet in manifest file
// to path (the kubelet's manifest directory), pointed at this machine's
// stand-ins for a node's (nodeLocal, pki), and returns it.
func writeStaticPod(t *testing.T, file, path, pki string) map[string]any {
	ds, err := os.ReadFile(file)
	must(t, err)
	pod, err := StaticPod(ds)
	must(t, err)
	nodeLocal(pod, pki)
	podYAML, err := yaml.Marshal(pod)
	must(t, err)
	must(t, os.WriteFile(path, podYAML, 0o644))
	return pod
}

// nodeLocal points the pod at what this machine has in place of a
// kubeadm node's: etcd's certificates under pki (the hostPath files of
// /etc/kubernetes/pki/etcd; "" leaves them), and no --commit-comm (with
// its --commit-duty): a node runs one process named etcd, but this shared
// machine may run other tests' etcds beside the node's, and serve
// --commit-comm exits 2 when several match. deploy's
// TestDaemonSetServeArgs runs those arguments against a real etcd, and
// commitInPod runs the commit tracer in the pod.
func nodeLocal(pod map[string]any, pki string) {
	spec := pod["spec"].(map[string]any)
	if pki != "" {
		vols, _ := spec["volumes"].([]any)
		for _, v := range vols {
			hp, ok := v.(map[string]any)["hostPath"].(map[string]any)
			if p, _ := hp["path"].(string); ok && strings.HasPrefix(p, "/etc/kubernetes/pki/etcd/") {
				hp["path"] = filepath.Join(pki, filepath.Base(p))
			}
		}
	}
	for _, c := range spec["containers"].([]any) {
		ct := c.(map[string]any)
		args, _ := ct["args"].([]any)
		var kept []any
		for _, a := range args {
			if s, _ := a.(string); strings.HasPrefix(s, "--commit-comm=") || strings.HasPrefix(s, "--commit-duty=") {
				continue
			}
			kept = append(kept, a)
		}
		ct["args"] = kept
	}
}

// kernelHasNetem tries a netem qdisc on the loopback of a network
// namespace of its own (unshare -n), with the test's full capabilities.
func kernelHasNetem() (bool, string) {
	out, err := exec.Command("unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
	return err == nil, strings.TrimSpace(string(out))
}

// qdiscs is `tc qdisc show dev DEV` in this test's (the node's) network
// namespace.
func qdiscs(t *testing.T, dev string) string {
	out, err := exec.Command("tc", "qdisc", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev %s: %v %s", dev, err, out)
	}
	return strings.TrimSpace(string(out))
}

// bpfObjects lists the BPF program and link ids whose fds pid holds
// (/proc/PID/fdinfo: prog_id, link_id).
func bpfObjects(t *testing.T, pid int) (progs, links []uint32) {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	must(t, err)
	seen := map[string]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok || (k != "prog_id" && k != "link_id") {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || seen[k+v] {
				continue
			}
			seen[k+v] = true
			if k == "prog_id" {
				progs = append(progs, uint32(id))
			} else {
				links = append(links, uint32(id))
			}
		}
	}
	return progs, links
}

// containerLabel is one label of a container as containerd reports it.
func containerLabel(t *testing.T, sock, id, key string) string {
	out, err := ctr(sock, "containers", "info", id)
	if err != nil {
		t.Fatalf("ctr containers info: %v\n%s", err, out)
	}
	var info struct{ Labels map[string]string }
	must(t, json.Unmarshal([]byte(out), &info))
	if info.Labels[key] == "" {
		t.Fatalf("container %.12s has no label %s: %v", id, key, info.Labels)
	}
	return info.Labels[key]
}

// seriesOf returns the lines of metric in url's exposition that contain
// match, for a failure's message.
func seriesOf(t *testing.T, url, metric, match string) string {
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, metric) && strings.Contains(l, match) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// etcdDisk makes an ext4 filesystem on a loop device over a file in work
// and mounts it on dir; it returns the loop device.
func etcdDisk(t *testing.T, work, dir string) string {
	img := filepath.Join(work, "etcd.img")
	for _, c := range [][]string{{"truncate", "-s", "1G", img}, {"mkfs.ext4", "-q", img}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	if out, err := exec.Command("mount", loop, dir).CombinedOutput(); err != nil {
		exec.Command("losetup", "-d", loop).Run()
		t.Fatalf("mount %s: %v %s", loop, err, out)
	}
	return loop
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ctr(sock string, args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", ns}, args...)...).CombinedOutput()
	return string(out), err
}

func startContainerd(t *testing.T, e env, dirs map[string]string, sock string) *exec.Cmd {
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(dirs["containerd"], "root"), filepath.Join(dirs["containerd"], "state"), sock, e.pause, runcBinary(), dirs["cni"])
	// restrict_oom_score_adj: the kubelet asks for -998 for a static
	// (critical) pod, and lowering an oom_score_adj needs CAP_SYS_RESOURCE,
	// which the machine this was written on withholds from root (runc
	// init: "failed to update /proc/self/oom_score_adj: Permission
	// denied"). containerd then clamps it to its own.
	cfg := filepath.Join(dirs["containerd"], "config.toml")
	must(t, os.WriteFile(cfg, []byte(conf), 0o644))
	// A bridge network for pods off the host network (none here; the CRI
	// plugin reports the network not ready without one).
	cni := `{"cniVersion": "0.4.0", "name": "node-test", "plugins": [
  {"type": "bridge", "bridge": "etcdscope0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.250.0.0/24"}]]}},
  {"type": "loopback"}]}`
	must(t, os.WriteFile(filepath.Join(dirs["cni"], "10-node-test.conflist"), []byte(cni), 0o644))
	cmd := exec.Command("containerd", "--config", cfg)
	logf, err := os.Create(filepath.Join(dirs["logs"], "containerd.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary if it dies before its cleanup (a panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, cmd.Start())
	for i := 0; i < 100; i++ {
		if _, err := ctr(sock, "version"); err == nil {
			return cmd
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("containerd did not answer on %s (log %s)", sock, logf.Name())
	return nil
}

// runcBinary is runc, or ETCDSCOPE_NODE_RUNC (a wrapper that keeps runc's
// log, when a container fails to start).
func runcBinary() string {
	if r := os.Getenv("ETCDSCOPE_NODE_RUNC"); r != "" {
		return r
	}
	return "runc"
}

func startKubelet(t *testing.T, e env, dirs map[string]string, sock string) *exec.Cmd {
	// cgroup v1 (this kernel's controllers are all on v1): the cgroupfs
	// driver, and a cgroup root of our own in each hierarchy, made here
	// (the kubelet requires it to exist) and removed by the teardown.
	for _, h := range v1Hierarchies() {
		d := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				must(t, err)
				must(t, os.WriteFile(filepath.Join(d, f), v, 0o644))
			}
		}
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
fileCheckFrequency: 2s
syncFrequency: 10s
podLogsDir: %s
`, dirs["manifests"], sock, cgroupRoot, filepath.Join(dirs["logs"], "pods"))
	cfg := filepath.Join(dirs["kubelet"], "config.yaml")
	must(t, os.WriteFile(cfg, []byte(conf), 0o644))
	cmd := exec.Command(e.kubelet, "--config", cfg, "--root-dir", filepath.Join(dirs["kubelet"], "root"),
		"--cert-dir", filepath.Join(dirs["kubelet"], "pki"), "--hostname-override", "etcdscope-node", "--node-ip", e.nodeIP, "--v", "2")
	logf, err := os.Create(filepath.Join(dirs["logs"], "kubelet.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary if it dies before its cleanup (a panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, cmd.Start())
	t.Logf("kubelet pid %d, log %s", cmd.Process.Pid, logf.Name())
	return cmd
}

func v1Hierarchies() []string { return mountsOfType("cgroup") }

func cgroup2Mounts() []string { return mountsOfType("cgroup2") }

func mountsOfType(fstype string) []string {
	var hs []string
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		i := slices.Index(fields, "-")
		if i > 0 && i+1 < len(fields) && fields[i+1] == fstype {
			hs = append(hs, fields[4])
		}
	}
	return hs
}

// kubeadmEtcd is kubeadm's etcd static pod (v1.34,
// cmd/kubeadm/app/phases/etcd) for one member, without TLS: the client and
// peer URLs on 127.0.0.1 over http, the metrics URL and probes as kubeadm
// has them, data in a hostPath directory.
func kubeadmEtcd(image, data, pki, nodeIP string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels:
    component: etcd
    tier: control-plane
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://%[4]s:2379
spec:
  containers:
  - name: etcd
    image: %[1]s
    imagePullPolicy: IfNotPresent
    command:
    - etcd
    - --advertise-client-urls=https://%[4]s:2379
    - --cert-file=/etc/kubernetes/pki/etcd/server.crt
    - --client-cert-auth=true
    - --data-dir=/var/lib/etcd
    - --feature-gates=InitialCorruptCheck=true
    - --initial-advertise-peer-urls=https://%[4]s:2380
    - --initial-cluster=etcdscope-node=https://%[4]s:2380
    - --key-file=/etc/kubernetes/pki/etcd/server.key
    - --listen-client-urls=https://127.0.0.1:2379,https://%[4]s:2379
    - --listen-metrics-urls=http://127.0.0.1:2381
    - --listen-peer-urls=https://%[4]s:2380
    - --name=etcdscope-node
    - --peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt
    - --peer-client-cert-auth=true
    - --peer-key-file=/etc/kubernetes/pki/etcd/peer.key
    - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
    - --snapshot-count=10000
    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
    - --watch-progress-notify-interval=5s
    livenessProbe:
      failureThreshold: 8
      httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    readinessProbe:
      failureThreshold: 3
      httpGet: {host: 127.0.0.1, path: /readyz, port: 2381, scheme: HTTP}
      periodSeconds: 1
      timeoutSeconds: 15
    startupProbe:
      failureThreshold: 24
      httpGet: {host: 127.0.0.1, path: /readyz, port: 2381, scheme: HTTP}
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    resources:
      requests: {cpu: 100m, memory: 100Mi}
    volumeMounts:
    - {mountPath: /var/lib/etcd, name: etcd-data}
    - {mountPath: /etc/kubernetes/pki/etcd, name: etcd-certs}
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  volumes:
  - hostPath: {path: %[3]s, type: DirectoryOrCreate}
    name: etcd-certs
  - hostPath: {path: %[2]s, type: DirectoryOrCreate}
    name: etcd-data
`, image, data, pki, nodeIP))
}

// etcdPKI writes what kubeadm's "certs etcd-*" phases make into dir: the
// etcd CA, the server and peer certificates (for 127.0.0.1, localhost, the
// node's name and address) and the health-check client's certificate;
// it returns a TLS config for a client with that last one.
func etcdPKI(t *testing.T, dir, nodeIP string) *tls.Config {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		return k
	}
	write := func(name string, der []byte, key *ecdsa.PrivateKey) {
		must(t, os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
		kb, err := x509.MarshalECPrivateKey(key)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	}
	serial := int64(1)
	tmpl := func(cn string, usage ...x509.ExtKeyUsage) *x509.Certificate {
		serial++
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage}
	}
	must(t, os.MkdirAll(dir, 0o755))
	caKey := newKey()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	must(t, err)
	write("ca", caDER, caKey)
	caCert, err := x509.ParseCertificate(caDER)
	must(t, err)
	var client tls.Certificate
	for _, c := range []struct {
		name, cn string
		usage    []x509.ExtKeyUsage
	}{
		{"server", "etcdscope-node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"peer", "etcdscope-node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"healthcheck-client", "kube-etcd-healthcheck-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		key := newKey()
		ct := tmpl(c.cn, c.usage...)
		if c.name != "healthcheck-client" {
			ct.DNSNames = []string{"localhost", "etcdscope-node"}
			ct.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(nodeIP)}
		}
		der, err := x509.CreateCertificate(rand.Reader, ct, caCert, &key.PublicKey, caKey)
		must(t, err)
		write(c.name, der, key)
		if c.name == "healthcheck-client" {
			client = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}
}

type task struct {
	id, status string
	pid        int
}

func tasks(sock string) map[string]task {
	out, _ := ctr(sock, "tasks", "ls")
	m := map[string]task{}
	for _, l := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) == 3 {
			pid, _ := strconv.Atoi(f[1])
			m[f[0]] = task{f[0], f[2], pid}
		}
	}
	return m
}

// waitRunning waits for the container the kubelet named name
// (io.kubernetes.container.name) to have a running task, and returns its id.
func waitRunning(t *testing.T, td *teardown, sock, name string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if id := runningContainer(sock, name); id != "" {
			return id
		}
		time.Sleep(time.Second)
	}
	td.dumpLogs()
	t.Fatalf("no running %s container after %v", name, d)
	return ""
}

// probeProxy stands in for the pod IP that a kubelet with an API server
// gives a hostNetwork pod (the node's address). A standalone kubelet never
// sets it (its status code fills hostIP and podIP only with a kube client),
// so its httpGet probes without a host dial ":PORT", the local system,
// where etcdscope, listening on the node's address only, is not: the
// liveness probe then kills a healthy container every ~2 minutes. This
// forwards loopback:PORT in the node's network namespace to addr
// (NODE_IP:PORT), where the probe reaches on a real node. deploy/ is not
// changed for it.
func probeProxy(t *testing.T, addr string) {
	_, port, err := net.SplitHostPort(addr)
	must(t, err)
	for _, lo := range []string{"127.0.0.1", "::1"} {
		l, err := net.Listen("tcp", net.JoinHostPort(lo, port))
		if err != nil {
			t.Fatalf("probe proxy on %s: %v", lo, err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					u, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						return
					}
					defer u.Close()
					go io.Copy(u, c)
					io.Copy(c, u)
				}()
			}
		}()
	}
}

// runningContainer is the id of a container the kubelet named name with a
// running task, or "".
func runningContainer(sock, name string) string {
	out, _ := ctr(sock, "containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.container.name"==%s`, name))
	ts := tasks(sock)
	for _, id := range strings.Fields(out) {
		if ts[id].status == "RUNNING" {
			return id
		}
	}
	return ""
}

// expandListen is the etcdscope container's --listen address from the
// manifest with $(NODE_IP) replaced by what the kubelet put in the
// container's environment (status.hostIP), as host:port for a URL.
func expandListen(t *testing.T, sock, id string, pod map[string]any) string {
	out, err := ctr(sock, "containers", "info", id)
	if err != nil {
		t.Fatalf("ctr containers info: %v\n%s", err, out)
	}
	var info struct {
		Spec struct {
			Process struct{ Env []string } `json:"process"`
		}
	}
	must(t, json.Unmarshal([]byte(out), &info))
	nodeIP := ""
	for _, kv := range info.Spec.Process.Env {
		if v, ok := strings.CutPrefix(kv, "NODE_IP="); ok {
			nodeIP = v
		}
	}
	if nodeIP == "" {
		t.Fatal("etcdscope container has no NODE_IP in its environment")
	}
	c := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	for _, a := range c["args"].([]any) {
		if v, ok := strings.CutPrefix(a.(string), "--listen="); ok {
			// [IPv4]:port is what serve takes; a URL wants brackets
			// for IPv6 only.
			host, port, err := net.SplitHostPort(strings.ReplaceAll(v, "$(NODE_IP)", nodeIP))
			must(t, err)
			return net.JoinHostPort(host, port)
		}
	}
	t.Fatal("no --listen= in etcdscope's args")
	return ""
}

func waitHTTP(t *testing.T, td *teardown, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(time.Second)
	}
	td.dumpLogs()
	t.Fatalf("%s not answering 200 after %v: %s", url, d, last)
}

// scrapeSum adds up the samples of one metric whose labels include want.
func scrapeSum(t *testing.T, url, metric string, want map[string]string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, metric) {
			continue
		}
		name, rest, _ := strings.Cut(l, " ")
		labels := ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			labels = name[i:]
			name = name[:i]
		}
		if name != metric {
			continue
		}
		ok := true
		for k, v := range want {
			if !strings.Contains(labels, fmt.Sprintf("%s=%q", k, v)) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func netnsList() []string {
	ents, _ := os.ReadDir("/var/run/netns")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

type teardown struct {
	t                     *testing.T
	work, sock, manifests string
	containerd, kubelet   *exec.Cmd
	netnsBefore           []string
	loop                  string
	// runDirBefore: whether /run/etcdscope (the netem DaemonSet's
	// hostPath, DirectoryOrCreate) existed before the test.
	runDirBefore bool
	dumped       bool
}

func (td *teardown) dumpLogs() {
	if td.dumped {
		return
	}
	td.dumped = true
	for _, f := range []string{"kubelet.log", "containerd.log"} {
		b, _ := os.ReadFile(filepath.Join(td.work, "logs", f))
		lines := strings.Split(string(b), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		td.t.Logf("--- last lines of %s:\n%s", f, strings.Join(lines, "\n"))
	}
	if dir := os.Getenv("ETCDSCOPE_NODE_KEEP_LOGS"); dir != "" {
		exec.Command("cp", "-r", filepath.Join(td.work, "logs"), dir).Run()
	}
}

// run tears the node down: the static pods (the kubelet stops them when
// their manifests go), the kubelet, every task and container left in
// containerd, containerd, mounts under the work directory, network
// namespaces the CRI plugin made, and the kubelet's cgroups.
func (td *teardown) run() {
	t := td.t
	if t.Failed() {
		td.dumpLogs()
	}
	if dir := os.Getenv("ETCDSCOPE_NODE_KEEP_LOGS"); dir != "" && !td.dumped {
		exec.Command("cp", "-r", filepath.Join(td.work, "logs"), dir).Run()
	}
	if td.kubelet != nil {
		ents, _ := os.ReadDir(td.manifests)
		for _, e := range ents {
			os.Remove(filepath.Join(td.manifests, e.Name()))
		}
		for i := 0; i < 60 && len(tasks(td.sock)) > 0; i++ {
			time.Sleep(time.Second)
		}
		stop(td.kubelet)
	}
	if td.containerd != nil {
		for id := range tasks(td.sock) {
			ctr(td.sock, "tasks", "kill", "-s", "SIGKILL", id)
		}
		for i := 0; i < 20; i++ {
			left := 0
			for id, tk := range tasks(td.sock) {
				if tk.status == "STOPPED" {
					ctr(td.sock, "tasks", "rm", id)
				} else {
					left++
				}
			}
			if left == 0 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if out, _ := ctr(td.sock, "containers", "ls", "-q"); strings.TrimSpace(out) != "" {
			ctr(td.sock, append([]string{"containers", "rm"}, strings.Fields(out)...)...)
		}
		if left := tasks(td.sock); len(left) > 0 {
			t.Errorf("teardown: tasks left in containerd: %v", left)
		}
		stop(td.containerd)
	}
	// Mounts under the work directory (pod volumes, sandbox /dev/shm,
	// overlay rootfs), deepest first.
	for _, m := range mountsUnder(td.work) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("teardown: umount %s: %v", m, err)
		}
	}
	if td.loop != "" {
		if out, err := exec.Command("losetup", "-d", td.loop).CombinedOutput(); err != nil {
			t.Errorf("teardown: losetup -d %s: %v %s", td.loop, err, out)
		}
	}
	for _, n := range netnsList() {
		if !slices.Contains(td.netnsBefore, n) && strings.HasPrefix(n, "cni-") {
			if out, err := exec.Command("ip", "netns", "delete", n).CombinedOutput(); err != nil {
				t.Errorf("teardown: ip netns delete %s: %v %s", n, err, out)
			}
		}
	}
	// The kubelet and runc also make the cgroup root in the (empty)
	// cgroup2 hierarchy of a hybrid host.
	for _, h := range append(v1Hierarchies(), cgroup2Mounts()...) {
		rmCgroups(t, filepath.Join(h, cgroupRoot))
	}
	if left := mountsUnder(td.work); len(left) > 0 {
		t.Errorf("teardown: mounts left: %v", left)
	}
	if !td.runDirBefore {
		// The kubelet made it for the netem pod; netem clear left it empty.
		if err := os.Remove("/run/etcdscope"); err != nil && !os.IsNotExist(err) {
			t.Errorf("teardown: /run/etcdscope: %v", err)
		}
	}
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var ms []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			ms = append(ms, f[4])
		}
	}
	slices.SortFunc(ms, func(a, b string) int { return len(b) - len(a) })
	return ms
}

func rmCgroups(t *testing.T, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			rmCgroups(t, filepath.Join(dir, e.Name()))
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Errorf("teardown: rmdir %s: %v", dir, err)
	}
}
