package tracer

import (
	"errors"
	"strings"
	"testing"
)

// TestNoBTF: without kernel BTF the check fails before anything is
// loaded, with an error naming the kernel option to turn on.
func TestNoBTF(t *testing.T) {
	old := btfPath
	btfPath = "/nonexistent/vmlinux"
	defer func() { btfPath = old }()
	err := CheckPrerequisites()
	if !errors.Is(err, ErrNoBTF) || !strings.Contains(err.Error(), "CONFIG_DEBUG_INFO_BTF") {
		t.Fatalf("got %v", err)
	}
	if _, err := NewFsync(FsyncConfig{}); !errors.Is(err, ErrNoBTF) {
		t.Fatalf("NewFsync without BTF: %v", err)
	}
}
