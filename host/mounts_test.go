package host

import (
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
