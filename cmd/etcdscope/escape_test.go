package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestOutsideStringsEscaped (issue 25): a recording whose comm holds an
// OSC title change, BEL, CR and a C1 CSI and whose path holds invalid
// UTF-8, replayed by report, and an etcd log (named with an ESC in it)
// whose lines hold the same plus a clear-screen CSI, fed to diagnose:
// nothing of it reaches stdout raw, and the escaped form is there.
func TestOutsideStringsEscaped(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	os.WriteFile(rec, []byte(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":1,"pid":1,"tid":1,"comm":"e\u001b]0;owned\u0007\r\u009b2J","syscall":"fdatasync","path":"/x/`+"\xff\xfe"+`\u001b[2J","fs":"ext4","file_kind":"wal"}`+"\n"), 0o644)
	log := filepath.Join(dir, "etcd\x1b[2J.log")
	os.WriteFile(log, []byte("2017-02-10 08:02:47.025304 W | etcdserver: apply entries took too long [250.5ms for 1 entries] \x1b]0;owned\x07\x1b[2J\rfake\xff\xfe \xc2\x9b31m\n"+
		`{"level":"warn","ts":"2022-08-30T09:19:24.521Z","caller":"etcdserver/util.go:166","msg":"apply request took too long","took":"150ms","request":"\u001b[2J\r\u009b"}`+"\n"), 0o644)
	for _, args := range [][]string{{"report", rec}, {"diagnose", log}} {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, out)
		}
		s := string(out)
		if !utf8.ValidString(s) {
			t.Errorf("%s: invalid UTF-8 on stdout:\n%q", args[0], s)
		}
		if i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
			t.Errorf("%s: control %q raw on stdout at byte %d:\n%q", args[0], s[i], i, s)
		}
		if !strings.Contains(s, `\x1b]0;owned\x07`) {
			t.Errorf("%s: the escaped OSC is not shown:\n%s", args[0], s)
		}
	}
}
