package exporter

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

const (
	testUID = "0f2c6d3e-9b1a-4c7d-8e5f-1a2b3c4d5e6f"
	testCID = "3b1f0c9d8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c"
)

func TestPodFromCgroup(t *testing.T) {
	sysUID := strings.ReplaceAll(testUID, "-", "_")
	for _, c := range []struct {
		path string
		want PodLabels
	}{
		// systemd cgroup driver, containerd (kubeadm's default).
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sysUID + ".slice/cri-containerd-" + testCID + ".scope", PodLabels{testUID, testCID}},
		// Guaranteed QoS: no QoS slice. CRI-O.
		{"/kubepods.slice/kubepods-pod" + sysUID + ".slice/crio-" + testCID + ".scope", PodLabels{testUID, testCID}},
		// cgroupfs driver (kubelet --cgroup-driver=cgroupfs), v1 or v2.
		{"/kubepods/besteffort/pod" + testUID + "/" + testCID, PodLabels{testUID, testCID}},
		// docker through cri-dockerd.
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sysUID + ".slice/docker-" + testCID + ".scope", PodLabels{testUID, testCID}},
		// A static pod (kubeadm's etcd): its UID is the kubelet's hash of
		// the manifest, 32 hex digits (seen under a kubelet's cgroupfs
		// driver with cgroupRoot /etcdscope-node in make node-test).
		{"/etcdscope-node/kubepods/burstable/pod99f239eee75c2ca0550fdd07ec836f4f/" + testCID, PodLabels{"99f239eee75c2ca0550fdd07ec836f4f", testCID}},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod99f239eee75c2ca0550fdd07ec836f4f.slice/cri-containerd-" + testCID + ".scope", PodLabels{"99f239eee75c2ca0550fdd07ec836f4f", testCID}},
		// The pod's own cgroup (a process in no container of it).
		{"/kubepods/burstable/pod" + testUID, PodLabels{testUID, ""}},
		// Outside Kubernetes: etcd under systemd, a login session.
		{"/system.slice/etcd.service", PodLabels{}},
		{"/user.slice/user-0.slice/session-1.scope", PodLabels{}},
		// Not a UID: not taken.
		{"/kubepods/burstable/podnotauid/" + testCID, PodLabels{}},
		{"/kubepods/burstable/pod99f239eee75c2ca0550fdd07ec836f4/" + testCID, PodLabels{}},
	} {
		if got := PodFromCgroup(c.path); got != c.want {
			t.Errorf("PodFromCgroup(%q) = %+v, want %+v", c.path, got, c.want)
		}
	}
}

// fakeProc writes <root>/<pid>/cgroup files.
func fakeProc(t *testing.T, root string, pid int, content string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPodResolverBounded: labels from cgroup v2 and v1 files, empty for a
// host process and a missing one, and never more than MaxPodSeries
// distinct pairs: the rest fold into "other".
func TestPodResolverBounded(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 10, "0::/kubepods/burstable/pod"+testUID+"/"+testCID+"\n")
	fakeProc(t, root, 11, "12:pids:/kubepods/besteffort/pod"+testUID+"/"+testCID+"\n1:name=systemd:/kubepods/besteffort/pod"+testUID+"/"+testCID+"\n")
	fakeProc(t, root, 12, "0::/system.slice/etcd.service\n")
	r := NewPodResolver(root)
	for pid, want := range map[uint32]PodLabels{10: {testUID, testCID}, 11: {testUID, testCID}, 12: {}, 99: {}} {
		if got := r.Lookup(pid, false); got != want {
			t.Errorf("pid %d: %+v, want %+v", pid, got, want)
		}
	}
	for i := range MaxPodSeries + 5 {
		uid := fmt.Sprintf("%08x-0000-0000-0000-%012x", i, i)
		fakeProc(t, root, 1000+i, "0::/kubepods/pod"+uid+"/"+strings.Repeat("a", 64)+"\n")
	}
	distinct := map[PodLabels]bool{}
	for i := range MaxPodSeries + 5 {
		distinct[r.Lookup(uint32(1000+i), false)] = true
	}
	// testUID's pair, then MaxPodSeries-1 new ones, then "other".
	if len(distinct) != MaxPodSeries || !distinct[OtherPod] || r.overflow != 6 {
		t.Errorf("%d distinct label pairs (other: %v), overflow %d; want %d with other, overflow 6", len(distinct), distinct[OtherPod], r.overflow, MaxPodSeries)
	}
	// The cache expires: a pid reused by another pod's process is re-read.
	now := time.Now()
	r.now = func() time.Time { return now.Add(podCacheTTL + time.Second) }
	fakeProc(t, root, 10, "0::/system.slice/etcd.service\n")
	if got := r.Lookup(10, false); got != (PodLabels{}) {
		t.Errorf("after the TTL, pid 10 re-read: %+v, want none", got)
	}
}

