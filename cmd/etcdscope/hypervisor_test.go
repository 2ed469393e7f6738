package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
)

// TestHypervisorRefusesEtcd: a README walk gave `hypervisor --pid` etcd's
// pid, and etcd's WAL and snap/db were listed as raw images. A real etcd
// member's pid now exits 2 with one line saying it is not QEMU, by its
// exe, comm and argv[0], and the fix; nothing on stdout.
func TestHypervisorRefusesEtcd(t *testing.T) {
	m := etcdtest.Start(t, etcdtest.Options{IPs: []string{"127.0.0.71"}}).Members[0]
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"hypervisor", "--pid", strconv.Itoa(m.PID), "--duration", "1s"},
		{"fsync", "--qemu", strconv.Itoa(m.PID), "--duration", "1s"},
	} {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		// The refusal names the flag the user typed.
		want := args[1] + " " + strconv.Itoa(m.PID) + ` is not a QEMU process (exe "etcd", comm "etcd", argv[0] "etcd": none names qemu): give the hypervisor's (pgrep qemu)`
		if rc := cmd.ProcessState.ExitCode(); rc != 2 || stdout.Len() != 0 || len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line with %q", strings.Join(args, " "), rc, stdout.String(), stderr.String(), want)
		}
	}
}
