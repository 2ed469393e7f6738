package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted ("" when
// it is not): this machine mounts it at /sys/fs/cgroup/unified beside the
// v1 controllers, a cgroup v2 host at /sys/fs/cgroup.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 25 0:30 / /sys/fs/cgroup/unified rw,... shared:9 - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if fields := strings.Fields(pre); ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return fields[4]
		}
	}
	return ""
}

// podCgroup makes <base>/<qos>/pod<uid>/<container id> in the cgroup v2
// hierarchy, the path a kubelet with the cgroupfs driver gives a
// container, and returns its directory; removed at cleanup (after the
// processes in it are killed: t.Cleanup runs last-in first-out).
func podCgroup(t *testing.T, base, qos, uid, cid string) string {
	t.Helper()
	dir := filepath.Join(base, qos, "pod"+uid, cid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for d := dir; d != filepath.Dir(base); d = filepath.Dir(d) {
			os.Remove(d) // fails while a sibling remains: the last one removes the parent
		}
	})
	return dir
}

// startInCgroup starts cmd as the first process of the cgroup dir
// (clone3's CLONE_INTO_CGROUP: it never runs outside it), killed and
// reaped at cleanup.
func startInCgroup(t *testing.T, cmd *exec.Cmd, dir string) {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// TestServeKeepsEtcdsPod (issue 25: "every bounded label set filled by
// another user first"), live: 40 pods of another tenant (uid 65534, each
// fdatasyncing every 20 ms in a container cgroup of its own, as a kubelet
// lays them out) fill serve --pod-labels' MaxPodSeries pairs before etcd's
// pod writes its first fdatasync. Every fdatasync of comm etcd must still
// be counted under etcd's own pod_uid and container_id, none under
// pod_uid="other"; and the squatters must have overflowed into "other"
// (else the test did not test). The rule is exporter.PodResolver.Lookup's
// keep; TestOperatorsCommKeepsItsSeries checks it on a fake /proc.
func TestServeKeepsEtcdsPod(t *testing.T) {
	testenv.RequireRoot(t)
	cg2 := cgroup2Mount(t)
	if cg2 == "" {
		// None mounted (a v1-only host): mount the hierarchy for the test;
		// it exists, with no controllers, whatever v1 holds.
		cg2 = t.TempDir()
		if err := syscall.Mount("none", cg2, "cgroup2", 0, ""); err != nil {
			testenv.Missing(t, "no cgroup v2 hierarchy, and mounting one failed: "+err.Error())
		}
		t.Cleanup(func() { syscall.Unmount(cg2, syscall.MNT_DETACH) })
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(cg2, fmt.Sprintf("etcdscope-test-kubepods-%d", os.Getpid()))
	squatters := exporter.MaxPodSeries + 8
	addr, _ := startServe(t, self, "--pod-labels", "--listen", "127.0.0.1:0", "--port", "23819")

	for i := range squatters {
		uid := fmt.Sprintf("%08x-5157-4a7e-8000-%012x", i, i)
		dir := podCgroup(t, base, "besteffort", uid, fmt.Sprintf("%064x", i+1))
		child := fsyncer(t, self, 65534, true, fmt.Sprintf("squat%02d", i))
		startInCgroup(t, child, dir)
	}
	// The set is full: MaxPodSeries pairs and "other" counted.
	var pods map[[3]string]float64
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			pods = podCounts(t, addr)
			if done() {
				return
			}
			if time.Now().After(deadline) {
				etcdSeries := map[[3]string]float64{}
				for k, n := range pods {
					if k[0] == "etcd" {
						etcdSeries[k] = n
					}
				}
				t.Fatalf("%s within 15 s: %d series; comm=etcd by (comm, pod_uid, container_id): %v", what, len(pods), etcdSeries)
			}
		}
	}
	distinct := func(comm string) (pairs int, other float64) {
		for k, n := range pods {
			if comm != "" && k[0] != comm {
				continue
			}
			if k[1] == exporter.OtherPod.PodUID {
				other += n
			} else if k[1] != "" {
				pairs++
			}
		}
		return pairs, other
	}
	waitFor("the squatters did not fill the pod series", func() bool {
		pairs, other := distinct("")
		return pairs == exporter.MaxPodSeries && other > 0
	})

	const etcdPod = "0f2c4e6a-e7cd-4b2a-9c3d-444455556666"
	etcdCID := strings.Repeat("e", 64)
	dir := podCgroup(t, base, "burstable", etcdPod, etcdCID)
	etcd := fsyncer(t, self, 0, true, "etcd")
	startInCgroup(t, etcd, dir)
	etcdKey := [3]string{"etcd", etcdPod, etcdCID}
	waitFor("etcd's pod not counted", func() bool { return pods[etcdKey] >= 10 })

	pairs, other := distinct("")
	_, etcdOther := distinct("etcd")
	t.Logf("after %d squatter pods: etcd's pod %v fdatasyncs, comm=etcd under pod_uid=%q %v, %d pairs, %v under %q",
		squatters, pods[etcdKey], exporter.OtherPod.PodUID, etcdOther, pairs, other, exporter.OtherPod.PodUID)
	if etcdOther != 0 {
		t.Errorf("%v fdatasyncs of comm etcd counted under pod_uid=%q: etcd's pod lost its series to another tenant's pods", etcdOther, exporter.OtherPod.PodUID)
	}
	// etcd's pod displaced one squatter's pair; that pair's series stays
	// exported, no longer counted, until it expires (SeriesTTL): one more.
	if pairs > exporter.MaxPodSeries+1 {
		t.Errorf("%d (pod_uid, container_id) pairs exported, bound %d and the one etcd's pod displaced", pairs, exporter.MaxPodSeries)
	}
}

// podCounts scrapes serve's etcdscope_fsync_duration_seconds counts by
// (comm, pod_uid, container_id), parsed by expfmt.
func podCounts(t *testing.T, addr string) map[[3]string]float64 {
	t.Helper()
	body, err := get("http://"+addr+"/metrics", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[[3]string]float64{}
	fam := fams["etcdscope_fsync_duration_seconds"]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		var k [3]string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "comm":
				k[0] = l.GetValue()
			case "pod_uid":
				k[1] = l.GetValue()
			case "container_id":
				k[2] = l.GetValue()
			}
		}
		out[k] += float64(m.GetHistogram().GetSampleCount())
	}
	return out
}
