package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
