package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
	"golang.org/x/sys/unix"
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

// TestWriteFileReplacesPlantedLink: a link another user (uid 65534)
// planted at the final name is replaced by the file, never written
// through.
func TestWriteFileReplacesPlantedLink(t *testing.T) {
	testenv.RequireRoot(t) // to plant a link owned by another user
	v, unchanged := victim(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	if err := os.Symlink(v, ready); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(ready, 65534, 65534); err != nil {
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
	// Someone else's regular file, and a FIFO (not a regular file at all),
	// put at the name after the ready file was written.
	for _, put := range []func(string) error{
		func(p string) error { return os.WriteFile(p, []byte("someone else's\n"), 0o644) },
		func(p string) error { return unix.Mkfifo(p, 0o644) },
	} {
		p := filepath.Join(t.TempDir(), "ready")
		f, err := WriteFile(p, []byte("1\n"), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if err := put(p); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(p)
		f.Remove()
		f.Close()
		if after, err := os.Lstat(p); err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Fatalf("Remove deleted or changed a file it did not place: %v, %v", after, err)
		}
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

// TestNeverReplacesADeviceNode: a device node (char 1:3, /dev/null's twin,
// made with mknod in the test's directory) and a link to it (as
// /dev/stdout links to /proc/self/fd/1) are refused by CheckDir, Create,
// WriteFile and Ready.Put, and are still what they were after. Before,
// Commit renamed a regular file over them.
func TestNeverReplacesADeviceNode(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "stdout")
	if err := os.Symlink(null, link); err != nil {
		t.Fatal(err)
	}
	refused(t, null, unix.S_IFCHR, "a character device")
	refused(t, link, unix.S_IFLNK, "a character device")
	var st unix.Stat_t
	if err := unix.Stat(link, &st); err != nil || st.Rdev != unix.Mkdev(1, 3) || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("%s: mode %o device %x (%v), want char 1:3", null, st.Mode, st.Rdev, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestNeverReplacesAFIFO: as TestNeverReplacesADeviceNode, for a FIFO
// (no root needed).
func TestNeverReplacesAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, fifo, unix.S_IFIFO, "a FIFO or pipe")
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// refused checks that every writer refuses p, naming kind, and that p is
// still of type typ after.
func refused(t *testing.T, p string, typ uint32, kind string) {
	t.Helper()
	if err := CheckDir(p); err == nil || !strings.Contains(err.Error(), kind+", not a regular file") {
		t.Errorf("CheckDir(%s) = %v, want a refusal naming %q", p, err, kind)
	}
	if f, err := Create(p, 0o644); err == nil {
		f.Close()
		t.Errorf("Create(%s) succeeded", p)
	}
	if f, err := WriteFile(p, []byte("x\n"), 0o644); err == nil {
		f.Close()
		t.Errorf("WriteFile(%s) succeeded", p)
	}
	r := NewReady(p)
	if err := r.Put("1\n"); err == nil {
		t.Errorf("Ready.Put(%s) succeeded", p)
	}
	r.Remove()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != typ {
		t.Errorf("%s: mode %o (%v), want type %o kept", p, st.Mode, err, typ)
	}
}

// TestCommitRefusesADeviceSwappedIn: a FIFO put at the final name after
// Create is still not replaced by Commit.
func TestCommitRefusesADeviceSwappedIn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	f, err := Create(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err == nil || !strings.Contains(err.Error(), "a FIFO or pipe") {
		t.Fatalf("Commit = %v, want a refusal", err)
	}
	if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%s: %v, %v; want the FIFO kept", p, st, err)
	}
}

// TestOwnLinkRefused (issue 25): a link root or we own at the final name
// (as /dev/stdout -> /proc/self/fd/1 is, with stdout redirected to a
// regular file) is refused by CheckDir, Create, WriteFile and Ready.Put
// with a line naming the fix, dangling or not, and stays the link it was,
// its target unchanged. Before, the rename replaced it: `report --html
// /dev/stdout > page.html` left /dev/stdout a regular file.
func TestOwnLinkRefused(t *testing.T) {
	v, unchanged := victim(t)
	dir := t.TempDir()
	for _, target := range []string{v, filepath.Join(dir, "nowhere")} {
		link := filepath.Join(dir, "stdout")
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "is a symbolic link (to "+target+"): give the file itself, or remove the link") {
				t.Errorf("%s of a link to %s: %v, want it refused naming the fix", what, target, err)
			}
		}
		check("CheckDir", CheckDir(link))
		f, err := Create(link, 0o644)
		if err == nil {
			f.Close()
		}
		check("Create", err)
		if f, err := WriteFile(link, []byte("x\n"), 0o644); err == nil {
			f.Close()
			t.Errorf("WriteFile of a link to %s: nil error", target)
		} else {
			check("WriteFile", err)
		}
		check("Ready.Put", NewReady(link).Put("x\n"))
		if got, err := os.Readlink(link); err != nil || got != target {
			t.Errorf("the link is now %q (%v), want a link to %s", got, err, target)
		}
		unchanged()
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("files left beside the link: %v", ents)
		}
	}
}
