package host

import "testing"

func TestIsBlockUevent(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		want      bool
	}{
		{"dm device added", "add@/devices/virtual/block/dm-0\x00ACTION=add\x00DEVPATH=/devices/virtual/block/dm-0\x00SUBSYSTEM=block\x00MAJOR=253\x00MINOR=0\x00DEVNAME=dm-0\x00DEVTYPE=disk\x00SEQNUM=4242", true},
		{"dm table resumed", "change@/devices/virtual/block/dm-0\x00ACTION=change\x00DEVPATH=/devices/virtual/block/dm-0\x00SUBSYSTEM=block\x00DM_COOKIE=4194304\x00SEQNUM=4243\x00", true},
		{"another subsystem", "add@/devices/virtual/bdi/253:0\x00ACTION=add\x00DEVPATH=/devices/virtual/bdi/253:0\x00SUBSYSTEM=bdi\x00SEQNUM=4241", false},
		{"a key that only starts so", "add@/x\x00ACTION=add\x00SUBSYSTEM=blockx\x00", false},
		{"a value that holds it", "add@/x\x00DEVPATH=SUBSYSTEM=block\x00", false},
		{"empty", "", false},
	} {
		if got := isBlockUevent([]byte(c.msg)); got != c.want {
			t.Errorf("%s: isBlockUevent = %v, want %v", c.name, got, c.want)
		}
	}
}
