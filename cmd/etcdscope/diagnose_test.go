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

// TestDiagnoseFailOverBudget: with --fail-over-budget, a bad finding (a
// node's /metrics from etcd #12405, WAL fsync p99 in 16-32 ms) exits 3
// after the report and names the finding on stderr; without the flag it
// exits 0; a good fio run (p99 260µs) exits 0 with the flag.
func TestDiagnoseFailOverBudget(t *testing.T) {
	bad := filepath.Join("..", "..", "analysis", "diagnose", "testdata", "etcd-12405-node.prom")
	good := filepath.Join("..", "..", "analysis", "diagnose", "testdata", "k8s-homelab-fio.txt")
	for _, c := range []struct {
		args   []string
		rc     int
		stderr string
	}{
		{[]string{"--fail-over-budget", bad}, exitOverBudget, "etcdscope diagnose: over budget: 1 bad finding(s): wal_fsync "},
		{[]string{bad}, 0, ""},
		{[]string{"--fail-over-budget", good}, 0, ""},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=TestDiagnoseChild")
		cmd.Env = append(os.Environ(), "DIAGNOSE_CHILD=1", "DIAGNOSE_ARGS="+strings.Join(c.args, "\x1f"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		rc := 0
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if rc != c.rc || !strings.HasPrefix(stderr.String(), c.stderr) || (c.stderr == "" && stderr.Len() > 0) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d, stderr %q", c.args, rc, stderr.String(), c.rc, c.stderr)
		}
		if !strings.Contains(stdout.String(), "findings:") {
			t.Errorf("%v: no report printed before the exit code:\n%s", c.args, stdout.String())
		}
	}
}
