// File kinds: where a path sits in etcd's data directory (FileKind), for
// FsyncRecord.FileKind and the report's groups.

package analysis

import "strings"

// File kinds of etcd's data directory (etcd server/storage layout).
const (
	KindWAL      = "wal"      // member/wal/*.wal: the write-ahead log
	KindWALDir   = "wal-dir"  // member/wal itself (fsync after a segment cut)
	KindBackend  = "backend"  // member/snap/db: bbolt, fdatasync'd twice per commit
	KindSnapshot = "snapshot" // member/snap/*.snap
	KindOther    = "other"
)

// FileKind labels a path by its place in etcd's data directory.
func FileKind(path string) string {
	switch {
	case strings.HasSuffix(path, ".wal") && strings.Contains(path, "/wal/"):
		return KindWAL
	case strings.HasSuffix(path, "/member/wal") || strings.HasSuffix(path, "member/wal/"):
		return KindWALDir
	case strings.HasSuffix(path, "/snap/db"):
		return KindBackend
	case strings.HasSuffix(path, ".snap") && strings.Contains(path, "/snap/"):
		return KindSnapshot
	}
	return KindOther
}
