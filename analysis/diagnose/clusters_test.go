package diagnose

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestInputCluster reads the cluster each real sample names (testdata
// README for the sources): zap's "cluster-id", capnslog's "published ...
// to cluster", and etcdctl endpoint status JSON's header cluster_id in
// decimal, which etcd prints in hex elsewhere (by hand:
// 17237436991929493444 = 0xef37ad9dc622a7c4, 16034816922318444818 =
// 0xde871d08e5369912). A /metrics scrape names none.
func TestInputCluster(t *testing.T) {
	for file, want := range map[string]string{
		"etcd-17855-member-join.log":     "d782b9400782601d",
		"minikube-9668-mixed.log":        "4284235894e3b979",
		"etcdctl-readme-status.json":     "ef37ad9dc622a7c4",
		"weliu-nospace-status.txt":       "de871d08e5369912",
		"etcd-9544-wal-p99-ok-tail.prom": "",
	} {
		if got := InputCluster(sample(t, file)); got != want {
			t.Errorf("%s: cluster %q, want %q", file, got, want)
		}
	}
	// A zap cluster ID mismatch names the local member's cluster, not the
	// remote's (etcd-io/etcd#14433's line).
	mismatch := Input{Name: "m", Data: []byte(`{"level":"warn","msg":"request sent was ignored by remote peer due to cluster ID mismatch","remote-peer-id":"8211f1d0f64f3269","remote-peer-cluster-id":"ef37ad9dc622a7c4","local-member-id":"45d559f8148de837","local-member-cluster-id":"c32c3110806285fe","error":"cluster ID mismatch"}` + "\n")}
	if got := InputCluster(mismatch); got != "c32c3110806285fe" {
		t.Errorf("mismatch line: %q, want the local member's c32c3110806285fe", got)
	}
}

// TestSplitClusters: two or more clusters named split the inputs (the
// unnamed ones apart); one named, or none, keeps them together.
func TestSplitClusters(t *testing.T) {
	a, b := sample(t, "etcd-17855-member-join.log"), sample(t, "minikube-9668-mixed.log")
	m := sample(t, "etcd-9544-wal-p99-ok-tail.prom")
	a2 := a
	a2.Name = "the same member's log again"
	got := SplitClusters([]Input{a, m, b, a2})
	var shape [][]string
	var names []string
	for _, g := range got {
		names = append(names, g.Cluster)
		var in []string
		for _, i := range g.Inputs {
			in = append(in, i.Name)
		}
		shape = append(shape, in)
	}
	want := [][]string{{a.Name, a2.Name}, {b.Name}, {m.Name}}
	if !reflect.DeepEqual(shape, want) || !reflect.DeepEqual(names, []string{"d782b9400782601d", "4284235894e3b979", ""}) {
		t.Errorf("groups %v named %q, want %v named d782…, 4284…, \"\"", shape, names, want)
	}
	if got := SplitClusters([]Input{a, m}); len(got) != 1 || len(got[0].Inputs) != 2 || got[0].Cluster != "d782b9400782601d" {
		t.Errorf("one cluster named: %+v, want one group of both", got)
	}
}

func sample(t *testing.T, name string) Input {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return Input{Name: name, Data: b}
}
