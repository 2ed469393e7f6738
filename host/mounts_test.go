package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestParseMountinfo: proc(5)'s example line, optional fields, an escaped
// space in the mount point, and the source after the filesystem type.
func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Mount
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue", Mount{event.MkDev(98, 0), "/mnt2", "ext3", "/dev/root"}},
		{"29 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw", Mount{event.MkDev(254, 0), "/", "ext4", "/dev/vda"}},
		{`40 29 0:44 / /var/my\040dir rw - xfs /dev/loop3 rw`, Mount{event.MkDev(0, 44), "/var/my dir", "xfs", "/dev/loop3"}},
	} {
		got, ok := parseMountinfo(tc.line)
		if !ok || got != tc.want {
			t.Errorf("parseMountinfo(%q) = %+v, %v; want %+v", tc.line, got, ok, tc.want)
		}
	}
	if _, ok := parseMountinfo("29 1 254:0 / / rw"); ok {
		t.Error("a line without the separator parsed")
	}
}

// TestFSTypeOf: /proc/self (a symlink into /proc) is on proc, the longest
// mount point above it, not on / beneath; a missing path is an error.
func TestFSTypeOf(t *testing.T) {
	got, err := FSTypeOf("/proc/self")
	if err != nil || got != "proc" {
		t.Errorf("FSTypeOf(/proc/self) = %q, %v; want proc", got, err)
	}
	if _, err := FSTypeOf("/no/such/path"); err == nil {
		t.Error("FSTypeOf of a missing path: no error")
	}
}

// TestCgroup2Mount: this project's test host's mountinfo (cgroup v1
// hierarchies under /sys/fs/cgroup, a tmpfs, and cgroup2 at
// /sys/fs/cgroup/unified) names the unified one; without that line (v1
// only) there is none.
func TestCgroup2Mount(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string
		ok   bool
	}{{"testdata/mountinfo-hybrid", "/sys/fs/cgroup/unified", true}, {"testdata/mountinfo-v1", "", false}} {
		ms, err := MountsIn(tc.file)
		if err != nil || len(ms) < 10 {
			t.Fatalf("%s: %d mounts, %v", tc.file, len(ms), err)
		}
		if got, ok := Cgroup2Mount(ms); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tc.file, got, ok, tc.want, tc.ok)
		}
	}
}

// TestOpenFileFSTypes: a child holding two files in the test's temporary
// directory and one in /dev/shm (tmpfs) besides /dev/null: the types are
// those FSTypeOf gives for them, each once; with keep, only the kept
// files' (the tmpfs one left out); a child holding no regular file is an
// error, not "none".
func TestOpenFileFSTypes(t *testing.T) {
	open := func(path string) *os.File {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close(); os.Remove(path) })
		return f
	}
	dir := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "etcdscope-host-test")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	files := []*os.File{open(filepath.Join(dir, "a.wal")), open(filepath.Join(shm, "db")), open(filepath.Join(dir, "b.wal"))}
	var want []string
	for _, d := range []string{dir, shm} {
		ft, err := FSTypeOf(d)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(want, ft) {
			want = append(want, ft)
		}
	}
	child := func(extra []*os.File) int {
		cmd := exec.Command("sleep", "30")
		cmd.ExtraFiles = extra
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	pid := child(files)
	got, err := OpenFileFSTypes(pid, nil)
	slices.Sort(got)
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("OpenFileFSTypes = %v, %v; want %v", got, err, want)
	}
	wals := func(path string) bool { return strings.HasSuffix(path, ".wal") }
	if got, err := OpenFileFSTypes(pid, wals); err != nil || !slices.Equal(got, []string{mustFSType(t, dir)}) {
		t.Errorf("OpenFileFSTypes(the .wal files) = %v, %v; want [%s]", got, err, mustFSType(t, dir))
	}
	if got, err := OpenFileFSTypes(child(nil), nil); err == nil {
		t.Errorf("a process with no regular file open: %v, no error", got)
	}
}

func mustFSType(t *testing.T, path string) string {
	t.Helper()
	ft, err := FSTypeOf(path)
	if err != nil {
		t.Fatal(err)
	}
	return ft
}
