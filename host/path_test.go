package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
)

// TestPathOneShortOfRoot: a directory four components deep (etcd's WAL
// directory under /tmp/d/member/wal), fsync'd through an fd closed since,
// is named by its absolute path, since the four d_names the probe kept
// name its inode from the root; a path deeper than that, or one whose
// inode differs, keeps its ".../".
func TestPathOneShortOfRoot(t *testing.T) {
	d, err := os.MkdirTemp("/tmp", "pathtest")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(d)
	wal := filepath.Join(d, "member", "wal")
	if err := os.MkdirAll(filepath.Join(wal, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(wal, &st); err != nil {
		t.Fatal(err)
	}
	names := []string{"wal", "member", filepath.Base(d), "tmp"}
	ev := event.Fsync{PID: uint32(os.Getpid()), FD: -1, Dev: event.DevFromUnix(st.Dev), Ino: st.Ino, Names: names}
	if got := NewPathResolver().Path(&ev); got != wal {
		t.Errorf("got %q, want %q", got, wal)
	}
	ev.Ino++ // another inode: not this path
	if got := NewPathResolver().Path(&ev); !strings.HasPrefix(got, ".../") {
		t.Errorf("another inode: got %q, want .../%s", got, strings.Join([]string{"tmp", filepath.Base(d), "member", "wal"}, "/"))
	}
	ev.Ino, ev.Names = st.Ino, []string{"wal", "member", filepath.Base(d), "tmp", "/"}
	if got := NewPathResolver().Path(&ev); got != wal {
		t.Errorf("rooted: got %q, want %q", got, wal)
	}
}
