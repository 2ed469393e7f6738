// Package guestfio is the guest half of the two-kernel test
// (e2e/hypervisor_test.go): inside the VM rig it runs fio's etcd job on
// each attached drive labelled "esguestfio" under `etcdscope fsync --comm
// fio --output json`, and prints the guest recording on the console
// between marker lines for the host side to collect:
//
//	ETCDSCOPE-GUEST-BEGIN dev=vda
//	{...one JSON Lines record per line...}
//	ETCDSCOPE-GUEST-END dev=vda records=N fio_syncs=M
//
// Without such a drive (a plain `make vmtest`) its test skips.
package guestfio

// Label is the ext4 volume label (mkfs.ext4 -L) that marks a drive as
// this test's to mount and write.
const Label = "esguestfio"