// TestObserveFsyncPodLabels: with pod labels on, fsync_duration_seconds
// carries the caller's pod and container; the layer histogram does not.
func TestObserveFsyncPodLabels(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 4242, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(testUID, "-", "_")+".slice/cri-containerd-"+testCID+".scope\n")
	m := NewMetrics()
	m.EnablePodLabels(NewPodResolver(root))
	rec := walRecord(2_000_000, 1)
	rec.PID = 4242
	m.ObserveFsync(&rec)
	rec.PID = 1 // not in the fake /proc: no pod
	m.ObserveFsync(&rec)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if n := testutil.CollectAndCount(m, "etcdscope_fsync_duration_seconds"); n != 2 {
		t.Errorf("%d fsync_duration_seconds series, want 2 (one pod, one host)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "etcdscope_fsync_duration_seconds":
				if labels["pod_uid"] == testUID && labels["container_id"] == testCID {
					found = true
				}
			case "etcdscope_fsync_layer_duration_seconds":
				if _, ok := labels["pod_uid"]; ok {
					t.Errorf("layer histogram has pod_uid")
				}
			}
		}
	}
	if !found {
		t.Error("no fsync_duration_seconds series with the pod's UID and container ID")
	}
}

// TestPodResolverRealCgroup: a real process moved into a cgroup v2
// directory named as the kubelet names them (kubepods/burstable/pod<uid>/
// <container id>) is resolved from the real /proc (root).
func TestPodResolverRealCgroup(t *testing.T) {
	testenv.RequireRoot(t)
	var base string
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if unix.Statfs(d, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			base = d
			break
		}
	}
	if base == "" {
		// A host with only cgroup v1 controllers (this one): a cgroup v2
		// hierarchy of our own holds no controller, but a process moved
		// into it shows the kubelet's path on /proc/PID/cgroup's 0:: line,
		// which is all the resolver reads.
		base = t.TempDir()
		if err := unix.Mount("none", base, "cgroup2", 0, ""); err != nil {
			testenv.Missing(t, fmt.Sprintf("no cgroup v2 hierarchy mounted, and mounting one: %v", err))
		}
		t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
	}
	// A unique top directory: other tests may run at the same time.
	top := filepath.Join(base, fmt.Sprintf("kubepods-etcdscope-test-%d", os.Getpid()))
	dir := filepath.Join(top, "burstable", "pod"+testUID, testCID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		for d := dir; len(d) >= len(top); d = filepath.Dir(d) {
			os.Remove(d)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	got := NewPodResolver("/proc").Lookup(uint32(cmd.Process.Pid), false)
	if got != (PodLabels{testUID, testCID}) {
		t.Errorf("pid %d in %s: %+v; /proc/PID/cgroup:\n%s", cmd.Process.Pid, dir, got, b)
	}
}

// TestPodSeriesExpire: a full set of pod pairs frees the place of one
// unseen for SeriesTTL (they were never pruned: the first 32 pods a node
// ever ran held the label for good); a kept process's pod takes the place
// of the least recently seen unkept pair at once.
func TestPodSeriesExpire(t *testing.T) {
	root := t.TempDir()
	r := NewPodResolver(root)
	now := time.Now()
	r.now = func() time.Time { return now }
	pod := func(i int) PodLabels {
		uid := fmt.Sprintf("%08x-0000-0000-0000-%012x", i, i)
		fakeProc(t, root, 1000+i, "0::/kubepods/pod"+uid+"/"+strings.Repeat("a", 64)+"\n")
		return PodLabels{uid, strings.Repeat("a", 64)}
	}
	for i := range MaxPodSeries {
		pod(i)
		r.Lookup(uint32(1000+i), false)
	}
	want := pod(MaxPodSeries)
	if got := r.Lookup(uint32(1000+MaxPodSeries), false); got != OtherPod {
		t.Fatalf("a new pod at the bound: %+v, want other", got)
	}
	want = pod(MaxPodSeries + 1)
	if got := r.Lookup(uint32(1000+MaxPodSeries+1), true); got != want {
		t.Errorf("a kept process's new pod at the bound: %+v, want its own %+v", got, want)
	}
	now = now.Add(SeriesTTL + time.Second)
	want = pod(MaxPodSeries + 2)
	if got := r.Lookup(uint32(1000+MaxPodSeries+2), false); got != want {
		t.Errorf("after SeriesTTL a new pod: %+v, want its own %+v", got, want)
	}
	if len(r.series) > MaxPodSeries {
		t.Errorf("%d pod pairs, bound %d", len(r.series), MaxPodSeries)
	}
}
