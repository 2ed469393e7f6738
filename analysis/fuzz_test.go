package analysis_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/render"
)

// FuzzReadJSONL reads arbitrary recordings as `etcdscope report` does and,
// when they read, builds and prints the report: no panic on any input.
// Seeds: the first records of report/testdata's real recording, a summary
// line, and broken lines.
func FuzzReadJSONL(f *testing.F) {
	if rec, err := os.Open("../report/testdata/etcd-fsync.jsonl"); err == nil {
		sc := bufio.NewScanner(rec)
		sc.Buffer(nil, 1<<20)
		var first []byte
		for i := 0; i < 4 && sc.Scan(); i++ {
			first = append(append(first, sc.Bytes()...), '\n')
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
		rec.Close()
		f.Add(first)
	}
	f.Add([]byte(`{"type":"summary","v":1,"fsyncs":3,"lost_events":null,"loss_unknown":"x"}`))
	f.Add([]byte(`{"type":"fsync","v":1,"total_ns":-5,"layers":{"device_flush_ns":-1},"requests":[{}]}`))
	f.Add([]byte(`{"type":"fsync","v":99}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, sum, err := analysis.ReadJSONL(bytes.NewReader(in))
		if err != nil {
			return
		}
		rep := analysis.BuildReport(recs, sum.LostEvents, sum.MissedEvents, sum.Unavailable)
		rep.LossCut, rep.LossUnknown = sum.LossCut, sum.LossUnknown
		if err := render.FsyncReport(io.Discard, &rep); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(rep); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
	})
}
