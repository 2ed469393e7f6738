package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDiagnose feeds pasted evidence (what `etcdscope diagnose` reads:
// /metrics text, Prometheus API JSON, etcd logs, fio output, etcdctl
// output) through Diagnose and encodes its report: no panic on any input
// (render's FuzzDiagnose writes it as a table and as JSON). Seeds: the
// field inputs in testdata.
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
		if _, err := json.Marshal(rep); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
	})
}
