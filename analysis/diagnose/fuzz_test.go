package diagnose

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDiagnose feeds pasted evidence (what `etcdscope diagnose` reads:
// /metrics text, Prometheus API JSON, etcd logs, fio output, etcdctl
// output) through
// Diagnose and both renderers: no panic on any input. Seeds: the field
// inputs in testdata.
func FuzzDiagnose(f *testing.F) {
	files, _ := filepath.Glob("testdata/*")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rep, err := Diagnose([]Input{{Name: "fuzz", Data: in}}, Options{})
		if err != nil {
			return
		}
		if err := WriteTable(io.Discard, rep); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(io.Discard, rep); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
	})
}
