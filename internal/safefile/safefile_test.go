package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// victim makes a file a planted link will point at, and returns a check
// that it is unchanged.
func victim(t *testing.T) (string, func()) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, func() {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "precious\n" {
			t.Fatalf("victim changed: %q, %v", b, err)
		}
	}
}

func TestWriteFileReplacesPlantedLink(t *testing.T) {
	v, unchanged := victim(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	if err := os.Symlink(v, ready); err != nil {
		t.Fatal(err)
	}
	f, err := WriteFile(ready, []byte("123\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unchanged()
	st, err := os.Lstat(ready)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
		t.Fatalf("ready file: %v, %v; want a regular 0644 file", st.Mode(), err)
	}
	if b, _ := os.ReadFile(ready); string(b) != "123\n" {
		t.Fatalf("ready file holds %q", b)
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ready); !os.IsNotExist(err) {
		t.Fatalf("Remove left the file: %v", err)
	}
	unchanged()
}

func TestRemoveLeavesAReplacedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ready")
	f, err := WriteFile(p, []byte("1\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Remove(p)
	if err := os.WriteFile(p, []byte("someone else's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Remove()
	if b, err := os.ReadFile(p); err != nil || string(b) != "someone else's\n" {
		t.Fatalf("Remove deleted a file it did not place: %q, %v", b, err)
	}
}

func TestCloseWithoutCommitLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "page.html")
	if err := os.WriteFile(p, []byte("old page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half a page")); err != nil {
		t.Fatal(err)
	}
	f.Close() // a failed render
	f.Close() // idempotent
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries after an aborted write, want only the old page", len(ents))
	}
	if b, _ := os.ReadFile(p); string(b) != "old page\n" {
		t.Fatalf("old file changed: %q", b)
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, os.ModeSticky|0o777)
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "nosuch", "ready"), "does not exist"},
		{filepath.Join(file, "ready"), "not a directory"},
		{filepath.Join(open, "ready"), "writable by every user and not sticky"},
		{filepath.Join(sticky, "ready"), ""},
		{filepath.Join(dir, "ready"), ""},
	} {
		err := CheckDir(c.path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckDir(%s) = %v, want %q", c.path, err, c.want)
		}
	}
}

// TestPlantedDirectoryLink is the attack the issue found: in a sticky,
// world-writable directory like /tmp another user plants a link to a
// directory root writes in; root must not follow it.
func TestPlantedDirectoryLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant a link owned by another user")
	}
	v, unchanged := victim(t)
	tmp := t.TempDir()
	os.Chmod(tmp, os.ModeSticky|0o777)
	link := filepath.Join(tmp, "d")
	if err := os.Symlink(filepath.Dir(v), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(link, "victim")
	if err := CheckDir(target); err == nil || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") {
		t.Fatalf("CheckDir through a planted link = %v", err)
	}
	if f, err := WriteFile(target, []byte("owned\n"), 0o644); err == nil {
		f.Close()
		t.Fatal("WriteFile wrote through a planted link")
	}
	unchanged()
	// A link root owns (like /var/run -> /run) is followed.
	os.Lchown(link, 0, 0)
	f, err := WriteFile(filepath.Join(link, "other"), []byte("ok\n"), 0o644)
	if err != nil {
		t.Fatalf("WriteFile through root's own link: %v", err)
	}
	f.Close()
	unchanged()
}

func TestScratchRemovesStale(t *testing.T) {
	parent := t.TempDir()
	stale := filepath.Join(parent, "etcdscope-wal-123")
	if err := os.MkdirAll(filepath.Join(stale, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "member", "wal", "0.wal"), make([]byte, 4096), 0o600)
	v, unchanged := victim(t)
	planted := filepath.Join(parent, "etcdscope-wal-link")
	os.Symlink(filepath.Dir(v), planted)

	live, removed, err := NewScratch(parent, "etcdscope-wal-")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	if len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removed %v, want [%s]", removed, stale)
	}
	if _, err := os.Lstat(planted); err != nil {
		t.Fatalf("the planted link was touched: %v", err)
	}
	unchanged()
	st, err := os.Stat(live.Path)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("scratch mode %v, %v; want 0700", st.Mode(), err)
	}
	// A second run must not take the live run's scratch.
	other, removed, err := NewScratch(parent, "etcdscope-wal-")
	if err != nil {
		t.Fatal(err)
	}
	other.Remove()
	if len(removed) != 0 {
		t.Fatalf("a second run removed %v (the live run's scratch)", removed)
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Fatal(err)
	}
	live.Remove()
	if _, err := os.Stat(live.Path); !os.IsNotExist(err) {
		t.Fatalf("Remove left %s", live.Path)
	}
}
