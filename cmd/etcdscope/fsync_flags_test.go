package main

import (
	"errors"
	"strings"
	"testing"
)

// TestKernelPartitionFS: --kernel-partition is refused (exit 2, naming
// the fix) where its calls' filesystem is not known to be ext4, and taken
// where it is; it was off without a word there (the walk of 2026-12-07:
// `fsync --pid ETCD --kernel-partition` without --dev).
func TestKernelPartitionFS(t *testing.T) {
	for _, tc := range []struct {
		fstypes  []string
		workload bool
		want     string // "" : accepted
	}{
		{[]string{"ext4"}, false, ""},
		{[]string{"ext4"}, true, ""},
		{nil, false, "give --dev with the disk the traced files are on"},
		{nil, true, "give a --dir on ext4"},
		{[]string{"tmpfs"}, true, "--dir is on tmpfs: drop it"},
		{[]string{"ext4", "xfs"}, false, "--dev's disk holds ext4, xfs: drop it"},
	} {
		err := kernelPartitionFS(tc.fstypes, tc.workload)
		var ue *usageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v (workload %v): refused: %v", tc.fstypes, tc.workload, err)
		case tc.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v (workload %v): %v, want a usage error saying %q", tc.fstypes, tc.workload, err, tc.want)
		}
	}
}
