package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestReadInputRefusesNonRegular: a FIFO with no writer (open and read
// would block forever), /dev/zero (never ends) and a directory are
// refused at once, naming what they are; a regular file over the bound is
// refused, one at the bound is read whole.
func TestReadInputRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, kind := range map[string]string{fifo: "a FIFO or pipe", "/dev/zero": "a character device", dir: "a directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadInput(p, MaxPEMBytes)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), kind+", not a regular file") {
				t.Errorf("ReadInput(%s) = %v, want a refusal naming %q", p, err, kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadInput(%s) still blocked after 5 s", p)
		}
	}
	exact := filepath.Join(dir, "exact")
	os.WriteFile(exact, make([]byte, 1024), 0o644)
	if b, err := ReadInput(exact, 1024); err != nil || len(b) != 1024 {
		t.Errorf("ReadInput of 1024 bytes, bound 1024: %d bytes, %v", len(b), err)
	}
	if _, err := ReadInput(exact, 1023); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadInput of 1024 bytes, bound 1023: %v, want refused", err)
	}
}

// TestReadSecret: a file of secrets is read only when it is a regular
// file of at most the bound, owned by root or etcdscope's user, writable
// by no one else, and reached through no link another user planted;
// each refusal is one line naming the fix and never the content.
func TestReadSecret(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of another user")
	}
	const secret = "Bearer s3cret-0123456789"
	dir := t.TempDir()
	put := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("authorization="+secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := put("good", 0o600, 0)
	if b, err := ReadSecret(good, MaxSecretBytes); err != nil || !strings.Contains(string(b), secret) {
		t.Errorf("ReadSecret(0600 root) = %q, %v: want it read", b, err)
	}
	if _, err := ReadSecret(put("readable", 0o644, 0), MaxSecretBytes); err != nil {
		t.Errorf("ReadSecret(0644 root, a Kubernetes Secret's default) = %v: want it read", err)
	}
	rootLink := filepath.Join(dir, "rootlink") // a Kubernetes Secret volume: ..data/ links of root's
	if err := os.Symlink(good, rootLink); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecret(rootLink, MaxSecretBytes); err != nil {
		t.Errorf("ReadSecret(root's link to a good file) = %v: want it read", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := put("big", 0o600, 0)
	if err := os.Truncate(big, MaxSecretBytes+1); err != nil {
		t.Fatal(err)
	}
	planted := testenv.PlantLink(t, dir, good)
	for _, c := range []struct{ path, fix string }{
		{put("world", 0o666, 0), "writable by group or others (mode 0666): chmod go-w"},
		{put("group", 0o620, 0), "writable by group or others (mode 0620): chmod go-w"},
		{put("nobody", 0o600, 65534), "owned by uid 65534, not root: give a file of root's (chown root"},
		{zero, "a character device, not a regular file"},
		{fifo, "a FIFO or pipe, not a regular file"},
		{dir, "a directory, not a regular file"},
		{big, "larger than 64 KiB"},
		{planted, "symbolic link owned by uid 65534"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadSecret(c.path, MaxSecretBytes)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
				t.Errorf("ReadSecret(%s) = %v: want one line with %q, without the content", c.path, err, c.fix)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadSecret(%s) still blocked after 5 s", c.path)
		}
	}
}
