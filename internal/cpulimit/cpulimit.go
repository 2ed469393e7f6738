// Package cpulimit makes a cgroup whose tasks get a bounded share of the
// CPU: how the tests and make bench starve etcdscope's reader on purpose
// (issue 12's loss goal). Root only; it writes only inside cgroupfs, a
// kernel filesystem no other user can plant paths in.
package cpulimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoController is returned (wrapped) by Make when the kernel offers
// neither cgroup v2's cpu.max nor v1's cfs quota.
var ErrNoController = errors.New("no cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us)")

// Make creates cgroup name whose tasks get at most quotaUs of CPU per
// periodUs (µs; cgroup v2's cpu.max where the unified hierarchy has the
// cpu controller, else v1's cpu.cfs_quota_us/cfs_period_us) and returns
// its directory and a function that removes it (the cgroup must be empty
// by then). Errors: ErrNoController, or the mkdir/write that failed (the
// cgroup is removed again then).
func Make(name string, quotaUs, periodUs int) (dir string, remove func(), err error) {
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if b, err := os.ReadFile(root + "/cgroup.controllers"); err != nil || !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " cpu ") {
			continue
		}
		return create(filepath.Join(root, name), [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quotaUs, periodUs)}})
	}
	v1 := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(v1 + "/cpu.cfs_quota_us"); err != nil {
		return "", nil, ErrNoController
	}
	return create(filepath.Join(v1, name), [][2]string{{"cpu.cfs_period_us", strconv.Itoa(periodUs)}, {"cpu.cfs_quota_us", strconv.Itoa(quotaUs)}})
}

func create(dir string, files [][2]string) (string, func(), error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, err
	}
	remove := func() { os.Remove(dir) }
	for _, kv := range files {
		if err := os.WriteFile(filepath.Join(dir, kv[0]), []byte(kv[1]), 0o644); err != nil {
			remove()
			return "", nil, err
		}
	}
	return dir, remove, nil
}

// Throttled returns cgroup dir's nr_throttled from cpu.stat (v2 and v1
// alike): how many periods its tasks were stopped at the quota.
func Throttled(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "nr_throttled "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("%s/cpu.stat has no nr_throttled", dir)
}
