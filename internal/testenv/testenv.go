// Package testenv decides whether a test that needs the kernel (root, BPF,
// tracefs) or an external program (fio, etcd) can run here.
//
// Without ETCDSCOPE_REQUIRE_BPF=1 a missing capability or program skips the
// test, so `go test ./...` works for anyone. CI sets ETCDSCOPE_REQUIRE_BPF=1,
// and then the same absence fails the test: a privileged test never passes
// in CI by being skipped.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Required reports whether ETCDSCOPE_REQUIRE_BPF=1 is set (CI): missing
// privileges or programs then fail tests instead of skipping them.
func Required() bool { return os.Getenv("ETCDSCOPE_REQUIRE_BPF") == "1" }

// Missing skips or fails t with why, depending on Required: for anything
// a test needs from the host that the test cannot make itself (an IPv6
// loopback, ext4 under /var/tmp, io_uring enabled).
func Missing(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("ETCDSCOPE_REQUIRE_BPF=1 but %s", why)
	}
	t.Skipf("skipping: %s (set ETCDSCOPE_REQUIRE_BPF=1 to make this a failure)", why)
}

// RequireRoot skips (or fails, under ETCDSCOPE_REQUIRE_BPF=1) unless the test
// runs as root on Linux with BTF at /sys/kernel/btf/vmlinux: what loading,
// attaching and mounting need.
func RequireRoot(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		Missing(t, "not Linux")
	}
	if os.Geteuid() != 0 {
		Missing(t, "not root (BPF, tracefs and loop devices need it)")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		Missing(t, "no kernel BTF at /sys/kernel/btf/vmlinux")
	}
}

// LookPath returns the path of program name, or skips (fails under
// ETCDSCOPE_REQUIRE_BPF=1) naming the Debian package that provides it.
func LookPath(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" not found (apt-get install "+debianPackage+")")
	}
	return p
}

// RepoRoot returns the directory holding go.mod, found by walking up from
// the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// EtcdBinary returns the etcd server binary built by `make etcd`
// (bin/etcd, pinned in tools/etcd/go.mod) or named by $ETCDSCOPE_ETCD;
// it skips (fails under ETCDSCOPE_REQUIRE_BPF=1) when neither exists.
func EtcdBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ETCDSCOPE_ETCD"); p != "" {
		return p
	}
	p := filepath.Join(RepoRoot(t), "bin", "etcd")
	if _, err := os.Stat(p); err != nil {
		Missing(t, "no etcd binary at "+p+" (run 'make etcd')")
	}
	return p
}

// PlantLink makes, in a fresh sticky world-writable directory of dir, a
// symbolic link to target owned by uid 65534: a link another user planted
// in /tmp. It returns the link's path. Root only.
func PlantLink(t testing.TB, dir, target string) string {
	t.Helper()
	sticky := filepath.Join(dir, "sticky")
	if err := os.Mkdir(sticky, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(sticky, "planted")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return link
}
