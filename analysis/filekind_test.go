// Tests of filekind.go.

package analysis

import "testing"

func TestFileKind(t *testing.T) {
	for path, want := range map[string]string{
		"/var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal":   KindWAL,
		".../member/wal/0000000000000001-0000000000000abc.wal":             KindWAL,
		"/var/lib/etcd/member/wal":                                         KindWALDir,
		"/var/lib/etcd/member/snap/db":                                     KindBackend,
		"/var/lib/etcd/member/snap/0000000000000002-0000000000002711.snap": KindSnapshot,
		"/tmp/fio/etcd.0.0":                                                KindOther,
	} {
		if got := FileKind(path); got != want {
			t.Errorf("FileKind(%q) = %q, want %q", path, got, want)
		}
	}
}
