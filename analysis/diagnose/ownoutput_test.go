package diagnose

import (
	"errors"
	"os"
	"testing"
)

// TestDetectOwnOutput: etcdscope's own outputs given to diagnose (a new
// user's walk, 2026-12-07, gave it fsync and peers JSON, captures and
// serve's /metrics) are named as such with the command that reads them,
// not only "not etcd /metrics text..." (render words them: TestDiagnoseOwnOutput).
// Real outputs from testdata.
func TestDetectOwnOutput(t *testing.T) {
	for file, want := range map[string]string{
		"../../testdata/loopback3/commit.jsonl":     "commit",
		"../../testdata/loopback3/peers.jsonl":      "peers_recording",
		"../../report/testdata/peers.jsonl":         "peer event",
		"../../report/testdata/etcd-fsync.jsonl":    "fsync",
		"../../testdata/loopback3/fsync-idle.jsonl": "summary",
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Detect(b)
		var own *OwnOutputError
		if !errors.Is(err, ErrUnknownContent) || !errors.As(err, &own) || own.What != want {
			t.Errorf("%s: %v, want an OwnOutputError of %q", file, err, want)
		}
	}
	serve := "# HELP etcdscope_fsync_duration_seconds fsync latency.\n# TYPE etcdscope_fsync_duration_seconds histogram\netcdscope_fsync_duration_seconds_bucket{le=\"+Inf\"} 3\n"
	if _, err := Detect([]byte(serve)); !errors.As(err, new(*OwnOutputError)) || err.(*OwnOutputError).What != "serve" {
		t.Errorf("serve's /metrics: %v", err)
	}
	// etcd's own /metrics is still etcd's.
	b, err := os.ReadFile("../etcdmetric/testdata/etcd-3.6.16-tls-loopback-end.prom")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := Detect(b); err != nil || k != KindMetrics {
		t.Errorf("etcd's /metrics: %v %v", k, err)
	}
}
