package merge_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/render"
)

// FuzzMerge reads an arbitrary guest and host recording as `etcdscope
// merge` does and, when both read, merges and prints them: no panic.
func FuzzMerge(f *testing.F) {
	guest := `{"type":"fsync","v":1,"start_ns":100,"end_ns":900,"total_ns":800,"pid":1,"tid":1,"comm":"etcd","syscall":"fdatasync","dev":"253:0","dev_name":"vda","requests":[{"op":"flush","flags":["preflush"],"issue_ns":200,"complete_ns":700,"dev":"253:0"}]}` + "\n"
	host := `{"type":"hypervisor","v":1,"pid":7,"clock":"CLOCK_MONOTONIC","start_ns":0}` + "\n" +
		`{"type":"hv_io","v":1,"op":"fdatasync","path":"/a.img","start_ns":300,"end_ns":600}` + "\n" +
		`{"type":"fsync","v":1,"start_ns":300,"end_ns":600,"total_ns":300,"pid":7,"tid":8,"comm":"qemu","syscall":"fdatasync","path":"/a.img"}` + "\n" +
		`{"type":"hv_summary","v":1,"images":[{"path":"/a.img"}]}` + "\n"
	f.Add([]byte(guest), []byte(host))
	f.Add([]byte(guest), []byte(`{"type":"hypervisor","v":1}`))
	f.Add([]byte(`{}`), []byte(`{"type":"hv_io","v":1,"start_ns":9,"end_ns":1}`))
	f.Fuzz(func(t *testing.T, g, h []byte) {
		recs, _, err := analysis.ReadJSONL(bytes.NewReader(g))
		if err != nil {
			return
		}
		hr, err := merge.ReadHost(bytes.NewReader(h))
		if err != nil {
			return
		}
		res, err := merge.Merge(recs, hr, merge.Options{})
		if err != nil {
			return
		}
		var images []merge.Image
		if hr.Summary != nil {
			images = hr.Summary.Images
		}
		s := merge.Summarize(res, images, "")
		if err := render.Merge(io.Discard, &s); err != nil {
			t.Fatal(err)
		}
	})
}
