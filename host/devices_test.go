package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestWriteCache reads a disk's queue from a sysfs fixture laid out as the
// kernel's (/sys/dev/block/MAJ:MIN a link to the device's directory).
func TestWriteCache(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "devices", "virtual", "block", "nullb0")
	if err := os.MkdirAll(filepath.Join(dev, "queue"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dev, "queue", "write_cache"), []byte("write back\n"), 0o644)
	os.WriteFile(filepath.Join(dev, "queue", "fua"), []byte("1\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "dev", "block"), 0o755)
	if err := os.Symlink("../../devices/virtual/block/nullb0", filepath.Join(root, "dev", "block", "252:0")); err != nil {
		t.Fatal(err)
	}
	r := NewDeviceResolver()
	r.SysRoot = root
	c, err := r.WriteCache(event.MkDev(252, 0))
	if err != nil || c != (DiskCache{Name: "nullb0", WriteCache: "write back", FUA: true}) {
		t.Fatalf("WriteCache = %+v, %v", c, err)
	}
	if _, err := r.WriteCache(event.MkDev(8, 0)); err == nil {
		t.Error("a disk without sysfs entry: no error")
	}
}
