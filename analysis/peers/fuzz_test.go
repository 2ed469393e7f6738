package peers

import (
	"bufio"
	"bytes"
	"os"
	"testing"
	"time"
)

// FuzzReadEvents reads arbitrary peers recordings (etcdscope peers
// --record, report --peers) and analyzes what reads: no panic.
func FuzzReadEvents(f *testing.F) {
	if rec, err := os.Open("../../report/testdata/peers.jsonl"); err == nil {
		sc := bufio.NewScanner(rec)
		var first []byte
		for i := 0; i < 8 && sc.Scan(); i++ {
			first = append(append(first, sc.Bytes()...), '\n')
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
		rec.Close()
		f.Add(first)
	}
	f.Add([]byte(`{"kind":"open","time_ns":1,"socket":1,"direction":"active","local":"10.0.0.1:40000","remote":"10.0.0.2:2380","duration_ns":1000}` + "\n" +
		`{"kind":"close","time_ns":0,"socket":1,"local":"10.0.0.1:40000","remote":"10.0.0.2:2380"}`))
	// A setup longer than the time in use (the uint64 subtraction in the
	// per-request test must not wrap).
	f.Add([]byte(`{"kind":"open","time_ns":1,"socket":1,"direction":"active","local":"10.0.0.1:40000","remote":"10.0.0.2:2380","duration_ns":1000}` + "\n" +
		`{"kind":"setup","time_ns":2,"socket":1,"direction":"active","local":"10.0.0.1:40000","remote":"10.0.0.2:2380","duration_ns":9000000000}` + "\n" +
		`{"kind":"close_start","time_ns":3,"socket":1,"local":"10.0.0.1:40000","remote":"10.0.0.2:2380","duration_ns":5000}`))
	f.Add([]byte(`{"kind":"nosuch"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, err := ReadEvents(bytes.NewReader(in))
		if err != nil {
			return
		}
		Analyze(evs, Options{Window: time.Minute})
	})
}
