package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// writeIOPSLimit makes a block-I/O cgroup whose tasks may issue at most
// iops write requests per second to disk dev ("MAJ:MIN"): cgroup v2's
// io.max where the unified hierarchy has the io controller, else v1's
// blkio.throttle.write_iops_device. It returns the cgroup's directory,
// removed at cleanup (after the tasks in it have exited).
func writeIOPSLimit(t *testing.T, dev string, iops int) string {
	t.Helper()
	name := fmt.Sprintf("etcdscope-e2e-iops-%d", os.Getpid())
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		b, err := os.ReadFile(root + "/cgroup.controllers")
		if err != nil || !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " io ") {
			continue
		}
		if err := os.WriteFile(root+"/cgroup.subtree_control", []byte("+io"), 0o644); err != nil {
			t.Fatalf("enable the io controller under %s: %v", root, err)
		}
		return makeCgroup(t, filepath.Join(root, name), "io.max", fmt.Sprintf("%s wiops=%d", dev, iops))
	}
	v1 := "/sys/fs/cgroup/blkio"
	if _, err := os.Stat(v1 + "/blkio.throttle.write_iops_device"); err != nil {
		t.Fatal("no cgroup io controller (v2 io.max or v1 blkio.throttle): the kernel lacks CONFIG_BLK_DEV_THROTTLING")
	}
	return makeCgroup(t, filepath.Join(v1, name), "blkio.throttle.write_iops_device", fmt.Sprintf("%s %d", dev, iops))
}

func makeCgroup(t *testing.T, dir, file, value string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		t.Fatalf("%s/%s = %q: %v", dir, file, value, err)
	}
	return dir
}

// TestFsyncFailOverBudgetSlowDisk is the disk-qualification gate on a
// disk made slow on purpose: ext4 on a loop device whose writes the block
// layer's throttle holds to 20 requests/s for the cgroup etcdscope runs
// in, so each WAL fdatasync (an append and two flushes) takes about 100
// ms. `etcdscope fsync --workload wal --fail-over-budget` must exit 3 with
// a line saying why; the oracle is the workload's own userspace timing of
// the same calls, which must put the p99 over 10 ms too. Without the flag
// the same run exits 0: the code is opt-in.
func TestFsyncFailOverBudgetSlowDisk(t *testing.T) {
	testenv.RequireRoot(t)
	dev := loopDevice(t, "/var/tmp", 256<<20)
	b, err := os.ReadFile("/sys/class/block/" + filepath.Base(dev) + "/dev")
	if err != nil {
		t.Fatal(err)
	}
	mnt := mountFS(t, dev, "ext4", "-q", "-F")
	cg := writeIOPSLimit(t, strings.TrimSpace(string(b)), 20)
	userP99 := regexp.MustCompile(`fdatasync as timed in userspace: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms`)
	for _, c := range []struct {
		flag bool
		rc   int
	}{{true, 3}, {false, 0}} {
		args := []string{"fsync", "--workload", "wal", "--dir", mnt, "--duration", "4s", "--interval", "0"}
		if c.flag {
			args = append(args, "--fail-over-budget")
		}
		// In the cgroup: the workload's writes and flushes are throttled.
		cmd := etcdscopeIn(t, cg, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		rc := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			rc = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		m := userP99.FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("--fail-over-budget=%v: no userspace timing in the output (exit %d):\n%s\n%s", c.flag, rc, stdout.String(), stderr.String())
		}
		p99, _ := strconv.ParseFloat(m[2], 64)
		verdict := regexp.MustCompile(`(?m)^\s*verdict: OVER BUDGET.*$`).FindString(stdout.String())
		t.Logf("--fail-over-budget=%v: exit %d; userspace fdatasync p50 %s ms, p99 %s ms; %s", c.flag, rc, m[1], m[2], strings.TrimSpace(verdict))
		if p99 <= 10 {
			t.Fatalf("the throttled disk was not slow: userspace fdatasync p99 %.3f ms, want over 10 ms", p99)
		}
		if rc != c.rc || verdict == "" {
			t.Errorf("--fail-over-budget=%v: exit %d, want %d; verdict line %q\n%s", c.flag, rc, c.rc, verdict, stderr.String())
		}
		if c.flag && !strings.Contains(stderr.String(), "over budget (10ms)") {
			t.Errorf("exit 3 without a line saying why on stderr: %q", stderr.String())
		}
	}
}
