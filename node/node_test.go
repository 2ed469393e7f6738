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
// counts etcd's WAL fdatasyncs as etcd does. Everything is torn down at
// the end, pass or fail.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"
)

const (
	ns         = "k8s.io" // containerd namespace of the CRI plugin
	cgroupRoot = "etcdscope-node"
)

type env struct {
	kubelet, images, pause, etcdImage string
}

func getenv(t *testing.T) env {
	e := env{
		kubelet:   os.Getenv("ETCDSCOPE_NODE_KUBELET"),
		images:    os.Getenv("ETCDSCOPE_NODE_IMAGES"),
		pause:     os.Getenv("ETCDSCOPE_NODE_PAUSE"),
		etcdImage: os.Getenv("ETCDSCOPE_NODE_ETCD_IMAGE"),
	}
	if e.kubelet == "" || e.images == "" || e.pause == "" || e.etcdImage == "" {
		t.Fatal("run through make node-test (scripts/node-test.sh): ETCDSCOPE_NODE_{KUBELET,IMAGES,PAUSE,ETCD_IMAGE} unset")
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
	etcdManifest := kubeadmEtcd(e.etcdImage, dirs["etcd"])
	must(t, os.WriteFile(filepath.Join(dirs["manifests"], "etcd.yaml"), etcdManifest, 0o644))
	ds, err := os.ReadFile("../deploy/daemonset.yaml")
	must(t, err)
	pod, err := StaticPod(ds)
	must(t, err)
	podYAML, err := yaml.Marshal(pod)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dirs["manifests"], "etcdscope.yaml"), podYAML, 0o644))

	start := time.Now()
	td.kubelet = startKubelet(t, e, dirs, sock)

	etcdID := waitRunning(t, td, sock, "etcd", 3*time.Minute)
	t.Logf("etcd container %.12s running after %v", etcdID, time.Since(start).Round(time.Second))
	waitHTTP(t, td, "http://127.0.0.1:2381/readyz", 2*time.Minute)

	scopeID := waitRunning(t, td, sock, "etcdscope", 3*time.Minute)
	t.Logf("etcdscope container %.12s running after %v", scopeID, time.Since(start).Round(time.Second))
	listen := expandListen(t, sock, scopeID, pod)
	// [IPv4]:port is what serve takes; a URL wants brackets for IPv6 only.
	host, port, err := net.SplitHostPort(listen)
	must(t, err)
	listen = net.JoinHostPort(host, port)
	metricsURL := "http://" + listen + "/metrics"
	waitHTTP(t, td, "http://"+listen+"/healthz", 2*time.Minute)
	t.Logf("etcdscope serves %s", metricsURL)

	// The oracle: etcd's own WAL fsync count, before and after a put load.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	must(t, err)
	defer cli.Close()
	settle := func() (etcd, scope float64) {
		// Wait until both counts stop moving (bbolt's and the WAL's
		// background syncs, etcdscope's ring buffer drained).
		var le, ls float64 = -1, -1
		for i := 0; i < 30; i++ {
			etcd = scrapeSum(t, "http://127.0.0.1:2381/metrics", "etcd_disk_wal_fsync_duration_seconds_count", nil)
			scope = scrapeSum(t, metricsURL, "etcdscope_fsync_duration_seconds_count", map[string]string{"comm": "etcd", "file_kind": "wal", "device": device})
			if etcd == le && scope == ls && scope == etcd {
				return
			}
			le, ls = etcd, scope
			time.Sleep(time.Second)
		}
		return
	}
	e0, s0 := settle()
	const puts = 300
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < puts; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/node-test/%d", i), strings.Repeat("x", 2048)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	e1, s1 := settle()
	de, ds2 := e1-e0, s1-s0
	t.Logf("after %d puts: etcd_disk_wal_fsync_duration_seconds_count +%v, etcdscope_fsync_duration_seconds_count{comm=etcd,file_kind=wal,device=%s} +%v", puts, de, device, ds2)
	if de < puts/2 {
		t.Errorf("etcd counted %v WAL fsyncs for %d puts", de, puts)
	}
	if ds2 != de {
		t.Errorf("etcdscope counted %v WAL fdatasyncs of etcd, etcd counted %v", ds2, de)
	}
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
		"--cert-dir", filepath.Join(dirs["kubelet"], "pki"), "--hostname-override", "etcdscope-node", "--v", "2")
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
func kubeadmEtcd(image, data string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels:
    component: etcd
    tier: control-plane
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: http://127.0.0.1:2379
spec:
  containers:
  - name: etcd
    image: %s
    imagePullPolicy: IfNotPresent
    command:
    - etcd
    - --advertise-client-urls=http://127.0.0.1:2379
    - --data-dir=/var/lib/etcd
    - --feature-gates=InitialCorruptCheck=true
    - --initial-advertise-peer-urls=http://127.0.0.1:2380
    - --initial-cluster=etcdscope-node=http://127.0.0.1:2380
    - --listen-client-urls=http://127.0.0.1:2379
    - --listen-metrics-urls=http://127.0.0.1:2381
    - --listen-peer-urls=http://127.0.0.1:2380
    - --name=etcdscope-node
    - --snapshot-count=10000
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
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  volumes:
  - hostPath: {path: %s, type: DirectoryOrCreate}
    name: etcd-data
`, image, data))
}

type task struct{ id, status string }

func tasks(sock string) map[string]task {
	out, _ := ctr(sock, "tasks", "ls")
	m := map[string]task{}
	for _, l := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) == 3 {
			m[f[0]] = task{f[0], f[2]}
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
		out, _ := ctr(sock, "containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.container.name"==%s`, name))
		ts := tasks(sock)
		for _, id := range strings.Fields(out) {
			if ts[id].status == "RUNNING" {
				return id
			}
		}
		time.Sleep(time.Second)
	}
	td.dumpLogs()
	t.Fatalf("no running %s container after %v", name, d)
	return ""
}

// expandListen is the etcdscope container's --listen address from the
// manifest with $(NODE_IP) replaced by what the kubelet put in the
// container's environment (status.hostIP).
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
			return strings.ReplaceAll(v, "$(NODE_IP)", nodeIP)
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
	dumped                bool
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
