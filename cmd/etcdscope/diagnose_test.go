package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDiagnoseBadInput: unreadable file, unknown content, unreachable URL
// and bad flags give exit 2 and one line on stderr.
func TestDiagnoseBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("hello, this is not evidence\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	dead := srv.URL
	srv.Close()
	for _, args := range [][]string{
		{filepath.Join(dir, "missing.prom")},
		{junk},
		{"--timeout", "1s", dead + "/metrics"},
		{"--output", "yaml", junk},
		{"--since", "yesterday", junk},
		{},
	} {
		if os.Getenv("DIAGNOSE_CHILD") != "" {
			break
		}
		cmd := exec.Command(os.Args[0], "-test.run=TestDiagnoseChild")
		cmd.Env = append(os.Environ(), "DIAGNOSE_CHILD=1", "DIAGNOSE_ARGS="+strings.Join(args, "\x1f"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want 2 (stderr %q)", args, err, stderr.String())
			continue
		}
		if lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "etcdscope diagnose: ") {
			t.Errorf("%v: stderr %q, want one line", args, stderr.String())
		}
	}
}

// TestDiagnoseChild runs the CLI in a child process for TestDiagnoseBadInput.
func TestDiagnoseChild(t *testing.T) {
	if os.Getenv("DIAGNOSE_CHILD") == "" {
		t.Skip("helper")
	}
	var args []string
	if a := os.Getenv("DIAGNOSE_ARGS"); a != "" {
		args = strings.Split(a, "\x1f")
	}
	os.Exit(run(append([]string{"diagnose"}, args...)))
}

// TestDiagnoseURL polls an httptest /metrics twice and diagnoses the
// difference: 100 fsyncs between the scrapes, all in (1, 2] ms.
func TestDiagnoseURL(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		c := "100"
		if k > 1 {
			c = "200"
		}
		w.Write([]byte(`# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 100
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} ` + c + `
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} ` + c + `
etcd_disk_wal_fsync_duration_seconds_sum 0.1
etcd_disk_wal_fsync_duration_seconds_count ` + c + "\n"))
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "out.json")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = f
	rc := run([]string{"diagnose", "--window", "100ms", "--output", "json", srv.URL + "/metrics"})
	os.Stdout = stdout
	f.Close()
	if rc != 0 {
		t.Fatalf("exit %d", rc)
	}
	b, _ := os.ReadFile(out)
	s := string(b)
	if n.Load() != 2 || !strings.Contains(s, `"window": "between scrapes"`) || !strings.Contains(s, `"observations": 100`) || !strings.Contains(s, `"severity": "ok"`) {
		t.Errorf("scrapes %d, report %s", n.Load(), s)
	}
}
