package host

import (
	"os"
	"testing"
)

// TestQEMUOf: this test binary is no QEMU (by its exe, comm and argv[0]);
// each of the three names alone makes one.
func TestQEMUOf(t *testing.T) {
	q := QEMUOf(uint32(os.Getpid()))
	if q.Comm == "" || q.Argv0 == "" {
		t.Fatalf("own identity not read: %+v", q)
	}
	if q.IsQEMU() {
		t.Errorf("the test binary taken for QEMU: %+v", q)
	}
	for _, q := range []QEMUIdentity{{Exe: "qemu-system-x86_64"}, {Comm: "qemu-kvm"}, {Argv0: "QEMU"}} {
		if !q.IsQEMU() {
			t.Errorf("%+v not taken for QEMU", q)
		}
	}
	if (QEMUIdentity{Exe: "etcd", Comm: "etcd", Argv0: "etcd"}).IsQEMU() {
		t.Error("etcd taken for QEMU")
	}
}
