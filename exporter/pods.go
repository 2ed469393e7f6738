package exporter

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the pod labels: distinct (pod_uid, container_id) pairs
// exported before the rest share "other", and processes remembered.
const (
	MaxPodSeries    = 32
	maxPodCachePIDs = 4096
	podCacheTTL     = 30 * time.Second
)

// PodLabels are the Kubernetes identity of a process, read from its cgroup
// path: the pod's UID and the container's ID (64 hex digits). Both are
// empty for a process outside a Kubernetes pod (etcd under systemd).
type PodLabels struct {
	PodUID      string
	ContainerID string
}

var (
	// kubelet's pod cgroup: "pod<uid>" (cgroupfs driver) or
	// "kubepods-burstable-pod<uid with _>.slice" (systemd driver). A
	// static pod's UID (kubeadm's etcd) is the kubelet's hash of its
	// manifest, 32 hex digits without dashes (the mirror pod's
	// kubernetes.io/config.hash annotation), not a UUID.
	podUIDRe = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?(?:/|$)`)
	// The container's own cgroup, the last component: "<id>" (cgroupfs),
	// or "<runtime>-<id>.scope" (systemd: cri-containerd, crio, docker).
	containerIDRe = regexp.MustCompile(`^(?:[a-z-]+-)?([0-9a-f]{64})(?:\.scope)?$`)
)

// PodFromCgroup reads the pod UID and container ID from one cgroup path as
// /proc/PID/cgroup lists it, e.g.
//
//	/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c…_8a.slice/cri-containerd-3b1f….scope
//	/kubepods/besteffort/pod0f2c…-8a/3b1f…
//
// It needs no API server: the kubelet names the cgroups. Names (pod,
// namespace) are not in the path and are not guessed. A path outside
// kubepods gives empty labels.
func PodFromCgroup(path string) PodLabels {
	if !strings.Contains(path, "kubepods") {
		return PodLabels{}
	}
	var l PodLabels
	if m := podUIDRe.FindStringSubmatch(path); m != nil {
		l.PodUID = strings.ReplaceAll(m[1], "_", "-")
	}
	if l.PodUID != "" {
		if m := containerIDRe.FindStringSubmatch(filepath.Base(path)); m != nil {
			l.ContainerID = m[1]
		}
	}
	return l
}

// PodResolver maps process IDs to their PodLabels through
// <procRoot>/<pid>/cgroup (world-readable: no ptrace access needed), with
// a bounded cache and a bounded set of distinct label values. Safe for
// concurrent use.
type PodResolver struct {
	procRoot string
	now      func() time.Time

	mu    sync.Mutex
	cache map[uint32]podCacheEntry
	// series: every pair exported, with when it was last looked up and
	// whether a kept comm's process had it (Lookup's keep).
	series map[PodLabels]podSeries
	// Overflow counts lookups folded into "other" because MaxPodSeries
	// distinct pairs were already exported.
	overflow uint64
}

type podSeries struct {
	seen time.Time
	kept bool
}

type podCacheEntry struct {
	l  PodLabels
	at time.Time
}

// OtherPod is what a process gets once MaxPodSeries distinct pods and
// containers have been seen: the label set stays bounded.
var OtherPod = PodLabels{PodUID: "other", ContainerID: "other"}

// NewPodResolver reads cgroup paths under procRoot ("/proc"; with
// hostPID the host's processes).
func NewPodResolver(procRoot string) *PodResolver {
	return &PodResolver{procRoot: procRoot, now: time.Now, cache: map[uint32]podCacheEntry{}, series: map[PodLabels]podSeries{}}
}

// Lookup returns pid's labels: empty outside a pod or when the process is
// gone, OtherPod past the bound. keep marks a process of a comm the
// operator asked to watch (serve --comm, etcd by default): at the bound its
// pod takes the place of a pair unseen for SeriesTTL, else of the one seen
// least recently that no kept process had, so pods any local user can make
// (one-shot processes in containers of their own) never push etcd's pod
// into "other".
func (r *PodResolver) Lookup(pid uint32, keep bool) PodLabels {
	now := r.now()
	r.mu.Lock()
	if e, ok := r.cache[pid]; ok && now.Sub(e.at) < podCacheTTL {
		r.mu.Unlock()
		return e.l
	}
	r.mu.Unlock()
	l := r.read(pid)
	r.mu.Lock()
	defer r.mu.Unlock()
	if l != (PodLabels{}) {
		if e, ok := r.series[l]; ok {
			r.series[l] = podSeries{seen: now, kept: e.kept || keep}
		} else if len(r.series) < MaxPodSeries || r.evictLocked(now, keep) {
			r.series[l] = podSeries{seen: now, kept: keep}
		} else {
			r.overflow++
			l = OtherPod
		}
	}
	if len(r.cache) >= maxPodCachePIDs {
		clear(r.cache)
	}
	r.cache[pid] = podCacheEntry{l, now}
	return l
}

// evictLocked frees a place in a full series set for a new pair: one
// unseen for SeriesTTL, or (keep) the least recently seen pair no kept
// process had. It reports whether it freed one. Its metric series expire
// on their own (Metrics.expire) once nothing is counted under them.
func (r *PodResolver) evictLocked(now time.Time, keep bool) bool {
	var victim PodLabels
	var oldest time.Time
	found := false
	for l, e := range r.series {
		if now.Sub(e.seen) > SeriesTTL {
			delete(r.series, l)
			return true
		}
		if keep && !e.kept && (!found || e.seen.Before(oldest)) {
			victim, oldest, found = l, e.seen, true
		}
	}
	if found {
		delete(r.series, victim)
		for pid, c := range r.cache { // its processes are looked up anew
			if c.l == victim {
				delete(r.cache, pid)
			}
		}
	}
	return found
}

// read finds the first kubepods cgroup path in /proc/PID/cgroup (one
// "0::" line on cgroup v2; a line per hierarchy on v1).
func (r *PodResolver) read(pid uint32) PodLabels {
	f, err := os.Open(filepath.Join(r.procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return PodLabels{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, path, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if _, path, ok = strings.Cut(path, ":"); ok {
			if l := PodFromCgroup(path); l.PodUID != "" {
				return l
			}
		}
	}
	return PodLabels{}
}

// EnablePodLabels adds the labels pod_uid and container_id to
// etcdscope_fsync_duration_seconds, filled by r from each call's PID
// (serve --pod-labels). Call it before the first observation. Only that
// histogram gets them: the layer split per pod would multiply its series
// by six.
func (m *Metrics) EnablePodLabels(r *PodResolver) {
	m.fsyncMu.Lock()
	defer m.fsyncMu.Unlock()
	m.pods = r
	m.fsyncDuration = durationHistogram("fsync_duration_seconds",
		"Wall time of fsync/fdatasync calls, syscall entry to exit (tracepoints syscalls:sys_enter/exit_f(data)sync); pod_uid and container_id from the calling process's cgroup (serve --pod-labels).",
		"comm", "device", "fs", "file_kind", "syscall", "pod_uid", "container_id")
}

// fsyncDurationObserver returns the fsync_duration_seconds child for a
// call's labels, with the pod labels when they are on.
func (m *Metrics) fsyncDurationObserver(comm, dev, fs, kind, syscall string, pod PodLabels) prometheus.Observer {
	if m.pods == nil {
		return m.fsyncDuration.WithLabelValues(comm, dev, fs, kind, syscall)
	}
	return m.fsyncDuration.WithLabelValues(comm, dev, fs, kind, syscall, pod.PodUID, pod.ContainerID)
}
